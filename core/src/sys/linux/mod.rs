//! Linux socket adapter. See the parent module for the overview.
//!
//! All functions take borrowed file descriptors (`BorrowedFd`, or anything
//! `AsFd`) so that the application keeps ownership of its sockets: opsel acts
//! on a live connection, it never closes it.

pub mod cca;
pub mod clock;
pub mod pacing_rate;
pub mod qdisc;
pub mod receiver;
pub mod rtt;
pub mod sender;
pub mod tcp_info;
pub mod wire;

mod netlink;
mod sockopt;

pub use cca::{allowed_ccas, available_ccas, get_cca, set_cca, Cca};
pub use pacing_rate::{get_max_pacing_rate, set_max_pacing_rate};
pub use tcp_info::{tcp_info, TcpInfo, TcpInfoSampler, TcpInterval};
