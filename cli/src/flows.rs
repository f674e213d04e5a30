//! `opsel flows …`: α-flow identification from NetFlow / IPFIX (003 Ch. 3, AFTES).
//!
//! * `opsel flows collect --listen ADDR` receives NetFlow v5 / v9 / IPFIX
//!   datagrams on a UDP socket, decodes them (templates and exporter sampling
//!   applied), writes the records as JSON lines and, at the end, the α report;
//! * `opsel flows report FILE` runs the offline study (α prefix flows per day,
//!   effectiveness per aging value, persistence, hapless β, baselines) over a
//!   JSON-lines record file;
//! * `opsel flows read DIR --out FILE` turns nfdump capture files (nfcapd,
//!   uncompressed or LZ4) into the same JSON-lines records; `report` reads
//!   such a directory directly;
//! * `opsel flows synth --out FILE` writes seeded synthetic multi-day records
//!   shaped after 003's ESnet data (the real data is not public);
//! * `opsel flows qos` turns an α prefix set into 003's two-queue tc
//!   configuration (print, `--apply`, `--remove`; [`qos`]);
//! * `opsel flows export FILE --to ADDR` sends records as IPFIX (e.g. to
//!   nfdump's nfcapd);
//! * `opsel flows lab-qos` / `lab-accuracy` run 003's experiments on netlab;
//!   `lab-cache` measures the decision cache's probing savings there.
//!
//! All settings and their defaults live in `opsel::flows::study::StudySpec`;
//! the flags here only override its fields.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};

use opsel::flows::doors::DataDoors;
use opsel::flows::export::Decoder;
use opsel::flows::study::{analyze, analyze_slice, StudyReport, StudySpec};
use opsel::flows::synth::{Synth, SynthSpec};
use opsel::flows::FlowRecord;
use opsel::{Error, Result};

mod export;
mod lab;
mod lab_cache;
mod qos;

#[derive(Args)]
pub struct FlowsArgs {
    #[command(subcommand)]
    cmd: FlowsCmd,
}

#[derive(Subcommand)]
enum FlowsCmd {
    /// Receive NetFlow v5/v9/IPFIX on a UDP socket; write records and an α report.
    Collect(CollectArgs),
    /// The offline α study over a JSON-lines record file, or over nfdump
    /// capture files (an `nfcapd.*` file or a directory of them).
    Report(ReportArgs),
    /// Read nfdump capture files (an `nfcapd.*` file or a directory of them,
    /// uncompressed or LZ4) into JSON-lines flow records.
    Read(ReadArgs),
    /// Write seeded synthetic multi-day records (JSON lines) shaped after 003's data.
    Synth(SynthArgs),
    /// 003's two-queue QoS advice (htb α/β classes, bfifo leaves, u32 prefix
    /// filters) for an α prefix set: print the tc commands or apply them.
    Qos(qos::QosArgs),
    /// 003 Ch. 4 on netlab (root, scaled): ping, α goodput, Jain and β UDP
    /// loss with one queue vs the two-class plan; resumable, writes a table.
    LabQos(lab::LabQosArgs),
    /// 003 Table 3.2 on netlab (root, softflowd): sampled size estimates of
    /// real transfers and α identification; resumable, writes a table.
    LabAccuracy(lab::LabAccuracyArgs),
    /// The decision cache's probing savings (003 H2) on netlab: repeated
    /// `opsel send --ops` transfers against a background, with and without
    /// `--decision-cache`; resumable, writes a table.
    LabCache(lab_cache::LabCacheArgs),
    /// Send a JSON-lines record file as IPFIX to a collector (e.g. nfdump's nfcapd).
    Export(export::ExportArgs),
}

#[derive(Args)]
struct ReadArgs {
    /// nfcapd files or directories (searched recursively for `nfcapd.*`,
    /// leaving out the file nfcapd is still writing, `nfcapd.current.*`).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// JSON-lines output (the format `report` and the bindings read).
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args)]
struct SynthArgs {
    /// Output file (JSON lines).
    #[arg(long)]
    out: PathBuf,
    /// A SynthSpec JSON file (fields absent take the library defaults).
    #[arg(long)]
    spec: Option<PathBuf>,
    /// Override the seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Override the number of days.
    #[arg(long)]
    days: Option<u32>,
}

