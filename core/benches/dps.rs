//! DPS hot paths: one feedback sample into the agent (every sampling
//! interval), one Alg 3 → Alg 1 decision with a period close (every cycle),
//! and one fairness-manager evaluation (Jain + Alg 4, every fairness sample).
//! No peer exists: the thesis published no code (002 note §8).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use opsel::dps::{Agent, DpsSpec, Feedback};
use opsel::fair::{FairnessSpec, FlowReport, Manager};

const S: u64 = 1_000_000_000;

fn bench(c: &mut Criterion) {
    let mut spec = DpsSpec::table_5_2(&["cubic", "vegas", "illinois", "bbr"], 0.25);
    spec.guard.ms = 0;
    spec.guard.rtts = 0;
    spec.selection_period_ms = 1_000_000_000;
    spec.random_period_ms = 1_000_000_000;
    let mut a = Agent::new(&spec).unwrap();
    a.start(0).unwrap();
    while a.poll().is_some() {}
    let mut t = 0u64;
    c.bench_function("dps/feedback_sample", |b| {
        b.iter(|| {
            t += 1;
            let fb = Feedback::sender(t, 40.0 + (t % 400) as f64, 8.0 + (t % 20) as f64 * 0.1);
            a.handle_feedback(black_box(t), black_box(&fb)).unwrap();
        })
    });

    // A cycle per call: 1-sample periods, so every feedback closes a period
    // (Alg 2) and makes a decision (Alg 3, Alg 1 over 4 CCAs).
    let mut spec = DpsSpec::table_5_2(&["cubic", "vegas", "illinois", "bbr"], 0.25);
    spec.guard.ms = 0;
    spec.guard.rtts = 0;
    spec.selection_period_ms = 1;
    spec.random_period_ms = 1;
    let mut a = Agent::new(&spec).unwrap();
    a.start(0).unwrap();
    let mut t = 0u64;
    c.bench_function("dps/cycle_close_and_decide", |b| {
        b.iter(|| {
            t += 1;
            let now = t * S / 1000;
            a.handle_feedback(now, &Feedback::sender(now, 60.0, 9.4))
                .unwrap();
            while let Some(o) = a.poll() {
                black_box(o);
            }
        })
    });

    let mut m = Manager::new(FairnessSpec::default()).unwrap();
    for id in 0..8 {
        m.register(id).unwrap();
        m.handle_report(id, &FlowReport::Learnt).ok();
    }
    for id in 0..8 {
        m.handle_report(
            id,
            &FlowReport::Locked {
                cca: "cubic".into(),
            },
        )
        .unwrap();
    }
    while m.poll().is_some() {}
    let mut k = 0u64;
    c.bench_function("fair/manager_evaluate_8_flows", |b| {
        b.iter(|| {
            k += 1;
            for id in 0..8 {
                m.report_rate(id, 1.0 + ((k + id) % 7) as f64).unwrap();
            }
            black_box(m.evaluate());
            while m.poll().is_some() {}
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
