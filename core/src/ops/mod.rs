//! OPS controller (in progress).
