//! Ctrl-C and SIGTERM as a flag. Long-running drivers (transfers, the
//! emulated WAN, recordings) poll [`interrupted`] and return through their
//! normal path, so RAII guards close sockets and remove network namespaces
//! instead of leaking them when the user presses Ctrl-C.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Route SIGINT and SIGTERM to the flag read by [`interrupted`]. Idempotent;
/// a process that installs it is expected to poll [`interrupted`].
pub fn install_interrupt_handler() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

/// True once SIGINT or SIGTERM arrived after [`install_interrupt_handler`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// The flag itself, to hand to a driver as its stop flag
/// ([`OpsDriver::run`](super::ops_driver::OpsDriver::run),
/// [`send_fixed`](super::ops_driver::send_fixed)): Ctrl-C then ends the
/// transfer through its normal path without a thread relaying the flag.
pub fn interrupt_flag() -> &'static AtomicBool {
    &INTERRUPTED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigterm_sets_the_flag() {
        install_interrupt_handler();
        // SAFETY: raise(2) delivers to this thread; the handler above is installed.
        unsafe { libc::raise(libc::SIGTERM) };
        assert!(interrupted());
    }
}
