//! opsel-netlab: an emulated shared WAN on one Linux machine (000 §2.3).
//!
//! A dumbbell of network namespaces ([`topo`]) joined through a router
//! namespace whose bottleneck is a user-space Dummynet-like pipe on TUN
//! devices ([`pipe`]: rate → byte-limited drop-tail queue → fixed delay,
//! seeded random loss) or a kernel htb/tbf + bfifo; traffic generators
//! ([`traffic`]: bulk TCP with a chosen CCA, square waves, ALT-X, UDP) and the
//! passive RTT probe; TOML scenarios ([`scenario`]) run by [`run`].
//!
//! Everything needs root (namespaces, TUN). Namespaces are named `onl…` and
//! removed on drop; `opsel lab down` removes leftovers of crashed runs.

pub mod collect;
pub mod experiments;
pub mod flows_exp;
pub mod pipe;
pub mod qos_exp;
pub mod run;
pub mod scenario;
pub mod sys;
pub mod topo;
pub mod tput_logs;
pub mod tput_store;
pub mod traffic;

pub use run::{jain, run, run_in_lab, write_outputs, RunResult, Summary};
pub use scenario::Scenario;
pub use topo::{Lab, PipeKind, PipeSpec, TopologySpec};
