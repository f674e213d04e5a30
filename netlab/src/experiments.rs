//! Canned experiments: the pipe benchmark (`make bench-netlab`) and the
//! reproduction of 000 Table 6.3's fixed strategies (`make netlab-table`).

use std::fmt::Write;

use opsel::Result;

use crate::run::{jain, run, RunResult};
use crate::scenario::{Scenario, DEFAULT_DELAY_MS};

fn single_flow(rate_mbps: f64, mtu: usize, cca: &str, seconds: f64) -> Result<Scenario> {
    Scenario::from_toml(&format!(
        r#"
name = "bench-{cca}-{rate_mbps}-{mtu}"
duration_s = {seconds}
measure_from_s = {from}
[topology]
pairs = 1
mtu = {mtu}
[pipe]
rate_mbps = {rate_mbps}
delay_ms = {DEFAULT_DELAY_MS}
buffer_bdp = 1.5
[[flows]]
name = "{cca}"
cca = "{cca}"
"#,
        from = (seconds / 4.0).min(5.0),
    ))
}

/// Achieved goodput of one CUBIC and one BBR flow at 65 ms RTT for each
/// bottleneck rate and MTU; returns a markdown table.
pub fn bench(
    rates: &[f64],
    mtus: &[usize],
    seconds: f64,
    log: &mut dyn FnMut(String),
) -> Result<String> {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| MTU | CCA | pipe rate (Mbit/s) | goodput (Mbit/s) | utilisation | mean RTT (ms) | queue drops | ring drops |\n|---|---|---|---|---|---|---|---|"
    );
    let mut best: Vec<(usize, &str, f64)> = Vec::new();
    for &mtu in mtus {
        for cca in ["cubic", "bbr"] {
            let mut top: f64 = 0.0;
            for &r in rates {
                let scn = single_flow(r, mtu, cca, seconds)?;
                let res = run(&scn, &mut |_, _| {})?;
                let s = &res.summary;
                let g = s.flows[0].mean_mbps;
                top = top.max(g);
                let line = format!(
                    "| {mtu} | {cca} | {r} | {g:.1} | {:.0}% | {:.1} | {} | {} |",
                    100.0 * g / r,
                    s.rtt_mean_ms.unwrap_or(f64::NAN),
                    s.fwd_final.drop_queue_pkts,
                    s.fwd_final.drop_ring_pkts
                );
                log(line.clone());
                let _ = writeln!(md, "{line}");
            }
            best.push((mtu, cca, top));
        }
    }
    let _ = writeln!(
        md,
        "\nHighest goodput sustained (65 ms RTT, buffer 1.5 × BDP of the pipe rate):\n"
    );
    for (mtu, cca, g) in best {
        let _ = writeln!(md, "- MTU {mtu}, {cca}: {g:.1} Mbit/s");
    }
    Ok(md)
}

/// The Table 6.3 scenario: a static background on pair 0 from t = 0, a
/// foreground on pair 1 from t = 10 s (000 §2.2: the FG starts after the BG),
/// measured from t = 20 s to the end. Default pipe: 100 Mbit/s, 65 ms, 1.5 BDP.
pub fn table63_scenario(bg: &str, fg: &str, seconds: f64, buffer_bdp: f64) -> Result<Scenario> {
    Scenario::from_toml(&format!(
        r#"
name = "table63-bg-{bg}-fg-{fg}"
duration_s = {seconds}
measure_from_s = 20.0
[topology]
pairs = 2
[pipe]
buffer_bdp = {buffer_bdp}
[[flows]]
name = "bg"
pair = 0
cca = "{bg}"
[[flows]]
name = "fg"
pair = 1
cca = "{fg}"
start_s = 10.0
"#
    ))
}

/// Runs the four fixed-strategy cells `runs` times; returns a markdown table
/// with the thesis values beside ours.
/// `buffer_bdp` is the drop-tail buffer in BDPs (1.5 in the thesis).
pub fn table63(
    seconds: f64,
    runs: usize,
    buffer_bdp: f64,
    log: &mut dyn FnMut(String),
) -> Result<String> {
    // 000 Table 6.3 (500 Mbit/s): BG, FG Mbit/s and Jain.
    let thesis = [
        ("cubic", "cubic", 265.0, 254.0, 0.99),
        ("cubic", "bbr", 62.0, 474.0, 0.62),
        ("bbr", "cubic", 465.0, 49.0, 0.60),
        ("bbr", "bbr", 280.0, 258.0, 0.97),
    ];
    let mut md = String::new();
    let _ = writeln!(
        md,
        "100 Mbit/s, RTT 65 ms, buffer {buffer_bdp} × BDP; BG from 0 s, FG from 10 s, means over [20, {seconds}] s.\n"
    );
    let _ = writeln!(
        md,
        "| BG | FG strategy | run | BG (Mbit/s) | FG (Mbit/s) | Jain | mean RTT (ms) | queue mean (KB) | thesis BG, FG (Mbit/s) | thesis Jain |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for (bg, fg, tb, tf, tj) in thesis {
        let mut js = Vec::new();
        for k in 0..runs.max(1) {
            let res: RunResult = run(
                &table63_scenario(bg, fg, seconds, buffer_bdp)?,
                &mut |_, _| {},
            )?;
            let s = &res.summary;
            let (b, f) = (s.flows[0].mean_mbps, s.flows[1].mean_mbps);
            let j = jain(&[b, f]);
            js.push(j);
            let line = format!(
                "| {bg} | fixed {fg} | {} | {b:.1} | {f:.1} | {j:.3} | {:.1} | {:.0} | {tb}, {tf} | {tj} |",
                k + 1,
                s.rtt_mean_ms.unwrap_or(f64::NAN),
                s.queue_mean_bytes / 1000.0
            );
            log(line.clone());
            let _ = writeln!(md, "{line}");
        }
        if runs > 1 {
            let mut v = js.clone();
            v.sort_by(|a, b| a.total_cmp(b));
            let _ = writeln!(
                md,
                "| {bg} | fixed {fg} | median | | | {:.3} | | | | |",
                v[v.len() / 2]
            );
        }
    }
    Ok(md)
}
