//! Decision latency of `sys::linux::OpsDriver` (target < 100 µs; the
//! thesis's Python classifier took about 1 s, 000 §5.5 / A16): from the last
//! RTT sample of a probe window handed to the driver to the return of
//! `setsockopt(TCP_CONGESTION)` on a real (loopback) TCP socket, with the
//! shipped models (`models/passive`, `models/passive-200ms`, `models/passive-netlab` one window and
//! margin-gated as `make demo` runs it, `models/active-s5c5s5b5`,
//! `models/active-s5c5s5b5-netlab`), and `models/passive-200ms-two-stage`
//! (`knn::TwoStage`: the same references, stage 1 decides BBR present, stage
//! 2 the mix on that side with z-score).
//!
//! Queries are leave-one-out: for reference i the model is refitted on the
//! other n − 1 references (the shipped size less one) and the driver is fed
//! reference i, a real window the model has not seen. Only windows whose
//! decision switches the socket count (passive: initial cubic → bbr;
//! S5-C5-S5-B5: the B5 burst's bbr → cubic).
//!
//! Three parts, each printing median / p90 / p99:
//! 1. `feed`: the driver's own sample path (`OpsDriver::feed_sample`:
//!    controller → prepared DTW K-NN (1-NN with margin; the z-score default
//!    3-NN speculatively prepared, a bounded finish) → stump → setsockopt with
//!    read-back → events), timed by the driver's `CcaSet` latency (the span
//!    from the sample to the return of setsockopt), plus its breakdown:
//!    classify (as prepared on the (w − 1)th sample, and unprepared for
//!    comparison), policy, setsockopt + read-back.
//! 2. `run`: the whole `OpsDriver::run` loop with its RTT prober thread
//!    (a scripted echo prober replaying the model's traces at 50 samples/s)
//!    sending on the socket: the driver's `Decision` latency, from the
//!    prober's reading of the window's last echo through the thread hand-off
//!    (pipe wake-up) to the return of setsockopt.
//! 3. criterion estimates of part 1's step for each model.
//!
//! Run: `cargo bench -p opsel --bench ops_driver` (or `make bench-ops-driver`).
//! `OPSEL_BENCH_ROUNDS` (default 3) sets part 1's rounds of leave-one-out
//! queries, `OPSEL_BENCH_RUN_S` (default 20) part 2's seconds per model, and
//! `OPSEL_BENCH_MODELS=passive-200ms,passive` keeps only those cases.
//! `OPSEL_BENCH_MODEL_FILES=name=path[,name=path]` adds passive cases for
//! other model files (a candidate not yet in `models/`), each probed at its
//! file's sample period, printed under `name`.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{black_box, Criterion};
use opsel::knn::{Model, Stage2, TwoStage};
use opsel::ops::{
    Classifier, Config, Controller, KnnClassifier, Policy, Stump, TwoStageClassifier,
};
use opsel::probe::{CcaName, Pattern};
use opsel::sys::linux::clock::monotonic_ns;
use opsel::sys::linux::ops_driver::{DriverConfig, DriverEvent, OpsDriver, RttSource};
use opsel::sys::linux::rtt::{BurstConfig, EchoProbe};

const S: u64 = 1_000_000_000;

struct Shipped {
    name: String,
    /// Relative to the repository root, as printed (no machine path in the
    /// output; `OPSEL_BENCH_MODEL_FILES` cases print their name only).
    rel: String,
    model: Model,
    config: Config,
    /// Classify with a two-stage model over `model` (none of the shipped
    /// files has a second stage).
    stage2: Option<Stage2>,
}

/// The classifier the driver runs for `model`: one stage, or two.
fn classifier(model: &Model, stage2: Option<Stage2>) -> Box<dyn Classifier + Send> {
    match stage2 {
        None => Box::new(KnnClassifier::new(model.clone()).unwrap()),
        Some(s) => Box::new(TwoStageClassifier::new(TwoStage::new(model, s).unwrap()).unwrap()),
    }
}

