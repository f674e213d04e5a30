"""Exception classes raised by opsel (the Rust core maps its error kinds here)."""


class OpselError(Exception):
    """Base class of every error opsel raises."""


class InvalidInputError(OpselError, ValueError):
    """A value passed to opsel is invalid (NaN sample, wrong window length, k too large, ...)."""


class InvalidModelError(OpselError, ValueError):
    """A model file or model JSON is corrupt, foreign or inconsistent."""


class UnsupportedVersionError(InvalidModelError):
    """The model file declares a format version this opsel does not read."""


class OpselIOError(OpselError, OSError):
    """An operating-system call failed (file, socket)."""


class OpselPermissionError(OpselError, PermissionError):
    """The operation needs a privilege the process does not have."""


class UnsupportedError(OpselError):
    """The platform or kernel does not offer the requested feature."""