#[derive(Args, Clone)]
struct SpecOpts {
    /// A StudySpec JSON file (fields absent take the library defaults).
    #[arg(long)]
    spec: Option<PathBuf>,
    /// Override the IPv4 prefix length of α prefix IDs (003: 24 or 32).
    #[arg(long)]
    prefix_len: Option<u8>,
    /// Override every record's sampling interval N (e.g. 1000 for ESnet-like files).
    #[arg(long)]
    sampling: Option<u32>,
    /// Override H, the α-report threshold on corrected bytes.
    #[arg(long)]
    h_bytes: Option<u64>,
    /// Aging values to evaluate, comma-separated (e.g. 7,14,30,214).
    #[arg(long, value_delimiter = ',')]
    aging: Option<Vec<u32>>,
    /// Data-door addresses or prefixes, one per line ('#' comments), for the
    /// per-day data-door ratios (003 §3.6.3).
    #[arg(long)]
    doors: Option<PathBuf>,
}

impl SpecOpts {
    fn load(&self) -> Result<StudySpec> {
        let mut s = match &self.spec {
            Some(p) => {
                let t = std::fs::read_to_string(p)
                    .map_err(|e| Error::io(format!("reading spec {}", p.display()), e))?;
                serde_json::from_str::<StudySpec>(&t)
                    .map_err(|e| Error::invalid(format!("spec {}: {e}", p.display())))?
            }
            None => StudySpec::default(),
        };
        if let Some(l) = self.prefix_len {
            s.alpha.prefix_len_v4 = l;
        }
        if self.sampling.is_some() {
            s.alpha.sampling_interval_override = self.sampling;
        }
        if let Some(h) = self.h_bytes {
            s.alpha.h_bytes = h;
        }
        if let Some(a) = &self.aging {
            s.aging_days = a.clone();
        }
        if let Some(p) = &self.doors {
            let t = std::fs::read_to_string(p)
                .map_err(|e| Error::io(format!("reading data doors {}", p.display()), e))?;
            s.data_doors = DataDoors::parse(t.lines())?;
        }
        s.validate()?;
        Ok(s)
    }
}

#[derive(Args)]
struct CollectArgs {
    /// UDP address to listen on, e.g. 127.0.0.1:2055.
    #[arg(long)]
    listen: String,
    /// Stop after this many seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Stop after this many datagrams.
    #[arg(long)]
    count: Option<u64>,
    /// Write decoded records here, one JSON object per line.
    #[arg(long)]
    records: Option<PathBuf>,
    /// Write the α report (JSON) here instead of stdout.
    #[arg(long)]
    report: Option<PathBuf>,
    #[command(flatten)]
    spec: SpecOpts,
}

#[derive(Args)]
struct ReportArgs {
    /// JSON-lines file of flow records (as written by `collect --records`),
    /// or nfdump capture files: an `nfcapd.*` file or a directory of them.
    file: PathBuf,
    /// Write the report here instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    spec: SpecOpts,
}

pub fn main(a: FlowsArgs) -> Result<()> {
    match a.cmd {
        FlowsCmd::Collect(c) => collect(c),
        FlowsCmd::Report(r) => report(r),
        FlowsCmd::Read(r) => read_nfcapd(r),
        FlowsCmd::Synth(s) => synth(s),
        FlowsCmd::Qos(q) => qos::main(q),
        FlowsCmd::LabQos(l) => lab::lab_qos(l),
        FlowsCmd::LabAccuracy(l) => lab::lab_accuracy(l),
        FlowsCmd::LabCache(l) => lab_cache::lab_cache(l),
        FlowsCmd::Export(e) => export::main(e),
    }
}

fn create(p: &Path) -> Result<BufWriter<File>> {
    File::create(p)
        .map(BufWriter::new)
        .map_err(|e| Error::io(format!("creating {}", p.display()), e))
}