/// `make demo`'s OPS: passive, up to 3 windows, a second one only while the
/// running min-sum margin is below 0.1 (`opsel demo --cycles 3
/// --extend-below 0.1`; `ops::Progressive` at window boundaries).
fn gated_passive() -> Config {
    let mut c = Config::passive();
    c.cycles = 3;
    c.progressive = Some(opsel::ops::Progressive {
        min_samples: 1,
        step: 1,
        min_confidence: 0.1,
        agree: 1,
    });
    c
}

fn shipped() -> Vec<Shipped> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    [
        ("passive", "models/passive/model.json", Config::passive()),
        // Five samples a second, 10-s windows (models/passive-200ms/MODEL_CARD.md).
        (
            "passive-200ms",
            "models/passive-200ms/model.json",
            Config {
                sample_period_ns: 200_000_000,
                ..Config::passive()
            },
        ),
        (
            "passive-200ms-two-stage",
            "models/passive-200ms-two-stage/model.json",
            Config {
                sample_period_ns: 200_000_000,
                ..Config::passive()
            },
        ),
        // No normalisation (the netlab-tuned passive model): the exact
        // prepared path for every window; gated, each window's per-class
        // distances come from the same preparation.
        (
            "passive-netlab",
            "models/passive-netlab/model.json",
            Config::passive(),
        ),
        (
            "passive-netlab-gated",
            "models/passive-netlab/model.json",
            gated_passive(),
        ),
        (
            "active-s5c5s5b5",
            "models/active-s5c5s5b5/model.json",
            Config::active(Pattern::parse("S5-C5-S5-B5").unwrap()),
        ),
        // The netlab-tuned active model the OPS runs use (divide-min, 1-NN:
        // the exact prepared path); the default above is z-score 3-NN, prepared
        // speculatively (guessed last samples, a bounded finish; knn/prepared.rs).
        (
            "active-s5c5s5b5-netlab",
            "models/active-s5c5s5b5-netlab/model.json",
            Config::active(Pattern::parse("S5-C5-S5-B5").unwrap()),
        ),
    ]
    .into_iter()
    .map(|(name, rel, config)| {
        let file = opsel::model::load(root.join(rel)).unwrap();
        let (model, stage2) = (file.model, file.stage2);
        Shipped {
            name: name.to_string(),
            rel: rel.to_string(),
            model,
            config,
            stage2,
        }
    })
    .chain(extra_files())
    .collect()
}

/// `OPSEL_BENCH_MODEL_FILES=name=path,...`: passive cases at each file's
/// sample period.
fn extra_files() -> Vec<Shipped> {
    let Ok(spec) = std::env::var("OPSEL_BENCH_MODEL_FILES") else {
        return Vec::new();
    };
    spec.split(',')
        .filter(|s| !s.is_empty())
        .map(|item| {
            let (name, path) = item
                .split_once('=')
                .expect("OPSEL_BENCH_MODEL_FILES entries are name=path");
            let file = opsel::model::load(path).unwrap();
            let config = Config {
                sample_period_ns: (file.meta.probing.sample_interval_ms * 1e6).round() as u64,
                ..Config::passive()
            };
            Shipped {
                name: name.to_string(),
                rel: format!("{name} (OPSEL_BENCH_MODEL_FILES)"),
                model: file.model,
                config,
                stage2: file.stage2,
            }
        })
        .collect()
}

/// Model without reference i, and reference i as the query.
fn leave_one_out(m: &Model, i: usize) -> (Model, Vec<f64>) {
    (m.without_reference(i).unwrap(), m.raw_reference(i).to_vec())
}

/// CCA on the socket when the window's last sample arrives.
fn cca_at_window_end(cfg: &Config) -> CcaName {
    match &cfg.mode {
        opsel::ops::ProbeMode::Active(p) => p.segments().last().unwrap().cca().unwrap(),
        opsel::ops::ProbeMode::Passive => cfg.initial_cca,
    }
}

type Driver = OpsDriver<Box<dyn Classifier + Send>, Stump>;

