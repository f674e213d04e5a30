//! The C ABI's `opsel_ops_config.cycles` (several windows per decision,
//! min-sum): default 1, validated, and reaching the controller, whose
//! per-window events come out as `OPSEL_OPS_EVENT_CYCLE_CLASSIFIED`.

use opsel_ffi::*;
use std::ffi::{CStr, CString};
use std::path::PathBuf;
use std::ptr;

const S: u64 = 1_000_000_000;

fn model() -> *mut opsel_model {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/knn_golden.model.json");
    let path = CString::new(path.to_str().unwrap()).unwrap();
    let mut m = ptr::null_mut();
    assert_eq!(
        unsafe { opsel_model_load(path.as_ptr(), &mut m) },
        opsel_status::OPSEL_OK
    );
    m
}

#[test]
fn cycles_default_validation_and_events() {
    assert_eq!(opsel_ops_config_passive().cycles, 1);
    assert_eq!(opsel_ops_config_active().cycles, 1);
    let m = model();
    let mut ctl = ptr::null_mut();
    for bad in [0usize, 101] {
        let mut cfg = opsel_ops_config_passive();
        cfg.cycles = bad;
        assert_eq!(
            unsafe { opsel_ops_controller_new(m, ptr::null(), &cfg, &mut ctl) },
            opsel_status::OPSEL_INVALID_INPUT
        );
        let msg = unsafe { CStr::from_ptr(opsel_last_error_message()) }
            .to_str()
            .unwrap()
            .to_string();
        assert!(msg.contains(&format!("cycles = {bad}")), "{msg}");
        assert!(ctl.is_null());
    }
    let mut cfg = opsel_ops_config_passive();
    cfg.cycles = 3;
    assert_eq!(
        unsafe { opsel_ops_controller_new(m, ptr::null(), &cfg, &mut ctl) },
        opsel_status::OPSEL_OK
    );
    let w = unsafe { opsel_model_window(m) };
    assert_eq!(w, 20);
    assert_eq!(
        unsafe { opsel_ops_controller_start(ctl, 0) },
        opsel_status::OPSEL_OK
    );
    let mut windows = Vec::new();
    let mut decided = None;
    for t in 1..=(3 * w as u64) {
        assert_eq!(
            unsafe { opsel_ops_controller_handle_sample(ctl, t * S, 60.0 + (t % 7) as f64) },
            opsel_status::OPSEL_OK
        );
        loop {
            let mut o = unsafe { std::mem::zeroed::<opsel_ops_output>() };
            let mut has = false;
            assert_eq!(
                unsafe { opsel_ops_controller_poll(ctl, &mut o, &mut has) },
                opsel_status::OPSEL_OK
            );
            if !has {
                break;
            }
            if o.kind == OPSEL_OPS_EVENT_CYCLE_CLASSIFIED {
                let label = unsafe { CStr::from_ptr(o.label) }.to_str().unwrap();
                assert!(!label.is_empty());
                assert!((0.0..=1.0).contains(&o.confidence));
                assert_eq!(o.windows, 3);
                windows.push((o.window, o.at_ns / S, o.leader));
            }
            if o.kind == OPSEL_OPS_EVENT_CLASSIFIED {
                decided = Some((o.class_index, o.samples));
            }
        }
    }
    let w64 = w as u64;
    assert_eq!(
        windows.iter().map(|x| (x.0, x.1)).collect::<Vec<_>>(),
        [(0, w64), (1, 2 * w64), (2, 3 * w64)]
    );
    let (class, samples) = decided.unwrap();
    assert_eq!(samples, 3 * w);
    assert_eq!(
        class, windows[2].2,
        "the decision is the last min-sum leader"
    );
    unsafe { opsel_ops_controller_free(ctl) };
    unsafe { opsel_model_free(m) };
}
