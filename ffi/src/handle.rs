//! The opaque handles of the C API (after rustls-ffi's `Castable`): C holds a
//! `*mut T` made by `Box::into_raw`; [`Handle`] is the one place that turns
//! it back into a reference or a box, checking NULL and naming the handle in
//! the error, and releasing it without letting a panic unwind into C.

use crate::error::Fail;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A type C sees only as an opaque pointer.
pub(crate) trait Handle: Sized {
    /// How messages name it ("workspace is NULL; pass a valid pointer").
    const NAME: &'static str;

    /// Hand `self` to C through a (checked, cleared) out-pointer.
    fn into_out(self, out: &mut *mut Self) {
        *out = Box::into_raw(Box::new(self));
    }

    /// Borrow a handle, rejecting NULL.
    ///
    /// # Safety
    /// `p` is NULL or a handle of this type from [`Handle::into_out`], not
    /// yet freed and not borrowed mutably for `'a`.
    unsafe fn borrow<'a>(p: *const Self) -> Result<&'a Self, Fail> {
        // SAFETY: the caller's promise.
        unsafe { p.as_ref() }.ok_or_else(|| Fail::null(Self::NAME))
    }

    /// Borrow a handle mutably, rejecting NULL.
    ///
    /// # Safety
    /// As [`Handle::borrow`], and no other borrow of it for `'a` (the C
    /// documentation of every such function says the handle must not be used
    /// by another thread at the same time).
    unsafe fn borrow_mut<'a>(p: *mut Self) -> Result<&'a mut Self, Fail> {
        // SAFETY: the caller's promise.
        unsafe { p.as_mut() }.ok_or_else(|| Fail::null(Self::NAME))
    }

    /// Release a handle (NULL ignored). A panic in a destructor is caught
    /// here, so no `opsel_*_free` unwinds into C.
    ///
    /// # Safety
    /// `p` is NULL or a handle of this type from [`Handle::into_out`] that
    /// was not freed before and is not in use.
    unsafe fn free(p: *mut Self) {
        if !p.is_null() {
            // SAFETY: the caller's promise.
            release(|| drop(unsafe { Box::from_raw(p) }));
        }
    }
}

/// Run a destructor of something C hands back (a handle, a string), catching
/// a panic: the `opsel_*_free` functions return nothing, so unlike
/// [`crate::error::guard`] this leaves the thread's last error alone.
pub(crate) fn release(destroy: impl FnOnce()) {
    // AssertUnwindSafe: nothing of what is destroyed is used after.
    let _ = catch_unwind(AssertUnwindSafe(destroy));
}

/// `impl Handle for T { const NAME = name; }` for each handle type.
macro_rules! handles {
    ($($t:ty => $name:literal),* $(,)?) => {
        $( impl Handle for $t { const NAME: &'static str = $name; } )*
    };
}

handles! {
    crate::model::opsel_model => "model",
    crate::knn::opsel_workspace => "workspace",
    crate::bwe::opsel_bwe_workspace => "workspace",
    crate::bwe::opsel_bwe_ml => "ml",
    crate::bwe::opsel_rate_adapter => "adapter",
    crate::fastprob::opsel_fastprob_model => "model",
    crate::fastprob::opsel_fastprob_probe => "probe",
    crate::flows::opsel_alpha_identifier => "identifier",
    crate::flows::opsel_decision_cache => "cache",
}

#[cfg(target_os = "linux")]
handles! {
    crate::dps::opsel_dps_agent => "agent",
    crate::dps::opsel_fair_manager => "manager",
    crate::ops::opsel_ops_policy => "policy",
    crate::ops::opsel_ops_controller => "controller",
    crate::ops_driver::opsel_ops_driver => "driver",
    crate::sys::opsel_tcp_sampler => "sampler",
    crate::sys::opsel_paced_sender => "sender",
    crate::sys::opsel_probe_receiver => "receiver",
    crate::sys::opsel_rtt_prober => "prober",
    crate::sys::opsel_udp_echo_responder => "responder",
    crate::transfer::opsel_stop => "stop",
}
