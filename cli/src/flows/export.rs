//! `opsel flows export FILE --to ADDR`: send a JSON-lines record file as
//! IPFIX messages, so collectors such as nfdump's `nfcapd` store what opsel
//! collected or synthesised (`nfdump -r` then reads it).
//!
//! The messages come from `opsel::flows::export::encode_ipfix` (templates in
//! the first message and every 32nd, the sampling options record with them).

use std::net::UdpSocket;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use opsel::flows::export::encode_ipfix;
use opsel::flows::FlowRecord;
use opsel::{Error, Result};

/// Records per message: ~45 B each keeps a message under a 1500-B MTU.
const PER_MESSAGE: usize = 24;

#[derive(Args)]
pub struct ExportArgs {
    /// JSON-lines file of flow records (as written by `collect --records` or `synth`).
    file: PathBuf,
    /// Collector address, e.g. 127.0.0.1:9995.
    #[arg(long)]
    to: String,
    /// Observation domain ID of the messages.
    #[arg(long, default_value_t = 1)]
    domain: u32,
    /// Pause between messages in microseconds (collectors drop bursts).
    #[arg(long, default_value_t = 200)]
    pace_us: u64,
}

pub fn main(a: ExportArgs) -> Result<()> {
    let recs: Vec<FlowRecord> = super::read_records(&a.file)?.collect::<Result<_>>()?;
    let Some(first) = recs.first() else {
        return Err(Error::invalid(format!(
            "{}: no records to export",
            a.file.display()
        )));
    };
    let n = first.sampling_interval;
    if let Some(r) = recs.iter().find(|r| r.sampling_interval != n) {
        return Err(Error::invalid(format!(
            "records have sampling intervals {n} and {}: one IPFIX domain has one; export them as separate files with separate --domain values",
            r.sampling_interval
        )));
    }
    let sock = UdpSocket::bind(if a.to.starts_with('[') {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    })
    .map_err(|e| Error::io("binding a UDP socket", e))?;
    sock.connect(&a.to)
        .map_err(|e| Error::io(format!("connecting to {}", a.to), e))?;
    let mut buf = Vec::with_capacity(2048);
    let mut seq = 0u32;
    let mut msgs = 0u64;
    for (i, chunk) in recs.chunks(PER_MESSAGE).enumerate() {
        // Export time: after the chunk's last packet (IPFIX times are absolute).
        let export_s = (chunk.iter().map(|r| r.last_ns).max().unwrap_or(0) / 1_000_000_000 + 1)
            .min(u64::from(u32::MAX)) as u32;
        encode_ipfix(
            chunk,
            export_s,
            a.domain,
            seq,
            i % 32 == 0,
            (n > 1).then_some(n),
            &mut buf,
        )?;
        sock.send(&buf)
            .map_err(|e| Error::io(format!("sending to {}", a.to), e))?;
        seq = seq.wrapping_add(chunk.len() as u32);
        msgs += 1;
        std::thread::sleep(Duration::from_micros(a.pace_us));
    }
    eprintln!(
        "opsel flows export: {} record(s) in {msgs} IPFIX message(s) to {}",
        recs.len(),
        a.to
    );
    Ok(())
}
