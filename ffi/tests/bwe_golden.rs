//! The bandwidth-estimation golden fixture (tests/fixtures/bwe_golden.json) through
//! the C ABI: BASS/ABest, single-rate decisions, ML estimates, p-stream rates and the
//! rate adapter equal the core's values; bad input gets a status and a message.

use opsel_ffi::*;
use serde_json::Value;
use std::ffi::{CStr, CString};
use std::path::PathBuf;
use std::ptr;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn golden() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join("bwe_golden.json")).unwrap())
        .unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn close(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * want.abs().max(1.0)
}

fn last_error() -> String {
    unsafe { CStr::from_ptr(opsel_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

fn spec_of(s: &Value) -> opsel_pstream_spec {
    let mut out = opsel_pstream_spec_thesis(1.0);
    let st = unsafe {
        opsel_pstream_spec_with_range(
            s["r_avg_bps"].as_f64().unwrap(),
            s["n_rates"].as_u64().unwrap() as usize,
            s["packets_per_rate"].as_u64().unwrap() as usize,
            s["range"].as_f64().unwrap(),
            s["packet_bytes"].as_u64().unwrap() as u32,
            &mut out,
        )
    };
    assert_eq!(st, opsel_status::OPSEL_OK, "{}", last_error());
    assert!(close(out.spread, s["spread"].as_f64().unwrap(), 1e-15));
    out
}

fn check(a: &opsel_abest, want: &Value, tol: f64, what: &str) {
    assert!(
        close(a.abest_bps, want["abest_bps"].as_f64().unwrap(), tol),
        "{what}: {} vs {}",
        a.abest_bps,
        want["abest_bps"]
    );
    assert_eq!(
        a.excursion_start,
        want["excursion_start"].as_i64().unwrap_or(-1),
        "{what}"
    );
    assert_eq!(
        a.below_range,
        want["below_range"].as_bool().unwrap(),
        "{what}"
    );
    assert_eq!(
        a.above_range,
        want["above_range"].as_bool().unwrap(),
        "{what}"
    );
}

#[test]
fn golden_estimates_through_the_c_abi() {
    let g = golden();
    let tol = g["tolerance"]["relative"].as_f64().unwrap();
    let mut ws = ptr::null_mut();
    assert_eq!(
        unsafe { opsel_bwe_workspace_new(320, &mut ws) },
        opsel_status::OPSEL_OK
    );
    let path = CString::new(
        fixtures()
            .join(g["model_file"].as_str().unwrap())
            .to_str()
            .unwrap(),
    )
    .unwrap();
    let mut ml = ptr::null_mut();
    assert_eq!(
        unsafe { opsel_bwe_ml_load(path.as_ptr(), 64, &mut ml) },
        opsel_status::OPSEL_OK,
        "{}",
        last_error()
    );
    let thesis = opsel_bass_config_thesis();
    let mut relative = thesis;
    assert_eq!(
        unsafe {
            opsel_bass_config_relative(g["reference_gap_ns"].as_f64().unwrap(), &mut relative)
        },
        opsel_status::OPSEL_OK
    );
    let centred = opsel_bass_config {
        window_align: OPSEL_BASS_WINDOW_CENTRED,
        ..thesis
    };
    let ab = opsel_abest_config_default();
    for (i, s) in g["streams"].as_array().unwrap().iter().enumerate() {
        let spec = spec_of(&s["spec"]);
        let (gs, gr) = (floats(&s["send_gaps_ns"]), floats(&s["recv_gaps_ns"]));
        for (cfg, key) in [
            (ptr::null(), "bass_thesis"),
            (&thesis as *const _, "bass_thesis"),
            (&relative as *const _, "bass_relative"),
            (&centred as *const _, "bass_centred"),
        ] {
            let mut a = opsel_abest {
                abest_bps: 0.0,
                excursion_start: 0,
                below_range: false,
                above_range: false,
            };
            let st = unsafe {
                opsel_bwe_estimate(
                    ws,
                    gs.as_ptr(),
                    gr.as_ptr(),
                    gs.len(),
                    &spec,
                    cfg,
                    &ab,
                    &mut a,
                )
            };
            assert_eq!(st, opsel_status::OPSEL_OK, "{}", last_error());
            check(&a, &s[key], tol, &format!("stream {i} {key}"));
        }
        let mut y = 0.0;
        let st = unsafe {
            opsel_bwe_ml_estimate(ml, gs.as_ptr(), gr.as_ptr(), 64, spec.r_avg_bps, &mut y)
        };
        assert_eq!(st, opsel_status::OPSEL_OK, "{}", last_error());
        assert!(
            close(y, s["ml_bps"].as_f64().unwrap(), tol),
            "stream {i} ML {y}"
        );
    }
    for (i, s) in g["single_rate"].as_array().unwrap().iter().enumerate() {
        let (gs, gr) = (floats(&s["send_gaps_ns"]), floats(&s["recv_gaps_ns"]));
        for (tolr, key) in [(0.0, "exceeds_thesis_rule"), (0.02, "exceeds_tol_0_02")] {
            let mut ex = false;
            let st = unsafe {
                opsel_bwe_decide_single_rate(
                    ws,
                    gs.as_ptr(),
                    gr.as_ptr(),
                    gs.len(),
                    ptr::null(),
                    tolr,
                    &mut ex,
                )
            };
            assert_eq!(st, opsel_status::OPSEL_OK, "{}", last_error());
            assert_eq!(ex, s[key].as_bool().unwrap(), "single {i} {key}");
        }
    }
    // Ch 5 baselines: Pathload PCT/PDT on the OWDs, and the three single-rate trends.
    let trend_code = |v: &Value| match v.as_str().unwrap() {
        "increasing" => OPSEL_TREND_INCREASING,
        "no_trend" => OPSEL_TREND_NO_TREND,
        "ambiguous" => OPSEL_TREND_AMBIGUOUS,
        other => panic!("unknown trend {other}"),
    };
    let mut seen = std::collections::HashSet::new();
    for (i, s) in g["baselines"].as_array().unwrap().iter().enumerate() {
        let (gs, gr) = (floats(&s["send_gaps_ns"]), floats(&s["recv_gaps_ns"]));
        let mut owd = vec![0.0; gs.len()];
        let mut d = 0.0;
        for k in 0..gs.len() {
            d += gr[k] - gs[k];
            owd[k] = d;
        }
        let (mut pct, mut pdt, mut tr) = (0.0, 0.0, 99u32);
        let st = unsafe { opsel_bwe_trend(owd.as_ptr(), owd.len(), &mut pct, &mut pdt, &mut tr) };
        assert_eq!(st, opsel_status::OPSEL_OK, "{}", last_error());
        assert!(
            close(pct, s["owd_pct"].as_f64().unwrap(), tol),
            "baseline {i} pct {pct}"
        );
        assert!(
            close(pdt, s["owd_pdt"].as_f64().unwrap(), tol),
            "baseline {i} pdt {pdt}"
        );
        assert_eq!(tr, trend_code(&s["owd_trend"]), "baseline {i} owd trend");
        for (b, key) in [
            (OPSEL_BASELINE_PATHLOAD, "pathload"),
            (OPSEL_BASELINE_IMR_AVG, "imr_avg"),
            (OPSEL_BASELINE_IMR_WAVELET, "imr_wavelet_3"),
        ] {
            let mut t = 99u32;
            let st =
                unsafe { opsel_bwe_baseline(ws, gs.as_ptr(), gr.as_ptr(), gs.len(), b, 3, &mut t) };
            assert_eq!(st, opsel_status::OPSEL_OK, "{}", last_error());
            assert_eq!(t, trend_code(&s[key]), "baseline {i} {key}");
            seen.insert(t);
        }
    }
    assert_eq!(seen.len(), 3, "the fixture covers all three trends");
    // Rates and send gaps of the thesis stream (001 §1.3 golden: 5.746/6.608/7.599/8.738 Gbps).
    let t7 = opsel_pstream_spec_thesis(7e9);
    let mut rates = [0.0; 4];
    assert_eq!(
        unsafe { opsel_pstream_rates(&t7, rates.as_mut_ptr(), 4) },
        opsel_status::OPSEL_OK
    );
    let want = floats(&g["thesis_pstream_7gbps"]["rates_bps"]);
    for (r, w) in rates.iter().zip(&want) {
        assert!(close(*r, *w, tol));
    }
    assert!((rates[0] / 1e9 - 5.746).abs() < 5e-4 && (rates[3] / 1e9 - 8.738).abs() < 5e-4);
    let mut gaps = [0.0; 64];
    assert_eq!(
        unsafe { opsel_pstream_send_gaps(&t7, gaps.as_mut_ptr(), 64) },
        opsel_status::OPSEL_OK
    );
    for (a, b) in gaps
        .iter()
        .zip(floats(&g["thesis_pstream_7gbps"]["send_gaps_ns"]))
    {
        assert!(close(*a, b, tol));
    }
    // Rate adapter sequence.
    let mut cfg = opsel_rate_adapter_config_default();
    cfg.init_bps = g["adapter"]["init_bps"].as_f64().unwrap();
    let mut ad = ptr::null_mut();
    assert_eq!(
        unsafe { opsel_rate_adapter_new(&cfg, &mut ad) },
        opsel_status::OPSEL_OK
    );
    for st in g["adapter"]["steps"].as_array().unwrap() {
        let (mut up, mut r) = (false, 0.0);
        let s = unsafe {
            opsel_rate_adapter_on_estimate(
                ad,
                st["abest_bps"].as_f64().unwrap(),
                st["duration_ns"].as_f64().unwrap(),
                &mut up,
                &mut r,
            )
        };
        assert_eq!(s, opsel_status::OPSEL_OK);
        assert_eq!(up, st["updated"].as_bool().unwrap());
        assert!(close(r, st["r_avg_bps"].as_f64().unwrap(), tol));
    }
    let mut r = 0.0;
    assert_eq!(
        unsafe { opsel_rate_adapter_on_loss(ad, &mut r) },
        opsel_status::OPSEL_OK
    );
    assert!(close(
        r,
        g["adapter"]["after_loss_bps"].as_f64().unwrap(),
        tol
    ));
    assert!(close(unsafe { opsel_rate_adapter_r_avg(ad) }, r, tol));
    unsafe {
        opsel_rate_adapter_free(ad);
        opsel_bwe_ml_free(ml);
        opsel_bwe_workspace_free(ws);
    }
}

#[test]
fn bad_input_gets_a_status_and_a_message() {
    let mut ws = ptr::null_mut();
    assert_eq!(
        unsafe { opsel_bwe_workspace_new(0, &mut ws) },
        opsel_status::OPSEL_INVALID_INPUT
    );
    assert!(ws.is_null() && last_error().contains("max_packets 0"));
    assert_eq!(
        unsafe { opsel_bwe_workspace_new(64, &mut ws) },
        opsel_status::OPSEL_OK
    );
    let spec = opsel_pstream_spec_thesis(7e9);
    let mut gs = vec![10_329.0; 64];
    let gr = vec![10_400.0; 64];
    let mut a = opsel_abest {
        abest_bps: 0.0,
        excursion_start: 0,
        below_range: false,
        above_range: false,
    };
    let call = |gs: &[f64],
                len: usize,
                spec: *const opsel_pstream_spec,
                bass,
                a: *mut opsel_abest| unsafe {
        opsel_bwe_estimate(
            ws,
            gs.as_ptr(),
            gr.as_ptr(),
            len,
            spec,
            bass,
            ptr::null(),
            a,
        )
    };
    assert_eq!(
        call(&gs, 64, &spec, ptr::null(), &mut a),
        opsel_status::OPSEL_OK
    );
    assert_eq!(
        call(&gs, 64, ptr::null(), ptr::null(), &mut a),
        opsel_status::OPSEL_NULL_POINTER
    );
    assert_eq!(
        call(&gs, 64, &spec, ptr::null(), ptr::null_mut()),
        opsel_status::OPSEL_NULL_POINTER
    );
    assert_eq!(
        call(&gs, 32, &spec, ptr::null(), &mut a),
        opsel_status::OPSEL_INVALID_INPUT
    );
    assert!(last_error().contains("64 packets"), "{}", last_error());
    assert_eq!(
        call(&gs, 65, &spec, ptr::null(), &mut a),
        opsel_status::OPSEL_INVALID_INPUT
    );
    gs[7] = f64::NAN;
    assert_eq!(
        call(&gs, 64, &spec, ptr::null(), &mut a),
        opsel_status::OPSEL_INVALID_INPUT
    );
    assert!(last_error().contains("send_gaps_ns"), "{}", last_error());
    gs[7] = 10_329.0;
    let bad = opsel_bass_config {
        window_align: 7,
        ..opsel_bass_config_thesis()
    };
    assert_eq!(
        call(&gs, 64, &spec, &bad, &mut a),
        opsel_status::OPSEL_INVALID_INPUT
    );
    assert!(last_error().contains("window_align 7"), "{}", last_error());
    let mut bad_spec = spec;
    bad_spec.r_avg_bps = -1.0;
    assert_eq!(
        call(&gs, 64, &bad_spec, ptr::null(), &mut a),
        opsel_status::OPSEL_INVALID_INPUT
    );
    // ML: a classifier or a mismatched length is refused with a clear message.
    let mut ml = ptr::null_mut();
    let missing = CString::new("/nonexistent/model.json").unwrap();
    assert_eq!(
        unsafe { opsel_bwe_ml_load(missing.as_ptr(), 64, &mut ml) },
        opsel_status::OPSEL_IO
    );
    let text = std::fs::read_to_string(fixtures().join("bwe_golden.model.json")).unwrap();
    assert_eq!(
        unsafe { opsel_bwe_ml_from_json(text.as_ptr().cast(), text.len(), 32, &mut ml) },
        opsel_status::OPSEL_INVALID_INPUT
    );
    assert!(last_error().contains("66 features"), "{}", last_error());
    let junk = b"{\"format\":\"nope\"}";
    assert_eq!(
        unsafe { opsel_bwe_ml_from_json(junk.as_ptr().cast(), junk.len(), 64, &mut ml) },
        opsel_status::OPSEL_INVALID_MODEL
    );
    assert!(ml.is_null());
    let mut cfg = opsel_rate_adapter_config_default();
    cfg.eta_param = 9;
    let mut ad = ptr::null_mut();
    assert_eq!(
        unsafe { opsel_rate_adapter_new(&cfg, &mut ad) },
        opsel_status::OPSEL_INVALID_INPUT
    );
    assert!(ad.is_null());
    assert!(unsafe { opsel_rate_adapter_r_avg(ptr::null()) }.is_nan());
    unsafe { opsel_bwe_workspace_free(ws) };
}

#[test]
fn baselines_reject_bad_input_with_a_message() {
    let mut ws = ptr::null_mut();
    assert_eq!(
        unsafe { opsel_bwe_workspace_new(16, &mut ws) },
        opsel_status::OPSEL_OK
    );
    let (gs, gr) = (vec![10_000.0; 32], vec![10_500.0; 32]);
    let mut t = 99u32;
    let call = |len: usize, b: u32, levels: usize, t: &mut u32| unsafe {
        opsel_bwe_baseline(ws, gs.as_ptr(), gr.as_ptr(), len, b, levels, t)
    };
    assert_eq!(call(16, 7, 3, &mut t), opsel_status::OPSEL_INVALID_INPUT);
    assert!(last_error().contains("baseline 7"), "{}", last_error());
    assert_eq!(
        call(32, OPSEL_BASELINE_PATHLOAD, 0, &mut t),
        opsel_status::OPSEL_INVALID_INPUT
    );
    assert!(last_error().contains("32 gaps"), "{}", last_error());
    assert_eq!(
        call(9, OPSEL_BASELINE_IMR_AVG, 0, &mut t),
        opsel_status::OPSEL_INVALID_INPUT
    );
    assert!(last_error().contains("at least 10"), "{}", last_error());
    assert_eq!(
        call(16, OPSEL_BASELINE_IMR_WAVELET, 3, &mut t),
        opsel_status::OPSEL_INVALID_INPUT
    );
    assert!(last_error().contains("need >= 8"), "{}", last_error());
    // A rising delay series is "increasing"; NULL outputs are allowed for the trend.
    assert_eq!(
        call(16, OPSEL_BASELINE_PATHLOAD, 0, &mut t),
        opsel_status::OPSEL_OK
    );
    assert_eq!(t, OPSEL_TREND_INCREASING);
    let owd = [0.0, 1.0, f64::NAN];
    let st = unsafe { opsel_bwe_trend(owd.as_ptr(), 3, ptr::null_mut(), ptr::null_mut(), &mut t) };
    assert_eq!(st, opsel_status::OPSEL_INVALID_INPUT);
    assert_eq!(
        unsafe { opsel_bwe_trend(owd.as_ptr(), 1, ptr::null_mut(), ptr::null_mut(), &mut t) },
        opsel_status::OPSEL_INVALID_INPUT
    );
    assert!(last_error().contains("at least 2"), "{}", last_error());
    unsafe { opsel_bwe_workspace_free(ws) };
}
