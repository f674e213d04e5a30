use super::*;
use crate::mix::SIX_CLASSES;
use crate::series::synth;

fn sample() -> KnnModelFile {
    let (x, y) = synth::dataset(&SIX_CLASSES, 3, 5, 1).unwrap();
    let cfg = KnnConfig {
        k: 1,
        dtw: DtwParams {
            radius: Some(2),
            cost: Cost::Squared,
        },
        normalization: Normalization::SubtractMin,
    };
    let model = knn::Model::fit(
        &x,
        5,
        &y,
        SIX_CLASSES.iter().map(|s| s.to_string()).collect(),
        cfg,
    )
    .unwrap();
    let meta = Metadata {
        probing: Probing {
            mode: ProbingMode::Active,
            pattern: Some("S5-C5-S5-B5".into()),
            ..Default::default()
        },
        training: serde_json::json!({"bottleneck_mbps": 100}),
    };
    KnnModelFile {
        model,
        meta,
        stage2: None,
    }
}

fn two_stage_sample() -> KnnModelFile {
    KnnModelFile {
        stage2: Some(knn::Stage2::new(
            Normalization::ZScore,
            knn::Split::BbrPresent,
        )),
        ..sample()
    }
}

#[test]
fn round_trip_preserves_everything() {
    let m = sample();
    let text = m.to_json().unwrap();
    let back = KnnModelFile::from_json(&text).unwrap();
    assert_eq!(back.to_json().unwrap(), text);
    assert_eq!(back.meta, m.meta);
    assert_eq!(back.model.config(), m.model.config());
    assert_eq!(back.model.raw_references(), m.model.raw_references());
}

fn mutate(f: impl FnOnce(&mut serde_json::Value)) -> Error {
    let mut v: serde_json::Value = serde_json::from_str(&sample().to_json().unwrap()).unwrap();
    f(&mut v);
    KnnModelFile::from_json(&v.to_string()).unwrap_err()
}

