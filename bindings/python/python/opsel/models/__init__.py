"""The trained models opsel ships, as package data.

Each shipped model is a folder named after it (``passive``, ``active-s5c5s5b5``,
``bwe-live``, ...) holding the model file and its card. The folders are copied
from the repository's ``models/`` when the package is built (``make python``,
``make dist``), so an installed wheel finds them next to this file, wherever
the process runs from.

    import opsel
    model = opsel.load_model(opsel.models.path("passive"))
    opsel.models.names()          # every shipped model
    opsel.models.card("passive")  # its MODEL_CARD.md

``$OPSEL_MODELS`` (a folder laid out like ``models/``) takes precedence, as it
does for the ``opsel`` command-line tool.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["card", "directory", "names", "path"]

_PACKAGED = Path(__file__).resolve().parent


def directory() -> Path:
    """The folder the shipped models are read from.

    ``$OPSEL_MODELS`` if set; else the package data next to this module; else,
    in a source checkout whose package data was not staged, the checkout's
    ``models/`` (found from this file's location, never from the current directory).
    """
    env = os.environ.get("OPSEL_MODELS")
    if env:
        return Path(env)
    if _has_models(_PACKAGED):
        return _PACKAGED
    checkout = _PACKAGED.parents[4] if len(_PACKAGED.parents) > 4 else None
    if checkout is not None and (checkout / "Cargo.toml").is_file() and _has_models(checkout / "models"):
        return checkout / "models"
    return _PACKAGED


def _has_models(d: Path) -> bool:
    return d.is_dir() and any(p.is_dir() and _model_file(p) is not None for p in d.iterdir())


def _model_file(d: Path) -> Path | None:
    """model.json when present (the K-NN models); else the folder's one JSON file (the estimators)."""
    if (d / "model.json").is_file():
        return d / "model.json"
    files = sorted(d.glob("*.json"))
    return files[0] if len(files) == 1 else None


def names() -> list[str]:
    """Names of the shipped models, sorted."""
    d = directory()
    if not d.is_dir():
        return []
    return sorted(p.name for p in d.iterdir() if p.is_dir() and _model_file(p) is not None)


def path(name: str) -> str:
    """Path of the model file of the shipped model ``name`` (e.g. ``"passive"``).

    Raises ``opsel.InvalidInputError`` (a ``ValueError``) naming the available
    models when ``name`` is not one of them.
    """
    from .._errors import InvalidInputError

    d = directory()
    if not name or "/" in name or os.sep in name or name.startswith("."):
        raise InvalidInputError(f"model name {name!r} is not a plain name; use one of: {', '.join(names())}")
    f = _model_file(d / name)
    if f is None:
        available = names()
        hint = ", ".join(available) if available else f"none found in {d} (set $OPSEL_MODELS to a models folder)"
        raise InvalidInputError(f"no shipped model named {name!r}; available: {hint}")
    return str(f)


def card(name: str) -> str:
    """The model card (MODEL_CARD.md, or README.md) of the shipped model ``name``."""
    from .._errors import InvalidInputError

    d = Path(path(name)).parent
    for f in ("MODEL_CARD.md", "README.md"):
        if (d / f).is_file():
            return (d / f).read_text(encoding="utf-8")
    raise InvalidInputError(f"the shipped model {name!r} has no card in {d}")