/// A driver whose controller started at `base` with w − 1 samples in its
/// window (the (w − 1)th prepared the decision), so the sample at
/// `base + w s` is the window's last.
fn armed(
    clf: Box<dyn Classifier + Send>,
    cfg: &Config,
    q: &[f64],
    sock: &TcpStream,
    base: u64,
) -> Driver {
    let ctl = Controller::new(cfg.clone(), clf, Stump::default()).unwrap();
    let mut d = OpsDriver::new(
        ctl,
        RttSource::UdpEcho("127.0.0.1:9".parse().unwrap()),
        // No lead-in: the window starts at `start`.
        DriverConfig {
            lead_in: false,
            ..DriverConfig::default()
        },
    )
    .unwrap();
    d.start(sock, base, &mut |_| {}).unwrap();
    for (k, &rtt) in q[..q.len() - 1].iter().enumerate() {
        d.feed_sample(
            sock,
            base + (k as u64 + 1) * cfg.sample_period_ns,
            rtt,
            &mut |_| {},
        )
        .unwrap();
    }
    d
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn row(name: &str, v: &mut [f64]) {
    let (a, b, c) = (pct(v, 0.5), pct(v, 0.9), pct(v, 0.99));
    println!(
        "  {name:44} n {:5}  median {a:8.1} µs  p90 {b:8.1} µs  p99 {c:8.1} µs",
        v.len()
    );
}

/// setsockopt(TCP_CONGESTION) + getsockopt read-back: what the driver's
/// switch does, in µs.
fn setsockopt_us(sock: &TcpStream, cca: &str) -> f64 {
    let fd = sock.as_raw_fd();
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    let t = Instant::now();
    // SAFETY: valid fd, buffers and lengths.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cca.as_ptr().cast(),
            cca.len() as libc::socklen_t,
        );
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        );
    }
    t.elapsed().as_secs_f64() * 1e6
}

/// Part 1: the driver's sample path per leave-one-out query.
fn feed_part(m: &Shipped, sock: &TcpStream, rounds: usize) {
    let model = &m.model;
    let w = model.window();
    let from = cca_at_window_end(&m.config);
    println!(
        "{} ({}{}): {} references, w = {}, {} rounds of leave-one-out queries",
        m.name,
        m.rel,
        m.stage2.map_or(String::new(), |s| format!(
            ", stage 2 {}",
            s.normalization.name()
        )),
        model.len(),
        model.window(),
        rounds
    );
    let (mut total, mut prepared, mut unprepared, mut policy, mut sso) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut prepare = Vec::new();
    let mut switching = 0;
    let mut extended = 0;
    let mut stalled = 0;
    let mut stump = Stump::default();
    for round in 0..rounds {
        for i in 0..model.len() {
            let (sub, q) = leave_one_out(model, i);
            // Breakdown, on the same classifier state as the driver's.
            let two = m.stage2.map(|s| TwoStage::new(&sub, s).unwrap());
            let make = || -> Box<dyn Classifier + Send> {
                match &two {
                    None => Box::new(KnnClassifier::new(sub.clone()).unwrap()),
                    Some(t) => Box::new(TwoStageClassifier::new(t.clone()).unwrap()),
                }
            };
            let mut kc = make();
            let t = Instant::now();
            let c = black_box(kc.classify(&q).unwrap());
            unprepared.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            kc.prepare(&q[..w - 1]);
            let t_prepare = t.elapsed().as_secs_f64() * 1e6;
            let t = Instant::now();
            let c2 = black_box(kc.classify(&q).unwrap());
            let t_prep = t.elapsed().as_secs_f64() * 1e6;
            assert_eq!(c, c2, "prepared classification differs");
            let t = Instant::now();
            let cca = black_box(stump.select(&c).unwrap());
            let t_pol = t.elapsed().as_secs_f64() * 1e6;
            if cca == from {
                continue; // no switch: not a setsockopt decision
            }
            if round == 0 {
                switching += 1;
            }
            prepared.push(t_prep);
            prepare.push(t_prepare);
            policy.push(t_pol);
            sso.push(setsockopt_us(
                sock,
                if round % 2 == 0 { "bbr" } else { "cubic" },
            ));
            // The measured step: the driver's own latency of the switch.
            // The classifier is built before the window's clock starts.
            let clf = make();
            let period = m.config.sample_period_ns;
            let base = monotonic_ns() - w as u64 * period;
            let mut d = armed(clf, &m.config, &q, sock, base);
            let now = monotonic_ns();
            // Arming (w − 1 samples and the preparation) ran past the last
            // sample's period: the controller fills that period with the
            // previous sample (a missed prober tick) and decides on it.
            let stalled_past_period = now >= base + (w as u64 + 1) * period;
            let mut lat = None;
            d.feed_sample(sock, now, q[w - 1], &mut |e| {
                if let DriverEvent::CcaSet {
                    cca: got,
                    latency_ns: Some(l),
                    ..
                } = e
                {
                    assert_eq!(*got, cca);
                    lat = Some(*l);
                }
            })
            .unwrap();
            match lat {
                Some(l) => total.push(l as f64 / 1e3),
                // Gated: an unsure first window extends the probe, no decision yet.
                None if m.config.cycles > 1 => extended += 1,
                None if stalled_past_period => stalled += 1,
                None => panic!("the decision switched the socket"),
            }
        }
    }
    println!(
        "  {switching} of {} windows switch the socket ({from} → other){}",
        model.len(),
        if m.config.cycles > 1 {
            format!("; {extended} of the switching queries (all rounds) were unsure and extended the probe")
        } else {
            String::new()
        }
    );
    if stalled > 0 {
        println!(
            "  {stalled} switching queries not timed: arming the driver outlasted a sample period (a stalled, loaded machine)"
        );
    }
    row("last sample -> setsockopt returns (driver)", &mut total);
    row("  classify (prepared, as in the driver)", &mut prepared);
    row("  classify (unprepared: the old path)", &mut unprepared);
    row(
        "  (prepare on the (w − 1)th sample, off the path)",
        &mut prepare,
    );
    row("  policy (stump)", &mut policy);
    row("  setsockopt + read-back", &mut sso);
}