#[test]
fn rejects_foreign_corrupt_and_newer_files() {
    assert!(KnnModelFile::from_json("{not json")
        .unwrap_err()
        .to_string()
        .contains("not valid JSON"));
    assert!(KnnModelFile::from_json("[1,2]")
        .unwrap_err()
        .to_string()
        .contains("not an object"));
    assert!(KnnModelFile::from_json(r#"{"weights": [1]}"#)
        .unwrap_err()
        .to_string()
        .contains("no \"format\""));
    let e = mutate(|v| v["version"] = 5.into());
    assert!(
        matches!(
            e,
            Error::UnsupportedVersion {
                found: 5,
                supported: 4
            }
        ),
        "{e}"
    );
    // Version 4 has a stage-1 term: without it the file is damaged.
    let e = mutate(|v| v["version"] = 4.into());
    assert_eq!(e.kind(), crate::ErrorKind::InvalidModel, "{e}");
    assert!(e.to_string().contains("must have a \"stage1_term\""), "{e}");
    // Versions 2 and 3 are two-stage files: without stage2 they are damaged.
    for version in [2, 3] {
        let e = mutate(|v| v["version"] = version.into());
        assert_eq!(e.kind(), crate::ErrorKind::InvalidModel, "{e}");
        assert!(e.to_string().contains("must have a \"stage2\""), "{e}");
    }
    assert!(mutate(|v| v["format"] = "onnx".into())
        .to_string()
        .contains("\"onnx\""));
    assert!(mutate(|v| v["kind"] = "gbt".into())
        .to_string()
        .contains("kind"));
    assert!(mutate(|v| v["k"] = 1000.into())
        .to_string()
        .contains("k = 1000"));
    assert!(mutate(|v| v["dtw"]["cost"] = "cosine".into())
        .to_string()
        .contains("cosine"));
    assert!(mutate(|v| v["normalization"] = "log".into())
        .to_string()
        .contains("log"));
    assert!(
        mutate(|v| v["references"]["windows"][3] = serde_json::json!([1.0, 2.0]))
            .to_string()
            .contains("window 3 has 2 samples")
    );
    assert!(mutate(|v| v["references"]["labels"][0] = 9.into())
        .to_string()
        .contains("label 9"));
    assert!(mutate(|v| {
        v["references"]["labels"].as_array_mut().unwrap().pop();
    })
    .to_string()
    .contains("labels"));
    assert!(mutate(|v| v["extra"] = 1.into())
        .to_string()
        .contains("extra"));
    assert!(mutate(|v| v["probing"]["mode"] = "passive".into())
        .to_string()
        .contains("passive model carries"));
    let e = mutate(|v| {
        for l in v["references"]["labels"].as_array_mut().unwrap() {
            if l.as_u64() == Some(5) {
                *l = 0.into();
            }
        }
    });
    assert!(e.to_string().contains("\"C1-C1\" has no reference"), "{e}");
    let e = mutate(|v| v["window"] = 0.into());
    assert_eq!(e.kind(), crate::ErrorKind::InvalidModel, "{e}");
}

#[test]
fn save_and_load_files() {
    let dir = std::env::temp_dir().join(format!("opsel-model-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("m.json");
    sample().save(&p).unwrap();
    let back = load(&p).unwrap();
    assert_eq!(back.model.len(), 18);
    let e = load(dir.join("missing.json")).unwrap_err();
    assert!(e.to_string().contains("missing.json"), "{e}");
    std::fs::write(&p, "{}").unwrap();
    assert!(load(&p).unwrap_err().to_string().contains("m.json"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn two_stage_round_trip_and_version() {
    let m = two_stage_sample();
    let text = m.to_json().unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["version"], 2);
    assert_eq!(
        v["stage2"],
        serde_json::json!({"normalization": "z-score", "split": "bbr-present"})
    );
    // References are stored once, raw.
    assert_eq!(v["references"]["windows"].as_array().unwrap().len(), 18);
    let back = KnnModelFile::from_json(&text).unwrap();
    assert_eq!(back.stage2, m.stage2);
    assert_eq!(back.to_json().unwrap(), text);
    assert!(back.any_model().unwrap().two_stage().is_some());
    // A one-stage file stays version 1 and has no stage2 field.
    let one = sample().to_json().unwrap();
    assert!(one.contains(r#""version":1"#) && !one.contains("stage2"));
    assert!(sample().any_model().unwrap().two_stage().is_none());
}

/// A combined k-NN stage 2 (version 3): z-sorted, k = 3, a = 0.25, the
/// scales fitted by `TwoStage::new` (stage 1 divide-min: positive windows).
fn knn_sample() -> KnnModelFile {
    let (x, y) = synth::dataset(&SIX_CLASSES, 4, 6, 2).unwrap();
    let cfg = KnnConfig {
        normalization: Normalization::DivideMin,
        dtw: DtwParams {
            radius: Some(2),
            cost: Cost::Abs,
        },
        k: 1,
    };
    let classes = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let model = knn::Model::fit(&x, 6, &y, classes, cfg).unwrap();
    let s2 = knn::Stage2 {
        k: 3,
        stage1_weight: 0.25,
        ..knn::Stage2::new(Normalization::ZSorted, knn::Split::BbrPresent)
    };
    let s2 = knn::TwoStage::new(&model, s2).unwrap().stage2();
    KnnModelFile {
        model,
        meta: Metadata::default(),
        stage2: Some(s2),
    }
}

#[test]
fn knn_stage2_round_trip_and_version_3() {
    let m = knn_sample();
    let [s2, s1] = m.stage2.unwrap().scales.unwrap();
    let text = m.to_json().unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["version"], 3);
    assert_eq!(
        v["stage2"],
        serde_json::json!({"normalization": "z-sorted", "split": "bbr-present", "k": 3,
                           "stage1_weight": 0.25, "scales": [s2, s1]})
    );
    let back = KnnModelFile::from_json(&text).unwrap();
    assert_eq!(back.stage2, m.stage2);
    assert_eq!(back.to_json().unwrap(), text);
    // Loading uses the stored scales: changed in the file, changed in the model.
    let mut v2 = v.clone();
    v2["stage2"]["scales"] = serde_json::json!([1.5, 2.5]);
    let other = KnnModelFile::from_json(&v2.to_string()).unwrap();
    let t = other.any_model().unwrap();
    assert_eq!(t.two_stage().unwrap().stage2().scales, Some([1.5, 2.5]));
    // A z-sorted 1-NN stage 2 without the new fields stays version 2.
    let mut one = m.clone();
    one.stage2 = Some(knn::Stage2::new(
        Normalization::ZSorted,
        knn::Split::BbrPresent,
    ));
    let v1: serde_json::Value = serde_json::from_str(&one.to_json().unwrap()).unwrap();
    assert_eq!(v1["version"], 2);
    assert_eq!(
        v1["stage2"],
        serde_json::json!({"normalization": "z-sorted", "split": "bbr-present"})
    );
}

#[test]
fn knn_stage2_fields_are_checked() {
    let bad = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value =
            serde_json::from_str(&knn_sample().to_json().unwrap()).unwrap();
        f(&mut v);
        let e = KnnModelFile::from_json(&v.to_string()).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidModel, "{e}");
        e.to_string()
    };
    let e = bad(&|v| v["version"] = 2.into());
    assert!(e.contains("need version 3"), "{e}");
    let e = bad(&|v| v["stage2"]["k"] = 0.into());
    assert!(e.contains("k is 0"), "{e}");
    // 12 references on each side (24 over six classes, three per side).
    let e = bad(&|v| v["stage2"]["k"] = 13.into());
    assert!(e.contains("k = 13") && e.contains("12 references"), "{e}");
    let e = bad(&|v| v["stage2"]["stage1_weight"] = serde_json::json!(-0.25));
    assert!(e.contains("stage1_weight is -0.25"), "{e}");
    let e = bad(&|v| v["stage2"]["scales"] = serde_json::json!([0.0, 1.0]));
    assert!(e.contains("scales has 0"), "{e}");
    let e = bad(&|v| v["stage2"]["scales"] = serde_json::json!([1.0, -2.0]));
    assert!(e.contains("scales has -2"), "{e}");
    let e = bad(&|v| v["stage2"]["scales"] = serde_json::json!([1.0]));
    assert!(e.contains("scales has 1 values"), "{e}");
    let e = bad(&|v| {
        v["stage2"].as_object_mut().unwrap().remove("scales");
    });
    assert!(e.contains("scales is missing"), "{e}");
    let e = bad(&|v| v["stage2"]["normalization"] = "z-score".into());
    assert!(e.contains("z-sorted"), "{e}");
    // The weight 0 needs no scales.
    let mut v: serde_json::Value = serde_json::from_str(&knn_sample().to_json().unwrap()).unwrap();
    v["stage2"]["stage1_weight"] = serde_json::json!(0.0);
    v["stage2"].as_object_mut().unwrap().remove("scales");
    let f = KnnModelFile::from_json(&v.to_string()).unwrap();
    assert_eq!(f.stage2.unwrap().k, 3);
    // Writing refuses a weight without scales.
    let mut m = knn_sample();
    m.stage2.as_mut().unwrap().scales = None;
    let e = m.to_json().unwrap_err();
    assert!(e.to_string().contains("scales is missing"), "{e}");
}

fn mutate2(f: impl FnOnce(&mut serde_json::Value)) -> Error {
    let mut v: serde_json::Value =
        serde_json::from_str(&two_stage_sample().to_json().unwrap()).unwrap();
    f(&mut v);
    KnnModelFile::from_json(&v.to_string()).unwrap_err()
}

#[test]
fn two_stage_files_are_checked() {
    // stage2 under version 1: an older writer never makes this, and a reader
    // that knows one stage must not be handed it.
    let e = mutate2(|v| v["version"] = 1.into());
    assert!(e.to_string().contains("must have version 2"), "{e}");
    let e = mutate2(|v| v["stage2"]["split"] = "heterogeneous".into());
    assert_eq!(e.kind(), crate::ErrorKind::InvalidModel, "{e}");
    assert!(
        e.to_string().contains("stage2.split") && e.to_string().contains("heterogeneous"),
        "{e}"
    );
    let e = mutate2(|v| v["stage2"]["normalization"] = "log".into());
    assert!(
        e.to_string().contains("stage2.normalization") && e.to_string().contains("\"log\""),
        "{e}"
    );
    let e = mutate2(|v| {
        v["stage2"].as_object_mut().unwrap().remove("split");
    });
    assert!(e.to_string().contains("split"), "{e}");
    let e = mutate2(|v| v["stage2"]["weight"] = 1.into());
    assert!(e.to_string().contains("weight"), "{e}");
    let e = mutate2(|v| v["k"] = 3.into());
    assert!(e.to_string().contains("k = 3"), "{e}");
    // Class names that are not mixes cannot be split by BBR presence.
    let e = mutate2(|v| v["classes"][0] = "idle".into());
    assert!(
        e.to_string().contains("stage2") && e.to_string().contains("idle"),
        "{e}"
    );
    // Writing refuses a stage2 the references cannot support.
    let mut bad = two_stage_sample();
    bad.model = knn::Model::fit(
        &[1.0, 2.0, 3.0, 4.0, 5.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        5,
        &[0, 1],
        vec!["B0-C0".into(), "C1-C1".into()],
        KnnConfig::default(),
    )
    .unwrap();
    let e = bad.to_json().unwrap_err();
    assert!(e.to_string().contains("bbr-present"), "{e}");
}

/// The stage-1 term (version 4), on a one-stage file and on the version-3
/// two-stage one: written only when present, round-trips exactly, loads
/// with the stored scales, and malformed fields get clear errors.
#[test]
fn stage1_term_round_trip_version_4_and_rejections() {
    for base in [sample(), knn_sample()] {
        let mut f = base.clone();
        f.model = f
            .model
            .with_stage1_term(Some(knn::Stage1Term::sorted_steps(0.25)))
            .unwrap();
        let [s1, sf] = f.model.stage1_term().unwrap().scales.unwrap();
        let text = f.to_json().unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["version"], 4);
        assert_eq!(
            v["stage1_term"],
            serde_json::json!({"kind": "sorted-steps", "weight": 0.25, "scales": [s1, sf]})
        );
        let back = KnnModelFile::from_json(&text).unwrap();
        assert_eq!(back.model.stage1_term(), f.model.stage1_term());
        assert_eq!(back.stage2, f.stage2);
        assert_eq!(back.to_json().unwrap(), text);
        // The loaded classifier ranks by C1, with the stored scales.
        let mut v2 = v.clone();
        v2["stage1_term"]["scales"] = serde_json::json!([1.5, 2.5]);
        let other = KnnModelFile::from_json(&v2.to_string()).unwrap();
        assert_eq!(other.model.stage1_term().unwrap().scales, Some([1.5, 2.5]));
        let any = back.any_model().unwrap();
        let s1m = match &any {
            knn::AnyModel::One(m) => m,
            knn::AnyModel::Two(t) => t.stage1_model(),
        };
        assert_eq!(s1m.stage1_term(), f.model.stage1_term());
        // Without the term the file is what it was (no field, old version).
        assert_eq!(base.to_json().unwrap().contains("stage1_term"), false);
        let bad = |g: &dyn Fn(&mut serde_json::Value)| {
            let mut w = v.clone();
            g(&mut w);
            KnnModelFile::from_json(&w.to_string()).unwrap_err()
        };
        let e = bad(&|w| w["version"] = 3.into());
        assert!(e.to_string().contains("must have version 4"), "{e}");
        let e = bad(&|w| w["stage1_term"]["kind"] = "acf".into());
        assert!(
            e.to_string().contains("stage1_term.kind") && e.to_string().contains("sorted-steps"),
            "{e}"
        );
        let e = bad(&|w| w["stage1_term"]["scales"] = serde_json::json!([1.0]));
        assert!(e.to_string().contains("it must be two"), "{e}");
        let e = bad(&|w| w["stage1_term"]["scales"] = serde_json::json!([1.0, -2.0]));
        assert!(e.to_string().contains("stage1_term.scales"), "{e}");
        let e = bad(&|w| w["stage1_term"]["weight"] = serde_json::json!(-0.5));
        assert!(e.to_string().contains("stage1_term.weight"), "{e}");
        let e = bad(&|w| w["stage1_term"]["weight"] = serde_json::json!(0.0));
        assert!(e.to_string().contains("weight is 0"), "{e}");
        let e = bad(&|w| w["stage1_term"]["extra"] = serde_json::json!(1));
        assert_eq!(e.kind(), crate::ErrorKind::InvalidModel, "{e}");
        let e = bad(&|w| {
            w["stage1_term"].as_object_mut().unwrap().remove("scales");
        });
        assert!(e.to_string().contains("scales"), "{e}");
        for e in [&e] {
            assert_eq!(e.kind(), crate::ErrorKind::InvalidModel, "{e}");
        }
    }
}
