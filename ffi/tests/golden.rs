//! The shared golden fixture (tests/fixtures/knn_golden.json) through the
//! core API and through the C ABI: identical predictions, distances to 1e-12.

use opsel::dtw::{self, Cost, DtwParams};
use opsel::knn::Model;
use opsel::model::KnnModelFile;
use opsel_ffi::*;
use serde_json::Value;
use std::ffi::{CStr, CString};
use std::path::PathBuf;
use std::ptr;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn golden() -> Value {
    let text = std::fs::read_to_string(fixtures().join("knn_golden.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn tol(g: &Value) -> f64 {
    g["tolerance"]["distance_relative"].as_f64().unwrap()
}

fn close(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * want.abs().max(1.0)
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn model_path() -> CString {
    let g = golden();
    let p = fixtures().join(g["model_file"].as_str().unwrap());
    CString::new(p.to_str().unwrap()).unwrap()
}

fn last_error() -> String {
    unsafe { CStr::from_ptr(opsel_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

/// Expected fields of one query, compared against any prediction source.
fn check_query(
    q: &Value,
    class: usize,
    neighbor: usize,
    distance: f64,
    votes: u32,
    conf: f64,
    t: f64,
) {
    let id = &q["id"];
    assert_eq!(
        class as u64,
        q["class_index"].as_u64().unwrap(),
        "query {id} class"
    );
    assert_eq!(
        neighbor as u64,
        q["neighbor"].as_u64().unwrap(),
        "query {id} neighbor"
    );
    assert_eq!(
        votes as u64,
        q["votes"].as_u64().unwrap(),
        "query {id} votes"
    );
    let want = q["distance"].as_f64().unwrap();
    assert!(
        close(distance, want, t),
        "query {id} distance {distance} vs {want}"
    );
    let want = q["confidence"].as_f64().unwrap();
    assert!(
        close(conf, want, t),
        "query {id} confidence {conf} vs {want}"
    );
}

#[test]
fn core_reproduces_the_golden_predictions() {
    let g = golden();
    let t = tol(&g);
    let file = KnnModelFile::load(fixtures().join("knn_golden.model.json")).unwrap();
    let m = &file.model;
    let classes: Vec<&str> = g["model"]["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(m.classes(), classes.as_slice());
    assert_eq!(m.window() as u64, g["model"]["window"].as_u64().unwrap());
    let mut ws = m.workspace();
    let mut probs = vec![0.0; classes.len()];
    let queries = g["queries"].as_array().unwrap();
    assert!(queries.len() >= 10);
    let mut flat = Vec::new();
    for q in queries {
        let w = floats(&q["window"]);
        let p = m.class_probabilities(&w, &mut ws, &mut probs).unwrap();
        check_query(q, p.class, p.neighbor, p.distance, p.votes, p.confidence, t);
        assert_eq!(m.classes()[p.class], q["class"].as_str().unwrap());
        for (got, want) in probs.iter().zip(floats(&q["probabilities"])) {
            assert!(close(*got, want, t), "query {} probabilities", q["id"]);
        }
        flat.extend_from_slice(&w);
    }
    // Batch on two threads gives the same answers.
    let batch = m.classify_batch(&flat, 2).unwrap();
    for (p, q) in batch.iter().zip(queries) {
        check_query(q, p.class, p.neighbor, p.distance, p.votes, p.confidence, t);
    }
    // Fitting afresh on the file's references reproduces the model (the path
    // KnnDtw.fit in Node and opsel_model_fit in C take).
    let refit = Model::fit(
        m.raw_references(),
        m.window(),
        m.labels(),
        m.classes().to_vec(),
        *m.config(),
    )
    .unwrap();
    assert_eq!(refit.classify_batch(&flat, 1).unwrap(), batch);
}

#[test]
fn core_reproduces_the_golden_dtw_pairs() {
    let g = golden();
    let t = tol(&g);
    let pairs = g["dtw"].as_array().unwrap();
    assert!(pairs.len() >= 5);
    for (j, p) in pairs.iter().enumerate() {
        let (a, b) = (floats(&p["a"]), floats(&p["b"]));
        let params = DtwParams {
            radius: p["radius"].as_u64().map(|r| r as usize),
            cost: Cost::parse(p["cost"].as_str().unwrap()).unwrap(),
        };
        let d = dtw::distance(&a, &b, &params).unwrap();
        let want = p["distance"].as_f64().unwrap();
        assert!(close(d, want, t), "pair {j}: {d} vs {want}");
        // Independent check: with radius 0 and equal lengths the only path is
        // the diagonal, so DTW is the L1 (abs) or L2 (squared) distance.
        if params.radius == Some(0) && a.len() == b.len() {
            let l1: f64 = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).sum();
            let l2: f64 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (x - y) * (x - y))
                .sum::<f64>()
                .sqrt();
            let direct = if params.cost == Cost::Abs { l1 } else { l2 };
            assert!(
                close(want, direct, t),
                "pair {j}: golden {want} vs diagonal {direct}"
            );
        }
    }
    // Hand-checked: [1..5] vs [2..6]: diagonal costs 5×1; warping aligns 2..5
    // with 2..5 and pays only |1−2| + |5−6| = 2.
    assert_eq!(pairs[0]["distance"].as_f64().unwrap(), 5.0);
    assert_eq!(pairs[3]["distance"].as_f64().unwrap(), 2.0);
}

#[test]
fn c_abi_reproduces_the_golden_predictions() {
    let g = golden();
    let t = tol(&g);
    let path = model_path();
    unsafe {
        let mut model = ptr::null_mut();
        assert_eq!(
            opsel_model_load(path.as_ptr(), &mut model),
            opsel_status::OPSEL_OK,
            "{}",
            last_error()
        );
        assert_eq!(opsel_model_window(model), 20);
        assert_eq!(opsel_model_class_count(model), 6);
        assert_eq!(opsel_model_reference_count(model), 60);
        let mut cfg = opsel_knn_config_default();
        assert_eq!(opsel_model_config(model, &mut cfg), opsel_status::OPSEL_OK);
        assert_eq!(
            (cfg.k, cfg.radius, cfg.cost, cfg.normalization),
            (3, 10, OPSEL_COST_ABS, OPSEL_NORMALIZATION_NONE)
        );
        let mut ws = ptr::null_mut();
        assert_eq!(opsel_workspace_new(model, &mut ws), opsel_status::OPSEL_OK);
        let queries = g["queries"].as_array().unwrap();
        let mut flat = Vec::new();
        let mut probs = [0.0f64; 6];
        for q in queries {
            let w = floats(&q["window"]);
            let mut p = std::mem::zeroed::<opsel_prediction>();
            let st = opsel_model_classify(model, ws, w.as_ptr(), w.len(), &mut p);
            assert_eq!(st, opsel_status::OPSEL_OK, "{}", last_error());
            check_query(
                q,
                p.class_index,
                p.neighbor,
                p.distance,
                p.votes,
                p.confidence,
                t,
            );
            let mut name = ptr::null();
            assert_eq!(
                opsel_model_class_name(model, p.class_index, &mut name),
                opsel_status::OPSEL_OK
            );
            assert_eq!(
                CStr::from_ptr(name).to_str().unwrap(),
                q["class"].as_str().unwrap()
            );
            let st = opsel_model_class_probabilities(
                model,
                ws,
                w.as_ptr(),
                w.len(),
                probs.as_mut_ptr(),
                6,
                ptr::null_mut(),
            );
            assert_eq!(st, opsel_status::OPSEL_OK);
            for (got, want) in probs.iter().zip(floats(&q["probabilities"])) {
                assert!(close(*got, want, t));
            }
            flat.extend_from_slice(&w);
        }
        let n = queries.len();
        let mut out = vec![std::mem::zeroed::<opsel_prediction>(); n];
        let st =
            opsel_model_classify_batch(model, flat.as_ptr(), flat.len(), 2, out.as_mut_ptr(), n);
        assert_eq!(st, opsel_status::OPSEL_OK, "{}", last_error());
        for (p, q) in out.iter().zip(queries) {
            check_query(
                q,
                p.class_index,
                p.neighbor,
                p.distance,
                p.votes,
                p.confidence,
                t,
            );
        }

        // JSON round trip and save/load keep every prediction.
        let mut json = ptr::null_mut();
        let mut len = 0usize;
        assert_eq!(
            opsel_model_to_json(model, &mut json, &mut len),
            opsel_status::OPSEL_OK
        );
        assert_eq!(CStr::from_ptr(json).to_bytes().len(), len);
        let mut again = ptr::null_mut();
        assert_eq!(
            opsel_model_from_json(json, len, &mut again),
            opsel_status::OPSEL_OK,
            "{}",
            last_error()
        );
        opsel_string_free(json);
        let dir = std::env::temp_dir().join(format!("opsel-ffi-golden-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let saved = CString::new(dir.join("m.json").to_str().unwrap()).unwrap();
        assert_eq!(
            opsel_model_save(again, saved.as_ptr()),
            opsel_status::OPSEL_OK,
            "{}",
            last_error()
        );
        let mut loaded = ptr::null_mut();
        assert_eq!(
            opsel_model_load(saved.as_ptr(), &mut loaded),
            opsel_status::OPSEL_OK
        );
        let mut out2 = vec![std::mem::zeroed::<opsel_prediction>(); n];
        assert_eq!(
            opsel_model_classify_batch(loaded, flat.as_ptr(), flat.len(), 1, out2.as_mut_ptr(), n),
            opsel_status::OPSEL_OK
        );
        assert_eq!(out, out2);
        std::fs::remove_dir_all(&dir).ok();

        // Fit through the C ABI on the fixture's references: same answers.
        let file = KnnModelFile::load(fixtures().join("knn_golden.model.json")).unwrap();
        let names: Vec<CString> = file
            .model
            .classes()
            .iter()
            .map(|c| CString::new(c.as_str()).unwrap())
            .collect();
        let name_ptrs: Vec<_> = names.iter().map(|c| c.as_ptr()).collect();
        let refs = file.model.raw_references();
        let labels = file.model.labels();
        let mut fitted = ptr::null_mut();
        let st = opsel_model_fit(
            refs.as_ptr(),
            refs.len(),
            20,
            labels.as_ptr(),
            labels.len(),
            name_ptrs.as_ptr(),
            names.len(),
            &cfg,
            &mut fitted,
        );
        assert_eq!(st, opsel_status::OPSEL_OK, "{}", last_error());
        let mut out3 = vec![std::mem::zeroed::<opsel_prediction>(); n];
        assert_eq!(
            opsel_model_classify_batch(fitted, flat.as_ptr(), flat.len(), 0, out3.as_mut_ptr(), n),
            opsel_status::OPSEL_OK
        );
        assert_eq!(out, out3);

        opsel_model_free(fitted);
        opsel_model_free(loaded);
        opsel_model_free(again);
        opsel_workspace_free(ws);
        opsel_model_free(model);
    }
}

#[test]
fn c_abi_reproduces_the_golden_dtw_pairs() {
    let g = golden();
    let t = tol(&g);
    for (j, p) in g["dtw"].as_array().unwrap().iter().enumerate() {
        let (a, b) = (floats(&p["a"]), floats(&p["b"]));
        let radius = p["radius"]
            .as_u64()
            .map_or(OPSEL_RADIUS_UNCONSTRAINED, |r| r as usize);
        let cost = if p["cost"] == "abs" {
            OPSEL_COST_ABS
        } else {
            OPSEL_COST_SQUARED
        };
        let mut d = f64::NAN;
        let st = unsafe {
            opsel_dtw_distance(
                a.as_ptr(),
                a.len(),
                b.as_ptr(),
                b.len(),
                radius,
                cost,
                &mut d,
            )
        };
        assert_eq!(st, opsel_status::OPSEL_OK, "{}", last_error());
        let want = p["distance"].as_f64().unwrap();
        assert!(close(d, want, t), "pair {j}: {d} vs {want}");
    }
}

/// Each bad input gets its status and a message naming the problem; outputs
/// are untouched (or NULL for handles).
#[test]
fn c_abi_rejects_bad_input_without_crashing() {
    use opsel_status::*;
    let path = model_path();
    unsafe {
        let mut model = ptr::null_mut();
        assert_eq!(opsel_model_load(path.as_ptr(), &mut model), OPSEL_OK);
        let mut ws = ptr::null_mut();
        assert_eq!(opsel_workspace_new(model, &mut ws), OPSEL_OK);
        let good = [70.0f64; 20];
        let mut p = std::mem::zeroed::<opsel_prediction>();
        p.class_index = 99;

        // Each call's status and message, checked right after the call.
        let check = |st: opsel_status, want: opsel_status, needle: &str| {
            assert_eq!(st, want, "{needle}: {}", last_error());
            assert!(
                last_error().contains(needle),
                "{needle:?} not in {:?}",
                last_error()
            );
        };
        let g = good.as_ptr();
        check(
            opsel_model_classify(ptr::null(), ws, g, 20, &mut p),
            OPSEL_NULL_POINTER,
            "model is NULL",
        );
        check(
            opsel_model_classify(model, ptr::null_mut(), g, 20, &mut p),
            OPSEL_NULL_POINTER,
            "workspace is NULL",
        );
        check(
            opsel_model_classify(model, ws, ptr::null(), 20, &mut p),
            OPSEL_NULL_POINTER,
            "window is NULL",
        );
        check(
            opsel_model_classify(model, ws, g, 20, ptr::null_mut()),
            OPSEL_NULL_POINTER,
            "out_prediction is NULL",
        );
        check(
            opsel_model_classify(model, ws, g, 0, &mut p),
            OPSEL_INVALID_INPUT,
            "length 0",
        );
        check(
            opsel_model_classify(model, ws, g, 19, &mut p),
            OPSEL_INVALID_INPUT,
            "19 samples",
        );
        check(
            opsel_model_classify_batch(model, g, 20, 1, &mut p, 2),
            OPSEL_INVALID_INPUT,
            "predictions_len is 2",
        );
        check(
            opsel_model_classify_batch(model, g, 15, 1, &mut p, 1),
            OPSEL_INVALID_INPUT,
            "whole number",
        );
        check(
            opsel_model_classify_batch(model, g, 0, 1, &mut p, 0),
            OPSEL_INVALID_INPUT,
            "length 0",
        );
        check(
            opsel_model_classify_batch(model, g, 20, 1, ptr::null_mut(), 1),
            OPSEL_NULL_POINTER,
            "out_predictions is NULL",
        );
        let mut d = -1.0;
        check(
            opsel_dtw_distance(g, 20, g, 20, 10, 7, &mut d),
            OPSEL_INVALID_INPUT,
            "cost 7",
        );
        check(
            opsel_dtw_distance(g, 0, g, 20, 10, 0, &mut d),
            OPSEL_INVALID_INPUT,
            "length 0",
        );
        check(
            opsel_dtw_distance(g, 20, ptr::null(), 20, 10, 0, &mut d),
            OPSEL_NULL_POINTER,
            "series b is NULL",
        );
        check(
            opsel_dtw_distance(g, 20, g, 20, 10, 0, ptr::null_mut()),
            OPSEL_NULL_POINTER,
            "out_distance is NULL",
        );
        assert_eq!(d, -1.0, "out_distance untouched on error");
        check(
            opsel_model_class_name(model, 6, &mut ptr::null()),
            OPSEL_INVALID_INPUT,
            "class index 6",
        );
        let mut probs = [0.0; 5];
        check(
            opsel_model_class_probabilities(
                model,
                ws,
                g,
                20,
                probs.as_mut_ptr(),
                5,
                ptr::null_mut(),
            ),
            OPSEL_INVALID_INPUT,
            "5 slots",
        );
        let misaligned = (g as *const u8).add(1) as *const f64;
        check(
            opsel_model_classify(model, ws, misaligned, 19, &mut p),
            OPSEL_INVALID_INPUT,
            "not aligned",
        );
        assert_eq!(p.class_index, 99, "outputs are untouched on error");

        // Messages name the offending value.
        let mut nan = good;
        nan[4] = f64::NAN;
        assert_eq!(
            opsel_model_classify(model, ws, nan.as_ptr(), 20, &mut p),
            OPSEL_INVALID_INPUT
        );
        assert!(last_error().contains("index 4"), "{}", last_error());
        assert_eq!(
            opsel_dtw_distance(nan.as_ptr(), 20, good.as_ptr(), 20, 10, 0, &mut p.distance),
            OPSEL_INVALID_INPUT
        );
        assert!(
            last_error().contains("NaN") && last_error().contains("index 4"),
            "{}",
            last_error()
        );
        let mut batch = [good, nan].concat();
        batch[20] = f64::INFINITY;
        let mut two = [p, p];
        assert_eq!(
            opsel_model_classify_batch(model, batch.as_ptr(), 40, 2, two.as_mut_ptr(), 2),
            OPSEL_INVALID_INPUT
        );
        assert!(last_error().contains("window 1"), "{}", last_error());
        assert_eq!(
            opsel_model_classify(model, ws, good.as_ptr(), 19, &mut p),
            OPSEL_INVALID_INPUT
        );
        assert!(last_error().contains("19"), "{}", last_error());
        assert_eq!(
            opsel_model_classify(model, ws, good.as_ptr(), 20, &mut p),
            OPSEL_OK
        );
        assert_eq!(last_error(), "", "success clears the message");

        // Handles: bad paths and JSON give NULL handles and the right status.
        let mut m2 = std::ptr::dangling_mut::<opsel_model>();
        assert_eq!(opsel_model_load(ptr::null(), &mut m2), OPSEL_NULL_POINTER);
        assert!(m2.is_null());
        assert_eq!(
            opsel_model_load(path.as_ptr(), ptr::null_mut()),
            OPSEL_NULL_POINTER
        );
        let bad_utf8 = b"/tmp/\xff\xfe.json\0";
        assert_eq!(
            opsel_model_load(bad_utf8.as_ptr().cast(), &mut m2),
            OPSEL_INVALID_INPUT
        );
        assert!(last_error().contains("UTF-8"), "{}", last_error());
        let missing = CString::new("/nonexistent/opsel/model.json").unwrap();
        assert_eq!(opsel_model_load(missing.as_ptr(), &mut m2), OPSEL_IO);
        assert!(
            last_error().contains("/nonexistent/opsel/model.json"),
            "{}",
            last_error()
        );
        for (json, want) in [
            (&b"{\"format\":\"other\"}"[..], OPSEL_INVALID_MODEL),
            (&b"not json"[..], OPSEL_INVALID_MODEL),
            (
                &b"{\"format\":\"opsel-model\",\"version\":5,\"kind\":\"knn-dtw\"}"[..],
                OPSEL_UNSUPPORTED_VERSION,
            ),
            (&b"\xff\xff"[..], OPSEL_INVALID_INPUT),
        ] {
            assert_eq!(
                opsel_model_from_json(json.as_ptr().cast(), json.len(), &mut m2),
                want,
                "{:?}",
                String::from_utf8_lossy(json)
            );
            assert!(m2.is_null());
        }
        assert_eq!(
            opsel_model_from_json(b"{}".as_ptr().cast(), 0, &mut m2),
            OPSEL_INVALID_INPUT
        );
        assert_eq!(opsel_model_save(model, ptr::null()), OPSEL_NULL_POINTER);
        let unwritable = CString::new("/nonexistent/dir/m.json").unwrap();
        assert_eq!(opsel_model_save(model, unwritable.as_ptr()), OPSEL_IO);

        // Fit: every argument is checked.
        let labels = [0u32, 1];
        let a = CString::new("a").unwrap();
        let names = [a.as_ptr(), a.as_ptr()];
        let x = [1.0f64, 2.0, 3.0, 4.0];
        assert_eq!(
            opsel_model_fit(
                x.as_ptr(),
                4,
                2,
                labels.as_ptr(),
                2,
                names.as_ptr(),
                2,
                ptr::null(),
                &mut m2
            ),
            OPSEL_INVALID_INPUT
        );
        assert!(last_error().contains("appears twice"), "{}", last_error());
        assert_eq!(
            opsel_model_fit(
                x.as_ptr(),
                4,
                2,
                labels.as_ptr(),
                2,
                names.as_ptr(),
                1,
                ptr::null(),
                &mut m2
            ),
            OPSEL_INVALID_INPUT
        );
        assert!(last_error().contains("label 1"), "{}", last_error());
        assert_eq!(
            opsel_model_fit(
                x.as_ptr(),
                3,
                2,
                labels.as_ptr(),
                2,
                names.as_ptr(),
                1,
                ptr::null(),
                &mut m2
            ),
            OPSEL_INVALID_INPUT
        );
        assert_eq!(
            opsel_model_fit(
                x.as_ptr(),
                4,
                2,
                ptr::null(),
                2,
                names.as_ptr(),
                1,
                ptr::null(),
                &mut m2
            ),
            OPSEL_NULL_POINTER
        );
        let mut cfg = opsel_knn_config_default();
        cfg.normalization = 9;
        assert_eq!(
            opsel_model_fit(
                x.as_ptr(),
                4,
                2,
                labels.as_ptr(),
                1,
                names.as_ptr(),
                1,
                &cfg,
                &mut m2
            ),
            OPSEL_INVALID_INPUT
        );
        assert!(last_error().contains("normalization 9"), "{}", last_error());
        cfg = opsel_knn_config_default();
        cfg.k = 5;
        assert_eq!(
            opsel_model_fit(
                x.as_ptr(),
                2,
                2,
                labels.as_ptr(),
                1,
                names.as_ptr(),
                1,
                &cfg,
                &mut m2
            ),
            OPSEL_INVALID_INPUT
        );
        assert!(last_error().contains("k = 5"), "{}", last_error());
        assert!(m2.is_null());

        // Accessors tolerate NULL; free functions ignore NULL.
        assert_eq!(opsel_model_window(ptr::null()), 0);
        assert_eq!(opsel_model_class_count(ptr::null()), 0);
        opsel_model_free(ptr::null_mut());
        opsel_workspace_free(ptr::null_mut());
        opsel_string_free(ptr::null_mut());

        opsel_workspace_free(ws);
        opsel_model_free(model);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// The C ABI adds nothing and loses nothing: for any finite window it
    /// returns exactly the core's prediction.
    #[test]
    fn c_abi_equals_core(w in proptest::collection::vec(0.0f64..300.0, 20)) {
        let file = KnnModelFile::load(fixtures().join("knn_golden.model.json")).unwrap();
        let mut cws = file.model.workspace();
        let want = file.model.classify(&w, &mut cws).unwrap();
        let path = model_path();
        unsafe {
            let mut model = ptr::null_mut();
            proptest::prop_assert_eq!(opsel_model_load(path.as_ptr(), &mut model), opsel_status::OPSEL_OK);
            let mut ws = ptr::null_mut();
            opsel_workspace_new(model, &mut ws);
            let mut p = std::mem::zeroed::<opsel_prediction>();
            let st = opsel_model_classify(model, ws, w.as_ptr(), w.len(), &mut p);
            opsel_workspace_free(ws);
            opsel_model_free(model);
            proptest::prop_assert_eq!(st, opsel_status::OPSEL_OK);
            proptest::prop_assert_eq!(p, opsel_prediction::from(want));
        }
    }
}
