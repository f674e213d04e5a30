//! The demo report as one self-contained HTML page: inline CSS and SVG, no
//! script, no external font, image or stylesheet, so it opens offline and
//! can be attached to an issue as it is.
//!
//! Sections: the 000 Table 6.3 summary (background / foreground Mbit/s,
//! Jain's index, FG share of the fair share), then per run the throughput
//! of foreground and background over time with the probe phases shaded and
//! the decisions marked, and the RTT series with each classified window
//! shaded in its class's colour and labelled with class and confidence.

use std::fmt::Write as _;

use super::record::{DemoRecord, RunRecord};
use super::svg::{esc, nice_max, Chart};

const FG: &str = "#1f6fc5";
const BG: &str = "#d9480f";
const PROBE: &str = "#f2b807";
/// One colour per class index (000 Table 6.1 has 6 classes).
const CLASS: [&str; 8] = [
    "#4c9a2a", "#7b4fd6", "#c2255c", "#0b8a8a", "#e8590c", "#5c7cfa", "#868e96", "#a61e4d",
];

const CSS: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:1200px;color:#222;background:#fff;padding:0 16px}\
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:4px}\
h3{font-size:15px;margin:14px 0 4px;color:#444}p.setup{color:#444;margin:4px 0 16px;font-size:14px}\
table{border-collapse:collapse;font-size:14px;margin:8px 0}th,td{border:1px solid #ccc;padding:4px 10px;text-align:right}\
th{background:#f3f3f3}td.l,th.l{text-align:left}p.note{font-size:13px;color:#555;margin:4px 0}\
.key{display:inline-block;width:12px;height:12px;vertical-align:middle;margin:0 4px 0 12px}";

/// The whole page for `rec`.
pub fn render(rec: &DemoRecord) -> String {
    let s = &rec.setup;
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>opsel demo report</title><style>{CSS}</style></head><body>"
    );
    let _ = write!(
        h,
        "<h1>opsel demo: OPS against fixed CCAs on the emulated WAN</h1><p class=\"setup\">{} Mbit/s bottleneck, RTT {} ms, drop-tail buffer {} × BDP. OPS: {} probing, steady time Y = {} s, model {} (w = {} samples every {} ms, classes {}).</p>",
        s.rate_mbps,
        s.rtt_ms,
        s.buffer_bdp,
        esc(&s.pattern),
        s.steady_s,
        esc(&s.model),
        s.window,
        s.sample_interval_ms,
        esc(&s.classes.join(", "))
    );
    summary(&mut h, rec);
    for (i, r) in rec.runs.iter().enumerate() {
        run_section(&mut h, rec, i, r);
    }
    h.push_str("</body></html>\n");
    h
}

fn summary(h: &mut String, rec: &DemoRecord) {
    let fair = rec.setup.rate_mbps / 2.0;
    h.push_str("<h2>Summary (000 Table 6.3 layout)</h2>");
    if let Some(r) = rec.runs.first() {
        let _ = write!(
            h,
            "<p class=\"note\">Receiver-counted means over [{}, end] s of each run; the fair share is {} Mbit/s.</p>",
            r.measure_from_s, fair
        );
    }
    h.push_str("<table><tr><th class=\"l\">background</th><th class=\"l\">foreground</th><th>run</th><th>BG Mbit/s</th><th>FG Mbit/s</th><th>Jain</th><th>FG / fair share</th><th class=\"l\">decisions (t s: class → CCA)</th></tr>");
    for r in &rec.runs {
        let tl = r.timeline();
        let dec = tl
            .decisions
            .iter()
            .map(|d| {
                format!(
                    "{:.0}: {} → {}",
                    d.at_s,
                    d.label,
                    d.cca.as_deref().unwrap_or("(failed)")
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.3}</td><td>{:.2}</td><td class=\"l\">{}</td></tr>",
            esc(&r.bg),
            esc(&r.fg),
            r.run,
            r.bg_mbps,
            r.fg_mbps,
            r.jain,
            r.fg_mbps / fair,
            esc(if dec.is_empty() { "–" } else { &dec })
        );
    }
    h.push_str("</table>");
}

/// A line of colour keys: (colour, name).
fn key(h: &mut String, items: &[(&str, &str)]) {
    h.push_str("<p class=\"note\">");
    for (c, n) in items {
        let _ = write!(
            h,
            "<span class=\"key\" style=\"background:{c}\"></span>{}",
            esc(n)
        );
    }
    h.push_str("</p>");
}

fn run_section(h: &mut String, rec: &DemoRecord, i: usize, r: &RunRecord) {
    let tl = r.timeline();
    let _ = write!(
        h,
        "<h2>Run {}: {} against a {} background</h2><p class=\"note\">BG from 0 s, FG from {} s; means over [{}, {}] s: FG {:.1} Mbit/s, BG {:.1} Mbit/s, Jain {:.3}.</p>",
        i + 1,
        esc(&r.fg),
        esc(&r.bg),
        r.fg_start_s,
        r.measure_from_s,
        r.seconds,
        r.fg_mbps,
        r.bg_mbps,
        r.jain
    );
    if let Some(m) = &r.model_used {
        let _ = write!(h, "<p class=\"note\">Model: {}.</p>", esc(&m.describe()));
    }
    // Throughput over time.
    let pts = |v: &[f64]| -> Vec<(f64, f64)> {
        v.iter()
            .enumerate()
            .map(|(k, m)| ((k as f64 + 0.5) * r.bin_s, *m))
            .collect()
    };
    let ymax = nice_max(
        r.fg_series_mbps
            .iter()
            .chain(&r.bg_series_mbps)
            .fold(rec.setup.rate_mbps, |a, b| a.max(*b))
            * 1.05,
    );
    let mut c = Chart::new(1160.0, 300.0, (0.0, r.seconds), (0.0, ymax));
    for &(a, b) in &tl.probes {
        c.span(a, b, PROBE, 0.22, Some("probe"));
    }
    c.marker(r.fg_start_s, "#555", true, Some("FG start"));
    c.marker(r.measure_from_s, "#888", true, None);
    for d in &tl.decisions {
        let label = format!("{} → {}", d.label, d.cca.as_deref().unwrap_or("?"));
        c.marker(d.at_s, "#111", false, Some(&label));
    }
    c.line(&pts(&r.bg_series_mbps), BG, 2.0);
    c.line(&pts(&r.fg_series_mbps), FG, 2.0);
    h.push_str("<h3>Throughput (receiver-counted)</h3>");
    key(
        h,
        &[
            (FG, &format!("foreground ({})", r.fg)),
            (BG, &format!("background ({})", r.bg)),
            (PROBE, "probe phase"),
        ],
    );
    h.push_str(&c.finish("time since the background started (s)", "Mbit/s"));
    let _ = write!(
        h,
        "<p class=\"note\">Dashed: FG start and the start of the measurement window ({} s).{}</p>",
        r.measure_from_s,
        if tl.decisions.is_empty() {
            ""
        } else {
            " Solid black: an OPS decision (class → CCA)."
        }
    );
    // RTT windows and their classes.
    if tl.rtt.is_empty() {
        h.push_str(
            "<p class=\"note\">No RTT samples: this foreground does not probe (fixed CCA).</p>",
        );
        return;
    }
    let (lo, hi) = tl
        .rtt
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(l, u), &(_, v)| {
            (l.min(v), u.max(v))
        });
    let y0 = (lo * 0.95).floor().max(0.0);
    let y1 = y0 + nice_max((hi - y0) * 1.1);
    let mut c = Chart::new(1160.0, 240.0, (0.0, r.seconds), (y0, y1));
    // A probe that ended in no decision (cut off by the run's end) still
    // shows where its window was filling. Probes with a decision get their
    // class colour only: amber beneath would turn it into another colour.
    let undecided: Vec<(f64, f64)> = tl
        .probes
        .iter()
        .copied()
        .filter(|&(a, b)| !tl.decisions.iter().any(|d| d.at_s >= a && d.at_s <= b))
        .collect();
    for &(a, b) in &undecided {
        c.span(a, b, PROBE, 0.12, None);
    }
    for d in &tl.decisions {
        let ci = rec.setup.classes.iter().position(|c| *c == d.label);
        let color = ci.map_or("#999", |k| CLASS[k % CLASS.len()]);
        let label = format!("{} ({:.2})", d.label, d.confidence);
        c.span(d.from_s, d.at_s, color, 0.18, Some(&label));
    }
    c.line(&tl.rtt, "#222", 1.5);
    h.push_str(&format!(
        "<h3>RTT samples (every {} ms) and the classified windows</h3>",
        if r.model_used
            .as_ref()
            .is_some_and(|m| m.fallback_after_s.is_some())
        {
            format!("{} ms, then 1000", rec.setup.sample_interval_ms)
        } else {
            rec.setup.sample_interval_ms.to_string()
        }
    ));
    if undecided.is_empty() {
        key(h, &[("#222", "RTT sample")]);
    } else {
        key(
            h,
            &[("#222", "RTT sample"), (PROBE, "probe without a decision")],
        );
    }
    h.push_str(&c.finish("time since the background started (s)", "RTT (ms)"));
    if tl.decisions.is_empty() {
        h.push_str("<p class=\"note\">No window was classified in this run (the first probe had not ended).</p>");
    } else {
        h.push_str("<p class=\"note\">Each window shaded in a class colour is one RTT window the model classified, labelled class (confidence: the 1-NN margin, 1 − d<sub>nearest</sub> / d<sub>other class</sub>).</p>");
        h.push_str("<p class=\"note\">Classes (window shading):");
        for (k, c) in rec.setup.classes.iter().enumerate() {
            let _ = write!(
                h,
                "<span class=\"key\" style=\"background:{}\"></span>{}",
                CLASS[k % CLASS.len()],
                esc(c)
            );
        }
        h.push_str("</p>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> DemoRecord {
        serde_json::from_str(include_str!("../../tests/fixtures/demo-report/record.json")).unwrap()
    }

    #[test]
    fn the_page_is_self_contained() {
        let h = render(&fixture());
        assert!(h.starts_with("<!DOCTYPE html>"));
        assert!(!h.contains("<script"), "no script");
        assert!(!h.contains("<link"), "no external stylesheet");
        assert!(
            !h.contains("@import") && !h.contains("url("),
            "no external font or image"
        );
        assert!(!h.contains("src=\"http") && !h.contains("href=\"http"));
    }

    #[test]
    fn the_summary_and_every_run_are_drawn() {
        let rec = fixture();
        let h = render(&rec);
        assert!(h.contains("Summary (000 Table 6.3 layout)"));
        for r in &rec.runs {
            assert!(h.contains(&format!(
                "<td>{:.1}</td><td>{:.1}</td>",
                r.bg_mbps, r.fg_mbps
            )));
            for d in r.timeline().decisions {
                assert!(h.contains(&esc(&format!(
                    "{} → {}",
                    d.label,
                    d.cca.as_deref().unwrap_or("?")
                ))));
            }
        }
        // Two charts per OPS run, one per fixed run.
        let ops = rec
            .runs
            .iter()
            .filter(|r| !r.timeline().rtt.is_empty())
            .count();
        assert_eq!(h.matches("<svg").count(), rec.runs.len() + ops);
        assert!(h.contains("probe phase"));
    }

    #[test]
    fn a_fixed_cca_run_has_no_rtt_chart_and_no_decisions() {
        let mut rec = fixture();
        rec.runs.truncate(1);
        rec.runs[0].fg = "fixed cubic".into();
        rec.runs[0].events.retain(|e| e["kind"] == "cca_set");
        let h = render(&rec);
        assert_eq!(h.matches("<svg").count(), 1);
        assert!(h.contains("No RTT samples: this foreground does not probe"));
        assert!(h.contains("<td class=\"l\">–</td>"), "no decisions: a dash");
    }
}
