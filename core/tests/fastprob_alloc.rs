//! `Prober::push` allocates nothing (DESIGN.md: zero allocation on hot paths), on
//! models exported from scikit-learn by `opsel.train_fastprob`: the version-1 raw
//! fixture, the version-2 ratio+stats fixture (features computed on the stack) and
//! the version-3 fixture (log target, error-regression gates) and the version-4
//! fixtures (the tree spread and absolute-scale gate inputs, per-length and pooled
//! gates, a family's budget, a budget that follows the family inferred from the
//! prefix, soft and hard).
use opsel::fastprob::{Decision, FastProbModel, Prober};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

#[test]
fn push_does_not_allocate() {
    push_does_not_allocate_on("model_small.json");
}

#[test]
fn push_does_not_allocate_with_ratio_features() {
    push_does_not_allocate_on("model_v2_small.json");
}

#[test]
fn push_does_not_allocate_with_a_log_target_and_error_gates() {
    push_does_not_allocate_on("tests/fastprob_fixtures/model_v3_small.json");
}

#[test]
fn push_does_not_allocate_with_spread_and_scale_gate_inputs() {
    push_does_not_allocate_on("tests/fastprob_fixtures/model_v4_small.json");
}

#[test]
fn push_does_not_allocate_with_a_pooled_gate_and_a_family_budget() {
    push_does_not_allocate_on("tests/fastprob_fixtures/model_v4_pooled_small.json");
}

#[test]
fn push_does_not_allocate_with_an_inferred_family() {
    push_does_not_allocate_on("tests/fastprob_fixtures/model_v4_family_small.json");
    push_does_not_allocate_on("tests/fastprob_fixtures/model_v4_family_hard_small.json");
}

fn push_does_not_allocate_on(file: &str) {
    // A bare name is a fixture shared with the bindings; a path is the core's own.
    let p = if file.contains('/') {
        format!("{}/{file}", env!("CARGO_MANIFEST_DIR"))
    } else {
        format!(
            "{}/../tests/fixtures/fastprob/{file}",
            env!("CARGO_MANIFEST_DIR")
        )
    };
    let model = FastProbModel::load(std::path::Path::new(&p)).unwrap();
    // A file with a family classifier runs its default path (the inferred
    // family's budget at every gate); one with budgets only, a family's budget.
    let mut probe = match model.family_budgets().first() {
        _ if model.family_classifier().is_some() => Prober::new(&model),
        Some((fam, _)) => Prober::new(&model).family(fam).unwrap(),
        None => Prober::new(&model),
    };
    assert_eq!(probe.infers_family(), model.family_classifier().is_some());
    let (stops, n) = count(|| {
        let mut stops = 0usize;
        for run in 0..200u32 {
            probe.reset();
            for k in 0..model.spec().cap as u32 {
                let s = 5.0e8 + ((run * 31 + k * 17) % 97) as f64 * 1.0e7;
                match probe.push(s).unwrap() {
                    Decision::Continue => {}
                    Decision::Stop(p) | Decision::ForcedStop(p) => {
                        std::hint::black_box(p);
                        stops += 1;
                        break;
                    }
                }
            }
        }
        stops
    });
    assert_eq!(stops, 200, "every probe ends by the cap");
    assert_eq!(n, 0, "allocations during 200 probes");
}
