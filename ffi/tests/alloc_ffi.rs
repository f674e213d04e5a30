//! DESIGN.md: "Zero allocation on hot paths … a test with a counting global
//! allocator proves 0 allocations per call." The C ABI must not add any:
//! `opsel_model_classify` with a workspace from `opsel_workspace_new`
//! allocates nothing, including the status/last-error bookkeeping.
//! (Own file: it replaces the global allocator.)

use opsel_ffi::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::CString;
use std::ptr;

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) }
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
        unsafe { System.realloc(p, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> usize {
    ALLOCS.with(|a| a.get())
}

#[test]
fn classify_through_the_c_abi_allocates_nothing() {
    let path = CString::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/knn_golden.model.json"
    ))
    .unwrap();
    let text = std::fs::read_to_string(path.to_str().unwrap()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let windows: Vec<Vec<f64>> = v["references"]["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            w.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() + 1.5)
                .collect()
        })
        .collect();
    unsafe {
        let mut model = ptr::null_mut();
        assert_eq!(
            opsel_model_load(path.as_ptr(), &mut model),
            opsel_status::OPSEL_OK
        );
        let mut ws = ptr::null_mut();
        assert_eq!(opsel_workspace_new(model, &mut ws), opsel_status::OPSEL_OK);
        let mut p = std::mem::zeroed::<opsel_prediction>();
        // Warm up: the first call may size thread-locals.
        opsel_model_classify(model, ws, windows[0].as_ptr(), 20, &mut p);
        // An error in between leaves a message; the next success clears it
        // without allocating.
        assert_eq!(
            opsel_model_classify(model, ws, windows[0].as_ptr(), 19, &mut p),
            opsel_status::OPSEL_INVALID_INPUT
        );
        opsel_model_classify(model, ws, windows[0].as_ptr(), 20, &mut p);
        let before = allocs();
        for w in &windows {
            let st = opsel_model_classify(model, ws, w.as_ptr(), w.len(), &mut p);
            assert_eq!(st, opsel_status::OPSEL_OK);
        }
        let mut d = 0.0;
        let after = allocs();
        assert_eq!(
            after - before,
            0,
            "{} allocations in {} classify calls",
            after - before,
            windows.len()
        );
        // dtw_distance documents its temporary row buffer; it must still work.
        assert_eq!(
            opsel_dtw_distance(
                windows[0].as_ptr(),
                20,
                windows[1].as_ptr(),
                20,
                10,
                0,
                &mut d
            ),
            opsel_status::OPSEL_OK
        );
        opsel_workspace_free(ws);
        opsel_model_free(model);
    }
}