/// Replays RTT values (ms) as echo replies: each burst's replies carry the
/// next value, answered at once.
struct Replay {
    values: Vec<f64>,
    next: usize,
    pending: Vec<(u16, u64)>,
}

impl EchoProbe for Replay {
    fn send_echo(&mut self, seq: u16) -> opsel::Result<u64> {
        let now = monotonic_ns();
        let rtt_ns = (self.values[self.next % self.values.len()] * 1e6) as u64;
        self.pending.push((seq, now + rtt_ns));
        Ok(now)
    }
    fn recv_reply(&mut self, timeout: Duration) -> opsel::Result<Option<(u16, u64)>> {
        match self.pending.pop() {
            Some(r) => {
                if self.pending.is_empty() {
                    self.next += 1;
                }
                Ok(Some(r))
            }
            None => {
                std::thread::sleep(timeout.min(Duration::from_millis(1)));
                Ok(None)
            }
        }
    }
}

/// Part 2: `OpsDriver::run` with its prober thread, `secs` seconds, 20 ms
/// samples; returns the driver's switching decision latencies.
fn run_part(m: &Shipped, secs: u64) {
    let period = S / 50;
    let mut cfg = m.config.clone();
    cfg.sample_period_ns = period;
    cfg.steady_ns = 10 * period;
    if let opsel::ops::ProbeMode::Active(_) = cfg.mode {
        // S5-C5-S5-B5 at 50× speed (segments of 5 samples).
        cfg.mode = opsel::ops::ProbeMode::Active(Pattern::parse("S0.1-C0.1-S0.1-B0.1").unwrap());
    }
    // The traces of every class, in reference order: windows straddle two
    // references, so they are realistic but unseen.
    let values: Vec<f64> = m.model.raw_references().to_vec();
    let ctl = Controller::new(cfg, classifier(&m.model, m.stage2), Stump::default()).unwrap();
    let dcfg = DriverConfig {
        burst: BurstConfig {
            count: 1,
            interval_ns: 1_000_000,
            timeout_ns: 5_000_000,
        },
        time_limit_ns: Some(secs * S),
        lead_in: false,
        chunk_bytes: 64 * 1024,
        ..DriverConfig::default()
    };
    let probe = Replay {
        values,
        next: 7,
        pending: Vec::new(),
    };
    let mut d = OpsDriver::new(ctl, RttSource::Custom(Box::new(probe)), dcfg).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let sock = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mut peer, _) = l.accept().unwrap();
    let sink = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        while matches!(peer.read(&mut buf), Ok(n) if n > 0) {}
    });
    let lat = Arc::new(Mutex::new((Vec::new(), Vec::new())));
    let lat2 = lat.clone();
    let mut src = std::io::repeat(0x5a);
    let rep = d
        .run(&sock, &mut src, &AtomicBool::new(false), &mut |e| {
            if let DriverEvent::Decision {
                latency_ns,
                switched,
                ..
            } = e
            {
                let mut g = lat2.lock().unwrap();
                let v = *latency_ns as f64 / 1e3;
                if *switched {
                    g.0.push(v)
                } else {
                    g.1.push(v)
                }
            }
        })
        .unwrap();
    drop(sock);
    let _ = sink.join();
    let mut g = lat.lock().unwrap();
    println!(
        "{}: OpsDriver::run {secs} s at 50 samples/s, {} MB sent, {} decisions",
        m.name,
        rep.bytes_sent / 1_000_000,
        rep.stats.decisions
    );
    row("last echo read -> setsockopt returns (run)", &mut g.0);
    row("  decisions without a switch (to steady)", &mut g.1);
}

