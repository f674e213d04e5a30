//! sim (in progress)
