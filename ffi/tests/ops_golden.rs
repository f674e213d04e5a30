//! tests/fixtures/ops_golden.json is what the core controller produces today
//! (regenerate with `make golden-ops` after a deliberate change), and the C
//! ABI controller reproduces it output for output.

#[path = "../../research/fixtures/make_ops_golden.rs"]
#[allow(dead_code)]
mod generator;

use opsel_ffi::*;
use serde_json::Value;
use std::ffi::{CStr, CString};
use std::path::PathBuf;
use std::ptr;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn golden() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join("ops_golden.json")).unwrap())
        .unwrap()
}

#[test]
fn fixture_is_fresh() {
    let fresh = generator::build(&fixtures()).unwrap();
    assert!(
        fresh == golden(),
        "tests/fixtures/ops_golden.json differs from what the core controller produces now; \
         if the controller changed on purpose run `make golden-ops` and review the diff"
    );
}

fn cstr(a: &[std::ffi::c_char]) -> String {
    unsafe { CStr::from_ptr(a.as_ptr()) }
        .to_str()
        .unwrap()
        .to_string()
}

/// The fixture's canonical line from a C output struct.
fn render(o: &opsel_ops_output) -> String {
    let until = if o.has_until {
        o.until_ns.to_string()
    } else {
        "none".into()
    };
    let phases = ["idle", "probe", "classify", "select", "steady"];
    match o.kind {
        OPSEL_OPS_SET_CCA => format!("set_cca {}", cstr(&o.cca)),
        OPSEL_OPS_SEND_FULL_SPEED => format!("send_full_speed {} until={until}", cstr(&o.cca)),
        OPSEL_OPS_SILENCE => format!("silence until={until}"),
        OPSEL_OPS_STEADY => format!("steady {} until={until}", cstr(&o.cca)),
        OPSEL_OPS_EVENT_PHASE => format!(
            "phase {} cycle={} at={}",
            phases[o.phase as usize], o.cycle, o.at_ns
        ),
        OPSEL_OPS_EVENT_CLASSIFIED => format!(
            "classified {} samples={} early={} at={}",
            unsafe { CStr::from_ptr(o.label) }.to_str().unwrap(),
            o.samples,
            o.early,
            o.at_ns
        ),
        OPSEL_OPS_EVENT_SELECTED => {
            format!("selected {} steady={until} at={}", cstr(&o.cca), o.at_ns)
        }
        OPSEL_OPS_EVENT_DECISION_FAILED => format!("decision_failed at={}", o.at_ns),
        OPSEL_OPS_EVENT_PROBE_INCOMPLETE => {
            format!(
                "probe_incomplete samples={} needed={} at={}",
                o.samples, o.needed, o.at_ns
            )
        }
        k => panic!("unknown kind {k}"),
    }
}