fn write_report(rep: &StudyReport, out: Option<&Path>) -> Result<()> {
    let text = serde_json::to_string_pretty(rep)
        .map_err(|e| Error::invalid(format!("serialising the report: {e}")))?;
    match out {
        Some(p) => std::fs::write(p, text + "\n")
            .map_err(|e| Error::io(format!("writing {}", p.display()), e)),
        None => {
            println!("{text}");
            Ok(())
        }
    }
}

fn summary(rep: &StudyReport) {
    eprintln!(
        "opsel flows: {} records, {} day(s), {} α prefix flow(s), {} unique α prefix ID(s)",
        rep.records,
        rep.days.len(),
        rep.days.iter().map(|d| d.prefix_flows.len()).sum::<usize>(),
        rep.persistence.unique_ids
    );
    for ev in &rep.aging {
        eprintln!(
            "  aging {:>3} d: effectiveness {:.3}, max filter {} rule(s)",
            ev.aging_days, ev.effectiveness, ev.max_filter_rules
        );
    }
    let (ft, wnp, left) = rep.hapless_packet_shares;
    eprintln!(
        "  hapless β packets: FT {:.4}, WNP {:.4}, Leftover {:.4}",
        ft, wnp, left
    );
}

fn collect(a: CollectArgs) -> Result<()> {
    let spec = a.spec.load()?;
    if let Some(d) = a.duration {
        if !(d.is_finite() && d > 0.0) {
            return Err(Error::invalid(format!(
                "--duration {d} must be a positive number of seconds"
            )));
        }
    }
    let sock = UdpSocket::bind(&a.listen)
        .map_err(|e| Error::io(format!("binding UDP {}", a.listen), e))?;
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| Error::io("setting the socket read timeout", e))?;
    let local = sock
        .local_addr()
        .map_err(|e| Error::io("reading the bound address", e))?;
    eprintln!("opsel flows: listening on udp {local}");
    let mut out = a.records.as_deref().map(create).transpose()?;
    let mut dec = Decoder::new();
    // With a records file the report streams over it afterwards (two passes);
    // without one the records are kept in memory for the report.
    let mut recs: Vec<FlowRecord> = Vec::new();
    let keep = out.is_none();
    let mut n_recs = 0u64;
    let mut buf = vec![0u8; 65_535];
    let (mut datagrams, mut bad) = (0u64, 0u64);
    let start = Instant::now();
    let deadline = a.duration.map(Duration::from_secs_f64);
    loop {
        if deadline.is_some_and(|d| start.elapsed() >= d) || a.count.is_some_and(|c| datagrams >= c)
        {
            break;
        }
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => return Err(Error::io(format!("receiving on {local}"), e)),
        };
        datagrams += 1;
        let mut line_err: Option<Error> = None;
        let r = dec.decode(from, &buf[..n], |r| {
            n_recs += 1;
            if keep {
                recs.push(*r);
            }
            if let Some(w) = out.as_mut() {
                if let Err(e) = serde_json::to_writer(&mut *w, r)
                    .map_err(std::io::Error::other)
                    .and_then(|()| w.write_all(b"\n"))
                {
                    line_err.get_or_insert(Error::io("writing records", e));
                }
            }
        });
        if let Some(e) = line_err {
            return Err(e);
        }
        match r {
            Ok(s) => {
                if s.sets_without_template > 0 {
                    eprintln!(
                        "opsel flows: {from}: {} data set(s) before their template; skipped",
                        s.sets_without_template
                    );
                }
            }
            Err(e) => {
                bad += 1;
                eprintln!("opsel flows: {from}: {e}");
            }
        }
        if let Some(w) = out.as_mut() {
            w.flush().map_err(|e| Error::io("writing records", e))?;
        }
    }
    eprintln!(
        "opsel flows: {datagrams} datagram(s), {bad} malformed, {} record(s), {} template(s)",
        n_recs,
        dec.template_count()
    );
    drop(out);
    let rep = match &a.records {
        Some(p) => analyze(&spec, || read_records(p))?,
        None => analyze_slice(&spec, &recs)?,
    };
    summary(&rep);
    write_report(&rep, a.report.as_deref())
}