fn main() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let sock = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let _peer = l.accept().unwrap();
    // OPSEL_BENCH_MODELS=passive-200ms,passive: only those cases (names as printed).
    let only = std::env::var("OPSEL_BENCH_MODELS").ok();
    let models: Vec<Shipped> = shipped()
        .into_iter()
        .filter(|m| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|n| n == m.name))
        })
        .collect();
    let rounds: usize = std::env::var("OPSEL_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let run_secs: u64 = std::env::var("OPSEL_BENCH_RUN_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    println!("== part 1: OpsDriver::feed_sample, last sample -> setsockopt ==");
    for m in &models {
        feed_part(m, &sock, rounds);
    }
    println!("== part 2: OpsDriver::run (prober thread, hand-off, sending) ==");
    for m in &models {
        run_part(m, run_secs);
    }

    // Part 3: criterion on part 1's step (one fixed query per model).
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    let mut g = c.benchmark_group("ops_driver");
    // (Gated: part 1 times the same step; a window may not decide there.)
    for m in models.iter().filter(|m| m.config.cycles == 1) {
        let from = cca_at_window_end(&m.config);
        // The first leave-one-out query whose decision switches the socket
        // and whose last sample is not a new minimum (the prepared path; 96%
        // of the passive and 98% of the active references; the others run
        // the search, as part 1's p99 shows).
        let (sub, q) = (0..m.model.len())
            .map(|i| leave_one_out(&m.model, i))
            .find(|(sub, q)| {
                let w = q.len();
                let min = q[..w - 1].iter().copied().fold(f64::INFINITY, f64::min);
                if q[w - 1] < min {
                    return false;
                }
                let c = classifier(sub, m.stage2).classify(q).unwrap();
                Stump::default().select(&c).unwrap() != from
            })
            .unwrap();
        let two = m.stage2.map(|s| TwoStage::new(&sub, s).unwrap());
        g.bench_function(
            format!(
                "last_sample_to_setsockopt_{}_{}refs_w{}",
                m.name,
                sub.len(),
                sub.window()
            ),
            |b| {
                b.iter_batched(
                    || {
                        let base = monotonic_ns() - sub.window() as u64 * m.config.sample_period_ns;
                        // A clone per batch (fitting the stage models is
                        // not the step measured).
                        let clf: Box<dyn Classifier + Send> = match &two {
                            None => Box::new(KnnClassifier::new(sub.clone()).unwrap()),
                            Some(t) => Box::new(TwoStageClassifier::new(t.clone()).unwrap()),
                        };
                        (armed(clf, &m.config, &q, &sock, base), base)
                    },
                    |(mut d, base)| {
                        d.feed_sample(
                            &sock,
                            base + sub.window() as u64 * m.config.sample_period_ns,
                            black_box(q[sub.window() - 1]),
                            &mut |e| {
                                black_box(e);
                            },
                        )
                        .unwrap();
                        d
                    },
                    criterion::BatchSize::SmallInput,
                )
            },
        );
    }
    let mut flip = false;
    g.bench_function("set_cca_with_readback", |b| {
        b.iter(|| {
            flip = !flip;
            opsel::sys::linux::set_cca(&sock, if flip { "cubic" } else { "bbr" }).unwrap()
        })
    });
    g.finish();
    c.final_summary();
}
