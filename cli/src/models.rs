//! Where the CLI finds its models: the `opsel-transfer` crate's rule
//! (`opsel_transfer::models`), shared with the bindings' OPS sends.

pub use opsel_transfer::models::*;