fn read_records(p: &Path) -> Result<impl Iterator<Item = Result<FlowRecord>>> {
    let f = File::open(p).map_err(|e| Error::io(format!("opening {}", p.display()), e))?;
    let name = p.display().to_string();
    Ok(BufReader::new(f)
        .lines()
        .enumerate()
        .filter(|(_, l)| l.as_ref().map_or(true, |l| !l.trim().is_empty()))
        .map(move |(i, l)| {
            let l = l.map_err(|e| Error::io(format!("reading {name}"), e))?;
            serde_json::from_str::<FlowRecord>(&l).map_err(|e| {
                Error::invalid(format!("{name} line {}: not a flow record: {e}", i + 1))
            })
        }))
}

/// The nfcapd files under `p` (itself if a file), in name (= time) order.
fn nfcapd_files(p: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    if !p.is_dir() {
        out.push(p.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
        .map_err(|e| Error::io(format!("listing {}", p.display()), e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for e in entries {
        let name = e.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if e.is_dir() {
            nfcapd_files(&e, out)?;
        } else if name.starts_with("nfcapd.") && !name.starts_with("nfcapd.current") {
            out.push(e);
        }
    }
    Ok(())
}

/// Whether `p` is a directory or a file that starts like an nfdump file.
fn is_nfcapd(p: &Path) -> bool {
    if p.is_dir() {
        return true;
    }
    let mut head = [0u8; 4];
    File::open(p)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok()
        && opsel::flows::nffile::is_nffile(&head)
}

fn read_nfcapd_records(paths: &[PathBuf]) -> Result<Vec<FlowRecord>> {
    let mut files = Vec::new();
    for p in paths {
        nfcapd_files(p, &mut files)?;
    }
    if files.is_empty() {
        return Err(Error::invalid(format!(
            "no nfcapd.* files under {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let mut recs = Vec::new();
    for f in &files {
        recs.extend(opsel::flows::nffile::read_path(f)?);
    }
    Ok(recs)
}

fn read_nfcapd(a: ReadArgs) -> Result<()> {
    let recs = read_nfcapd_records(&a.paths)?;
    let mut w = create(&a.out)?;
    for r in &recs {
        serde_json::to_writer(&mut w, r)
            .map_err(|e| Error::io("writing records", std::io::Error::other(e)))?;
        w.write_all(b"\n")
            .map_err(|e| Error::io("writing records", e))?;
    }
    w.flush().map_err(|e| Error::io("writing records", e))?;
    eprintln!(
        "opsel flows: wrote {} records to {}",
        recs.len(),
        a.out.display()
    );
    Ok(())
}

fn report(a: ReportArgs) -> Result<()> {
    let spec = a.spec.load()?;
    if is_nfcapd(&a.file) {
        let recs = read_nfcapd_records(std::slice::from_ref(&a.file))?;
        let rep = analyze_slice(&spec, &recs)?;
        summary(&rep);
        return write_report(&rep, a.out.as_deref());
    }
    let rep = analyze(&spec, || read_records(&a.file))?;
    summary(&rep);
    write_report(&rep, a.out.as_deref())
}

fn synth(a: SynthArgs) -> Result<()> {
    let mut spec = match &a.spec {
        Some(p) => {
            let t = std::fs::read_to_string(p)
                .map_err(|e| Error::io(format!("reading spec {}", p.display()), e))?;
            serde_json::from_str::<SynthSpec>(&t)
                .map_err(|e| Error::invalid(format!("spec {}: {e}", p.display())))?
        }
        None => SynthSpec::default(),
    };
    if let Some(s) = a.seed {
        spec.seed = s;
    }
    if let Some(d) = a.days {
        spec.days = d;
    }
    let mut w = create(&a.out)?;
    let mut n = 0u64;
    // One day at a time: the period is never in memory.
    for day in Synth::new(spec)? {
        for r in &day {
            serde_json::to_writer(&mut w, r)
                .map_err(|e| Error::io("writing records", std::io::Error::other(e)))?;
            w.write_all(b"\n")
                .map_err(|e| Error::io("writing records", e))?;
            n += 1;
        }
    }
    w.flush().map_err(|e| Error::io("writing records", e))?;
    eprintln!(
        "opsel flows: wrote {n} synthetic records to {}",
        a.out.display()
    );
    Ok(())
}
