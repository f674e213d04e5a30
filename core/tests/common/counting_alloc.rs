//! The counting global allocator behind the zero-allocation tests (DESIGN.md:
//! hot paths allocate nothing). Include it with
//! `#[path = "common/counting_alloc.rs"] mod counting_alloc;` — each test file
//! is its own binary, so each gets its own `#[global_allocator]`.
//!
//! Only the measuring thread is counted: the test harness allocates on its own
//! threads while a test runs, and counting those made a global counter flaky.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    // Const-initialised, no destructor: safe to touch from inside the allocator.
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
}

pub struct Counting;

fn note() {
    if ACTIVE.with(|a| a.get()) {
        COUNT.with(|c| c.set(c.get() + 1));
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        note();
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Run `f` and return its result with the number of allocations (and
/// reallocations) it made on this thread.
pub fn count<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = COUNT.with(|c| c.get());
    ACTIVE.with(|a| a.set(true));
    let r = f();
    ACTIVE.with(|a| a.set(false));
    (r, COUNT.with(|c| c.get()) - before)
}
