//! DESIGN.md: "Zero allocation on hot paths … a test with a counting global
//! allocator proves 0 allocations per call." The C ABI must not add any:
//! `opsel_model_classify` with a workspace from `opsel_workspace_new`
//! allocates nothing, including the status/last-error bookkeeping.
//! (Own file: it replaces the global allocator.)

use opsel_ffi::*;
use std::ffi::CString;
use std::ptr;

// The workspace's one counting allocator (counts this thread's allocations).
#[path = "../../core/tests/common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

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
        let ((), allocs) = count(|| {
            for w in &windows {
                let st = opsel_model_classify(model, ws, w.as_ptr(), w.len(), &mut p);
                assert_eq!(st, opsel_status::OPSEL_OK);
            }
        });
        assert_eq!(
            allocs,
            0,
            "{allocs} allocations in {} classify calls",
            windows.len()
        );
        let mut d = 0.0;
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
