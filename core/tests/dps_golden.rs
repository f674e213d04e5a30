//! Golden vectors for DPS from document 002 (`tests/fixtures/dps/golden.json`):
//! the utility of Fig 4.3 on the thesis's QoS ranges, the §4.5 ramp
//! histogram, Alg 2 merges, Alg 4 signals, the two-flow Jain/ratio table and
//! Fig 5.4's learning cycles at p = 1 (Alg 3).

use opsel::dps::sim::{learning_run, ratio_for_jain};
use opsel::dps::{History, MetricStats, PeriodStats, Qos};
use opsel::fair::{FairnessSpec, ViolationDetector};
use serde_json::Value;

fn golden() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/dps/golden.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn qos(range: &Value, bins: usize) -> Qos {
    let r: Vec<Option<f64>> = serde_json::from_value(range.clone()).unwrap();
    Qos::new(
        "golden",
        r[0].unwrap_or(f64::NEG_INFINITY),
        r[1].unwrap_or(f64::INFINITY),
        r[2].unwrap_or(f64::NEG_INFINITY),
        r[3].unwrap_or(f64::INFINITY),
        bins,
    )
    .unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    serde_json::from_value(v.clone()).unwrap()
}

#[test]
fn utility_vectors() {
    let g = golden();
    for case in g["utility"].as_array().unwrap() {
        let q = qos(&case["range"], 10);
        for (x, u) in floats(&case["x"]).into_iter().zip(floats(&case["u"])) {
            let got = q.utility(x);
            assert!(
                (got - u).abs() < 1e-9,
                "{}: u({x}) = {got}, want {u}",
                case["source"]
            );
            assert!((0.0..=1.0).contains(&got));
        }
    }
}

#[test]
fn histogram_vector() {
    let g = &golden()["histogram"];
    let q = qos(&g["range"], g["bins"].as_u64().unwrap() as usize);
    let mut p = PeriodStats::new();
    for x in floats(&g["samples"]) {
        p.push(&q, x);
    }
    let want: Vec<u64> = serde_json::from_value(g["counts"].clone()).unwrap();
    assert_eq!(&p.counts()[..q.slots()], &want[..]);
    for (s, u) in floats(&g["slot_utility"]).into_iter().enumerate() {
        assert!((q.slot_utility(s) - u).abs() < 1e-12, "slot {s}");
    }
}

#[test]
fn alg2_vectors() {
    let g = &golden()["alg2"];
    let q = qos(&serde_json::json!([0, 300, 0, 400]), 10);
    let mut s = MetricStats::default();
    let periods = g["periods"].as_array().unwrap();
    for (per, after) in periods.iter().zip(g["after"].as_array().unwrap()) {
        let mut p = PeriodStats::new();
        for x in floats(per) {
            p.push(&q, x);
        }
        s.merge(&p, &History::default());
        assert_eq!(s.n(), after["n"].as_f64().unwrap());
        for (got, key) in [
            (s.mean(), "mean"),
            (s.dist()[0], "good"),
            (s.dist()[1], "bad"),
            (s.expected_utility(&q), "u_stat"),
        ] {
            let want = after[key].as_f64().unwrap();
            assert!((got - want).abs() < 1e-12, "{key}: {got} vs {want}");
        }
    }
}

#[test]
fn alg4_vector() {
    let g = &golden()["alg4"];
    let mut d = ViolationDetector::new(FairnessSpec::default()).unwrap();
    let signals: Vec<bool> = serde_json::from_value(g["signal"].clone()).unwrap();
    for (f, want) in floats(&g["f"]).into_iter().zip(signals) {
        assert_eq!(d.update(f), want, "F = {f}");
    }
}

#[test]
fn jain_ratio_table() {
    let g = &golden()["jain_ratio"];
    let tol = g["tolerance"].as_f64().unwrap();
    for (j, r) in floats(&g["jain"]).into_iter().zip(floats(&g["ratio"])) {
        let got = ratio_for_jain(j);
        assert!((got - r).abs() < tol, "J {j}: ratio {got}, want {r}");
    }
}

#[test]
fn learning_cycles_equal_set_size_at_p1() {
    let g = &golden()["learning_cycles_at_p1"];
    let sets: Vec<Vec<String>> = serde_json::from_value(g["sets"].clone()).unwrap();
    let cycles: Vec<u64> = serde_json::from_value(g["cycles"].clone()).unwrap();
    for (set, want) in sets.iter().zip(cycles) {
        let names: Vec<&str> = set.iter().map(String::as_str).collect();
        for seed in 0..20 {
            assert_eq!(
                learning_run(&names, 1.0, seed).unwrap().learning_cycles,
                want,
                "{names:?}"
            );
        }
    }
}
