//! `opsel send` / `opsel recv` / `opsel serve` / `opsel demo`: the command
//! line over the `opsel-transfer` crate (protocol v4, the hashing threads,
//! the send and receive loops), which the C, Python and Node bindings wrap
//! too, OPS included (`opsel_transfer::ops`). What stays here: argument
//! parsing, progress display, DPS on its own (fairness manager), the decision
//! cache and the log.

pub mod args;
pub mod demo;
pub mod send;

pub use opsel_transfer::{proto, recv};
