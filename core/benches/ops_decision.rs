//! OPS decision latency: from the last RTT sample of a window to the SetCca
//! action (000 §5.5 / A16: steps 2 + 3 took "about 1 s or less" with the
//! thesis's Python classifier; target < 100 µs). Test-double classifiers
//! here; the DTW K-NN latency is benchmarked in its own bench.
//!
//! Run: `cargo bench -p opsel --bench ops_decision`

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use opsel::mix::{Mix, SIX_CLASSES};
use opsel::ops::doubles::{CentroidClassifier, ScriptedClassifier};
use opsel::ops::sim::{train_centroids, FgActivity, RttSynth};
use opsel::ops::{Action, CcaName, Classifier, Config, Controller, Output, Stump};
use opsel::probe::{Pattern, SegmentKind};

const S: u64 = 1_000_000_000;

/// A controller whose probe window holds 19 of 20 samples; the socket is on
/// bbr (last burst of S5-C5-S5-B5) and the window shows a CUBIC background,
/// so the 20th sample must yield SetCca(cubic).
fn armed<C: Classifier>(classifier: C, window: &[f64]) -> Controller<C, Stump> {
    let mut c = Controller::new(
        Config::active(Pattern::parse("S5-C5-S5-B5").unwrap()),
        classifier,
        Stump::default(),
    )
    .unwrap();
    c.start(0).unwrap();
    for (k, &rtt) in window[..19].iter().enumerate() {
        let t = (k as u64 + 1) * S;
        c.handle_timeout(t).unwrap();
        c.handle_sample(t, rtt).unwrap();
    }
    while c.poll().is_some() {}
    c
}

/// The measured step: last sample in, outputs drained up to SetCca.
fn decide<C: Classifier>(c: &mut Controller<C, Stump>, last_rtt: f64) -> CcaName {
    c.handle_sample(20 * S, last_rtt).unwrap();
    while let Some(o) = c.poll() {
        if let Output::Action(Action::SetCca(cca)) = o {
            return cca;
        }
    }
    panic!("no SetCca after a full window");
}

fn cubic_window() -> Vec<f64> {
    let p = Pattern::parse("S5-C5-S5-B5").unwrap();
    let mix = Mix::parse("B0-C1").unwrap();
    let mut synth = RttSynth::new(77);
    (0..20)
        .map(|k| {
            let i = p.segment_of_sample(k, S).unwrap();
            let fg = match p.segments()[i].kind {
                SegmentKind::Silence => FgActivity::Silent,
                SegmentKind::Burst(c) => FgActivity::Sending(c),
            };
            synth.sample(&mix, fg)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let window = cubic_window();
    let mut g = c.benchmark_group("ops_decision_latency");

    let scripted = ScriptedClassifier::new(20, &SIX_CLASSES, &[("B0-C1", 1.0)]).unwrap();
    g.bench_function("scripted_classifier", |b| {
        b.iter_batched(
            || armed(scripted.clone(), &window),
            |mut ctl| {
                let cca = decide(&mut ctl, window[19]);
                assert_eq!(cca, CcaName::CUBIC);
                black_box(ctl)
            },
            BatchSize::SmallInput,
        )
    });

    let centroid: CentroidClassifier = train_centroids(
        &Config::active(Pattern::parse("S5-C5-S5-B5").unwrap()).mode,
        20,
        &SIX_CLASSES,
        40,
        1234,
    )
    .unwrap();
    g.bench_function("centroid_classifier_w20_6_classes", |b| {
        b.iter_batched(
            || armed(centroid.clone(), &window),
            |mut ctl| {
                let cca = decide(&mut ctl, window[19]);
                assert_eq!(cca, CcaName::CUBIC);
                black_box(ctl)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();

    // The steady path: one handle_sample per second while transferring.
    let mut ctl = armed(centroid.clone(), &window);
    decide(&mut ctl, window[19]);
    while ctl.poll().is_some() {}
    let mut t = 21 * S;
    c.bench_function("ops_steady_handle_sample", |b| {
        b.iter(|| {
            // Stay within the 100 s steady phase: time advances by 1 ns per call.
            t += 1;
            ctl.handle_sample(black_box(t), black_box(120.0)).unwrap();
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
