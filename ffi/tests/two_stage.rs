//! A two-stage model file (`"stage2"`, version 2) through the C ABI:
//! `opsel_model_classify`, `_class_probabilities` and `_classify_batch`
//! answer with stage 2 (exactly `knn::TwoStage`), never with stage 1 alone.

use opsel::knn::{Split, Stage2, TwoStage};
use opsel::mix::SIX_CLASSES;
use opsel::model::KnnModelFile;
use opsel::series::{synth, Normalization};
use opsel_ffi::*;
use std::ptr;

#[test]
fn the_c_api_classifies_a_two_stage_file_with_stage_two() {
    let (x, y) = synth::dataset(&SIX_CLASSES, 12, 20, 21).unwrap();
    let cfg = opsel::knn::KnnConfig {
        normalization: Normalization::DivideMin,
        ..Default::default()
    };
    let classes = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let model = opsel::knn::Model::fit(&x, 20, &y, classes, cfg).unwrap();
    let s2 = Stage2::new(Normalization::ZScore, Split::BbrPresent);
    let file = KnnModelFile {
        model: model.clone(),
        meta: Default::default(),
        stage2: Some(s2),
    };
    let json = file.to_json().unwrap();
    assert!(json.contains(r#""version":2"#));
    let two = TwoStage::new(&model, s2).unwrap();
    let mut tws = two.workspace();
    let mut ows = model.workspace();
    let (q, _) = synth::dataset(&SIX_CLASSES, 5, 20, 22).unwrap();
    let mut differ = 0;
    unsafe {
        let mut m = ptr::null_mut();
        assert_eq!(
            opsel_model_from_json(json.as_ptr().cast(), json.len(), &mut m),
            opsel_status::OPSEL_OK
        );
        let mut ws = ptr::null_mut();
        assert_eq!(opsel_workspace_new(m, &mut ws), opsel_status::OPSEL_OK);
        let mut probs = [0.0; 6];
        for w in q.chunks_exact(20) {
            let want = two.classify(w, &mut tws).unwrap();
            let mut p = std::mem::zeroed::<opsel_prediction>();
            assert_eq!(
                opsel_model_classify(m, ws, w.as_ptr(), w.len(), &mut p),
                opsel_status::OPSEL_OK
            );
            assert_eq!((p.class_index, p.neighbor), (want.class, want.neighbor));
            assert_eq!(p.distance.to_bits(), want.distance.to_bits());
            assert_eq!(
                opsel_model_class_probabilities(
                    m,
                    ws,
                    w.as_ptr(),
                    w.len(),
                    probs.as_mut_ptr(),
                    probs.len(),
                    ptr::null_mut()
                ),
                opsel_status::OPSEL_OK
            );
            assert_eq!(probs[want.class], 1.0);
            differ += (model.classify(w, &mut ows).unwrap().class != want.class) as usize;
        }
        let n = q.len() / 20;
        let mut out = vec![std::mem::zeroed::<opsel_prediction>(); n];
        assert_eq!(
            opsel_model_classify_batch(m, q.as_ptr(), q.len(), 2, out.as_mut_ptr(), n),
            opsel_status::OPSEL_OK
        );
        for (o, w) in out.iter().zip(q.chunks_exact(20)) {
            assert_eq!(o.class_index, two.classify(w, &mut tws).unwrap().class);
        }
        opsel_workspace_free(ws);
        opsel_model_free(m);
    }
    assert!(
        differ > 0,
        "stage 2 changes some answers, so the test tells the stages apart"
    );
}

/// The version-3 fixture (a z-sorted combined k-NN stage 2;
/// `research/fixtures/make_two_stage_knn.py`) loaded through the C ABI
/// answers every fixture window with the class the numpy reference
/// implementation gave it, in single and batch classification.
#[test]
fn the_c_api_classifies_the_version_3_fixture_as_numpy_does() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let path =
        std::ffi::CString::new(dir.join("knn_two_stage_knn.model.json").to_str().unwrap()).unwrap();
    let cases: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("knn_two_stage_knn.json")).unwrap())
            .unwrap();
    let file = opsel::model::load(dir.join("knn_two_stage_knn.model.json")).unwrap();
    let classes = file.model.classes().to_vec();
    assert_eq!(file.stage2.map(|s| (s.k, s.stage1_weight)), Some((7, 0.25)));
    let cases = cases["cases"].as_array().unwrap();
    unsafe {
        let mut m = ptr::null_mut();
        assert_eq!(
            opsel_model_load(path.as_ptr(), &mut m),
            opsel_status::OPSEL_OK
        );
        let mut ws = ptr::null_mut();
        assert_eq!(opsel_workspace_new(m, &mut ws), opsel_status::OPSEL_OK);
        let mut flat = Vec::new();
        for c in cases {
            let w: Vec<f64> = c["window"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            let mut p = std::mem::zeroed::<opsel_prediction>();
            assert_eq!(
                opsel_model_classify(m, ws, w.as_ptr(), w.len(), &mut p),
                opsel_status::OPSEL_OK
            );
            assert_eq!(classes[p.class_index], c["class"].as_str().unwrap());
            flat.extend(w);
        }
        let mut out = vec![std::mem::zeroed::<opsel_prediction>(); cases.len()];
        assert_eq!(
            opsel_model_classify_batch(
                m,
                flat.as_ptr(),
                flat.len(),
                2,
                out.as_mut_ptr(),
                cases.len()
            ),
            opsel_status::OPSEL_OK
        );
        for (o, c) in out.iter().zip(cases) {
            assert_eq!(classes[o.class_index], c["class"].as_str().unwrap());
        }
        opsel_workspace_free(ws);
        opsel_model_free(m);
    }
}