#[test]
fn c_abi_controller_matches_the_fixture() {
    let g = golden();
    let path = CString::new(fixtures().join("knn_golden.model.json").to_str().unwrap()).unwrap();
    let mut model = ptr::null_mut();
    assert_eq!(
        unsafe { opsel_model_load(path.as_ptr(), &mut model) },
        opsel_status::OPSEL_OK
    );
    let trace: Vec<f64> = g["trace_rtt_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    for sc in g["scenarios"].as_array().unwrap() {
        let c = &sc["config"];
        let mut cfg = if c["mode"] == "active" {
            opsel_ops_config_active()
        } else {
            opsel_ops_config_passive()
        };
        let pattern = c["pattern"].as_str().map(|p| CString::new(p).unwrap());
        if let Some(p) = &pattern {
            cfg.pattern = p.as_ptr();
        }
        cfg.steady_ns = c["steady_s"].as_u64().unwrap() * 1_000_000_000;
        cfg.adaptive = c["adaptive"].as_bool() == Some(true);
        cfg.check_model = c["check_model"].as_bool() != Some(false);
        let lens: Vec<usize> = c["prefix_lens"]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_u64().unwrap() as usize).collect())
            .unwrap_or_default();
        if c["progressive"].as_bool() == Some(true) {
            cfg.progressive = true;
            cfg.prefix_lens = lens.as_ptr();
            cfg.prefix_lens_len = lens.len();
        }
        let mut policy = ptr::null_mut();
        let spec = CString::new(c["policy"].as_str().unwrap()).unwrap();
        let st = if c["policy"] == "stump" {
            unsafe { opsel_ops_policy_stump(ptr::null(), ptr::null(), &mut policy) }
        } else {
            unsafe { opsel_ops_policy_table(spec.as_ptr(), &mut policy) }
        };
        assert_eq!(st, opsel_status::OPSEL_OK);
        let mut ctl = ptr::null_mut();
        assert_eq!(
            unsafe { opsel_ops_controller_new(model, policy, &cfg, &mut ctl) },
            opsel_status::OPSEL_OK
        );
        unsafe { opsel_ops_policy_free(policy) };
        let mut lines = Vec::new();
        let mut drain = |ctl| loop {
            let mut o = unsafe { std::mem::zeroed::<opsel_ops_output>() };
            let mut has = false;
            assert_eq!(
                unsafe { opsel_ops_controller_poll(ctl, &mut o, &mut has) },
                opsel_status::OPSEL_OK
            );
            if !has {
                break;
            }
            lines.push(render(&o));
        };
        assert_eq!(
            unsafe { opsel_ops_controller_start(ctl, 0) },
            opsel_status::OPSEL_OK
        );
        drain(ctl);
        for (k, &r) in trace.iter().enumerate() {
            let t = (k as u64 + 1) * 1_000_000_000;
            assert_eq!(
                unsafe { opsel_ops_controller_handle_timeout(ctl, t) },
                opsel_status::OPSEL_OK
            );
            assert_eq!(
                unsafe { opsel_ops_controller_handle_sample(ctl, t, r) },
                opsel_status::OPSEL_OK
            );
            drain(ctl);
        }
        let want: Vec<String> = sc["expected"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(lines, want, "{}", sc["name"]);
        unsafe { opsel_ops_controller_free(ctl) };
    }
    unsafe { opsel_model_free(model) };
}

#[test]
fn null_and_bad_input_never_crash() {
    let mut ctl = ptr::null_mut();
    assert_eq!(
        unsafe { opsel_ops_controller_new(ptr::null(), ptr::null(), ptr::null(), &mut ctl) },
        opsel_status::OPSEL_NULL_POINTER
    );
    assert_eq!(
        unsafe { opsel_ops_controller_start(ptr::null_mut(), 0) },
        opsel_status::OPSEL_NULL_POINTER
    );
    let mut cfg = opsel_ops_config_passive();
    cfg.mode = 9;
    let path = CString::new(fixtures().join("knn_golden.model.json").to_str().unwrap()).unwrap();
    let mut model = ptr::null_mut();
    assert_eq!(
        unsafe { opsel_model_load(path.as_ptr(), &mut model) },
        opsel_status::OPSEL_OK
    );
    assert_eq!(
        unsafe { opsel_ops_controller_new(model, ptr::null(), &cfg, &mut ctl) },
        opsel_status::OPSEL_INVALID_INPUT
    );
    let msg = unsafe { CStr::from_ptr(opsel_last_error_message()) }
        .to_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("config.mode 9"), "{msg}");
    let mut buf = [0 as std::ffi::c_char; 16];
    assert_eq!(
        unsafe { opsel_cca_get(-3, buf.as_mut_ptr(), 16) },
        opsel_status::OPSEL_INVALID_INPUT
    );
    assert_eq!(
        unsafe { opsel_cca_set(0, ptr::null(), ptr::null_mut()) },
        opsel_status::OPSEL_NULL_POINTER
    );
    let mut sender = ptr::null_mut();
    let dst = CString::new("not an address").unwrap();
    assert_eq!(
        unsafe {
            opsel_paced_sender_new(dst.as_ptr(), ptr::null(), 1472, ptr::null(), &mut sender)
        },
        opsel_status::OPSEL_INVALID_INPUT
    );
    assert!(sender.is_null());
    unsafe { opsel_model_free(model) };
}
