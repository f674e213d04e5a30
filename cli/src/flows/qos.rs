//! `opsel flows qos`: 003's two-queue advice (Ch. 4) for an α prefix set, as
//! tc commands, a script, or installed on a device.
//!
//! The plan, its defaults and its checks are `opsel::flows::qos`; this file
//! reads the α set, maps flags onto `QosSpec` fields and runs `tc`.

use std::path::PathBuf;
use std::process::Command;

use clap::Args;

use opsel::flows::qos::{self, QosSpec, Sharing, TcPlan};
use opsel::flows::study::DaySummary;
use opsel::flows::PrefixId;
use opsel::{Error, Result};

#[derive(Args)]
pub struct QosArgs {
    /// The α set: an `opsel flows report` JSON file, or a prefix file with one
    /// `SRC/len -> DST/len` (or `SRC/len DST/len`) per line. Not needed with --remove.
    input: Option<PathBuf>,
    /// Egress device to configure (e.g. eth1).
    #[arg(long)]
    dev: String,
    /// Network namespace of the device (`ip netns` name).
    #[arg(long)]
    netns: Option<String>,
    /// Install the plan on --dev (replaces its root qdisc). Needs root.
    #[arg(long, conflicts_with = "remove")]
    apply: bool,
    /// Remove the root qdisc of --dev (undoes --apply).
    #[arg(long)]
    remove: bool,
    /// Print the plan as JSON instead of a shell script.
    #[arg(long)]
    json: bool,
    /// A QosSpec JSON file (fields absent take the library defaults).
    #[arg(long)]
    spec: Option<PathBuf>,
    /// Start from a named configuration of 003: default (60/40), exp2 (95/5), testbed (60/40).
    #[arg(long)]
    preset: Option<String>,
    /// Link rate C in Mbit/s.
    #[arg(long)]
    rate_mbps: Option<f64>,
    /// α share of rate and buffer, in (0, 1).
    #[arg(long)]
    alpha_share: Option<f64>,
    /// Strict partition (ceil = rate) instead of work-conserving.
    #[arg(long)]
    strict: bool,
    /// Total buffer in bytes, split by share (default: 100 ms at the link rate).
    #[arg(long)]
    buffer_bytes: Option<u64>,
    /// Also classify dst → src packets of each α prefix ID as α.
    #[arg(long)]
    both_directions: bool,
    /// With a report as input: keep the α prefix IDs seen in the last N days
    /// of the report (the nightly filter with aging A; 003 recommends 30).
    #[arg(long, default_value_t = 30)]
    aging: u32,
}

fn load_ids(a: &QosArgs) -> Result<Vec<PrefixId>> {
    let p = a.input.as_ref().ok_or_else(|| {
        Error::invalid("give the α set: an `opsel flows report` JSON file or a prefix file")
    })?;
    let t =
        std::fs::read_to_string(p).map_err(|e| Error::io(format!("reading {}", p.display()), e))?;
    if t.trim_start().starts_with('{') {
        // Only `days` is needed; the rest of the report is not parsed.
        let bad = |e: String| {
            Error::invalid(format!(
                "{}: not an `opsel flows report` JSON file: {e}",
                p.display()
            ))
        };
        let mut v: serde_json::Value = serde_json::from_str(&t).map_err(|e| bad(e.to_string()))?;
        let days = v
            .get_mut("days")
            .map(serde_json::Value::take)
            .ok_or_else(|| bad("no \"days\" field".into()))?;
        let days: Vec<DaySummary> = serde_json::from_value(days).map_err(|e| bad(e.to_string()))?;
        qos::alpha_set_from_days(&days, a.aging)
    } else {
        qos::parse_prefix_ids(t.lines())
            .map_err(|e| Error::invalid(format!("{}: {e}", p.display())))
    }
}

fn load_spec(a: &QosArgs) -> Result<QosSpec> {
    let mut s = match (&a.spec, &a.preset) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid(
                "give --spec or --preset, not both (flags override either)",
            ))
        }
        (Some(p), None) => {
            let t = std::fs::read_to_string(p)
                .map_err(|e| Error::io(format!("reading spec {}", p.display()), e))?;
            serde_json::from_str::<QosSpec>(&t)
                .map_err(|e| Error::invalid(format!("spec {}: {e}", p.display())))?
        }
        (None, Some(n)) => qos::preset(n)?,
        (None, None) => QosSpec::default(),
    };
    if let Some(r) = a.rate_mbps {
        if !(r.is_finite() && r > 0.0) {
            return Err(Error::invalid(format!(
                "--rate-mbps {r} must be a positive number"
            )));
        }
        s.link_rate_bps = (r * 1e6).round() as u64;
    }
    if let Some(x) = a.alpha_share {
        s.alpha_share = x;
    }
    if a.strict {
        s.sharing = Sharing::Strict;
    }
    if let Some(b) = a.buffer_bytes {
        s.buffer_bytes = b;
    }
    if a.both_directions {
        s.both_directions = true;
    }
    s.validate()?;
    Ok(s)
}

fn tc(args: &[String]) -> Result<()> {
    let out = Command::new("tc")
        .args(args)
        .output()
        .map_err(|e| Error::io("running tc (is iproute2 installed?)", e))?;
    if !out.status.success() {
        return Err(Error::io(
            format!(
                "`tc {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            std::io::Error::other("tc failed"),
        ));
    }
    Ok(())
}

pub fn main(a: QosArgs) -> Result<()> {
    let ns = a.netns.as_deref();
    if a.remove {
        tc(&TcPlan::remove_command(&a.dev, ns)?)?;
        eprintln!("opsel flows qos: removed the root qdisc of {}", a.dev);
        return Ok(());
    }
    let spec = load_spec(&a)?;
    let ids = load_ids(&a)?;
    let plan = qos::plan(&ids, &spec)?;
    for n in &plan.notes {
        eprintln!("opsel flows qos: note: {n}");
    }
    if !a.apply {
        if a.json {
            let t = serde_json::to_string_pretty(&plan)
                .map_err(|e| Error::invalid(format!("serialising the plan: {e}")))?;
            println!("{t}");
        } else {
            print!("{}", plan.script(&a.dev, ns)?);
        }
        return Ok(());
    }
    let cmds = plan.commands(&a.dev, ns)?;
    // Replace whatever root qdisc is there; a missing one is not an error.
    let _ = tc(&TcPlan::remove_command(&a.dev, ns)?);
    for c in &cmds {
        if let Err(e) = tc(c) {
            // Leave the device as it was before (default qdisc), not half-configured.
            let _ = tc(&TcPlan::remove_command(&a.dev, ns)?);
            return Err(e);
        }
    }
    let (ra, rb) = spec.rates_bps();
    eprintln!(
        "opsel flows qos: applied on {}{}: α {} bit/s, β {} bit/s, {} filter rule(s)",
        a.dev,
        ns.map(|n| format!(" (netns {n})")).unwrap_or_default(),
        ra,
        rb,
        plan.filters.len()
    );
    Ok(())
}
