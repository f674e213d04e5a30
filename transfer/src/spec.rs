//! "One spec, one schema": [`SendSpec`] and [`RecvSpec`] are what the C,
//! Python and Node bindings hand over (JSON or a dict), validated here with
//! the defaults inside, and [`send_file`] / [`recv_file`] run one transfer
//! with a fixed CCA. OPS and DPS need a model and a controller: the CLI
//! drives them through [`crate::send::send_on`] with its own [`crate::Drive`].

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use opsel::probe::CcaName;
use opsel::sys::linux::ops_driver::DriverEvent;
use opsel::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::ops::{OpsDrive, OpsLog, OpsSpec};
use crate::proto::{HashAlgo, Key};
use crate::recv::{Limits, Receiver, RecvOpts, RecvReport, Target};
use crate::send::{send_on, Drive, FixedCca, SendOpts, SendReport};

/// How to send one file. Every field may be left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SendSpec {
    /// The CCA for the whole transfer (default "cubic").
    pub cca: Option<String>,
    /// "xxh3" or "blake3" (default: xxh3, keyed BLAKE3 with a key).
    pub hash: Option<String>,
    /// First byte to send (default 0).
    pub offset: Option<u64>,
    /// Start where the receiver's verified prefix ends (excludes `offset`).
    pub resume: bool,
    /// The file name the receiver is asked to use (serve mode).
    pub name: Option<String>,
    /// Data connections, 1 to 8 (default 1).
    pub streams: Option<u16>,
    /// Stop after this many seconds; the receiver keeps a verified prefix.
    pub time_s: Option<f64>,
    /// Seconds per progress interval event (default 1).
    pub interval_s: Option<f64>,
    /// Pre-shared key text (at least 16 bytes once surrounding whitespace
    /// is removed); both sides prove they hold it.
    pub key: Option<String>,
    /// OPS chooses the CCA on the live connection (excludes `cca`); `{}`
    /// for every default (passive probing, the shipped passive model).
    pub ops: Option<OpsSpec>,
}

/// The drive a send spec asks for.
enum SpecDrive {
    Fixed(FixedCca),
    Ops(Box<OpsDrive>),
}

impl SendSpec {
    /// A spec from JSON text (`""` or `null`: every default).
    pub fn from_json(text: &str) -> Result<SendSpec> {
        from_json(text, "send spec")
    }

    /// The options and the CCA, every value checked.
    pub fn to_opts(&self, file: &Path) -> Result<(SendOpts, CcaName)> {
        if self.resume && self.offset.is_some() {
            return Err(Error::invalid(
                "send spec: resume and offset exclude each other (resume lets the receiver choose)",
            ));
        }
        for (what, v) in [("time_s", self.time_s), ("interval_s", self.interval_s)] {
            if v.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
                return Err(Error::invalid(format!(
                    "send spec: {what} must be a positive number of seconds"
                )));
            }
        }
        if let (Some(c), Some(_)) = (&self.cca, &self.ops) {
            return Err(Error::invalid(format!(
                "send spec: cca {c:?} and ops exclude each other (OPS chooses the CCA; set ops.initial_cca for the one it starts with)"
            )));
        }
        let cca = CcaName::new(self.cca.as_deref().unwrap_or("cubic"))?;
        let hash = self
            .hash
            .as_deref()
            .map(HashAlgo::parse)
            .transpose()
            .map_err(|e| Error::invalid(format!("send spec: {e}")))?;
        let opts = SendOpts {
            file: file.to_path_buf(),
            time_s: self.time_s,
            offset: self.offset,
            resume: self.resume,
            name: self.name.clone(),
            key: key(&self.key)?,
            interval_s: self.interval_s.unwrap_or(1.0),
            streams: self.streams.unwrap_or(1),
            hash,
        };
        Ok((opts, cca))
    }

    /// The drive: the fixed CCA, or OPS with its controller built (a bad
    /// `ops` section fails here, before any connection).
    fn drive(&self, cca: CcaName) -> Result<SpecDrive> {
        match &self.ops {
            None => Ok(SpecDrive::Fixed(FixedCca(cca))),
            Some(o) => o
                .resolve()
                .and_then(|o| OpsDrive::new(o, None))
                .map(|d| SpecDrive::Ops(Box::new(d)))
                .map_err(in_ops),
        }
    }
}

/// `e` said of the spec's `ops` section, its kind kept (a missing model
/// file stays an I/O error, a bad one a model error).
fn in_ops(e: Error) -> Error {
    let p = "send spec: ops: ";
    match e {
        Error::InvalidInput(m) => Error::InvalidInput(format!("{p}{m}")),
        Error::InvalidModel(m) => Error::InvalidModel(format!("{p}{m}")),
        Error::Io { context, source } => Error::Io {
            context: format!("{p}{context}"),
            source,
        },
        other => other,
    }
}

/// Run `send` with the spec's drive; with OPS the report gets its `ops`.
fn with_drive(
    drive: SpecDrive,
    on_event: &mut dyn FnMut(&DriverEvent),
    send: impl FnOnce(&mut dyn Drive, &mut dyn FnMut(&DriverEvent)) -> Result<SendReport>,
) -> Result<SendReport> {
    match drive {
        SpecDrive::Fixed(mut f) => send(&mut f, on_event),
        SpecDrive::Ops(mut d) => {
            let mut log = OpsLog::new(d.classes().to_vec());
            let mut r = send(&mut *d, &mut |e| {
                log.event(e);
                on_event(e)
            })?;
            let mut rep = log.into_report();
            rep.auto_model = d.auto_choice().cloned();
            r.ops = Some(rep);
            Ok(r)
        }
    }
}

/// How to receive one file. Every field may be left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecvSpec {
    /// Replace an existing destination (only ever by a verified transfer).
    pub force: bool,
    /// An existing destination may be the verified prefix of a resumed transfer.
    pub append: bool,
    /// Largest file accepted, bytes (default 1 TiB).
    pub max_size: Option<u64>,
    /// Seconds from a connection to an authenticated request (default 10).
    pub handshake_s: Option<f64>,
    /// Longest silence of a running transfer, seconds (default 60).
    pub idle_s: Option<f64>,
    /// Give up when no sender arrives for this long (default: wait).
    pub accept_timeout_s: Option<f64>,
    /// Pre-shared key text: senders must prove they hold it.
    pub key: Option<String>,
}

impl RecvSpec {
    /// A spec from JSON text (`""` or `null`: every default).
    pub fn from_json(text: &str) -> Result<RecvSpec> {
        from_json(text, "receive spec")
    }

    /// The receiver's options for one transfer into `path`.
    pub fn to_opts(&self, path: &Path, listen: std::net::SocketAddr) -> Result<RecvOpts> {
        let d = Limits::default();
        let secs = |what: &str, v: Option<f64>, def: Duration| -> Result<Duration> {
            match v {
                None => Ok(def),
                Some(s) if s.is_finite() && s > 0.0 => Ok(Duration::from_secs_f64(s)),
                Some(_) => Err(Error::invalid(format!(
                    "receive spec: {what} must be a positive number of seconds"
                ))),
            }
        };
        Ok(RecvOpts {
            listen,
            target: Target::File {
                path: path.to_path_buf(),
                append: self.append,
            },
            force: self.force,
            keep_serving: false,
            accept_timeout: self
                .accept_timeout_s
                .map(|s| secs("accept_timeout_s", Some(s), Duration::ZERO))
                .transpose()?,
            limits: Limits {
                max_size: self.max_size.unwrap_or(d.max_size),
                handshake: secs("handshake_s", self.handshake_s, d.handshake)?,
                idle: secs("idle_s", self.idle_s, d.idle)?,
                ..d
            },
            key: key(&self.key)?,
        })
    }
}

fn from_json<T: Default + for<'de> Deserialize<'de>>(text: &str, what: &str) -> Result<T> {
    let t = text.trim();
    if t.is_empty() || t == "null" {
        return Ok(T::default());
    }
    serde_json::from_str(t).map_err(|e| Error::invalid(format!("{what}: {e}")))
}

fn key(k: &Option<String>) -> Result<Option<Key>> {
    k.as_deref()
        .map(|k| Key::from_bytes(k.as_bytes(), "the spec's key").map_err(|e| Error::invalid(e.0)))
        .transpose()
}

/// Send `path` over `ctl`, a TCP connection to a receiver ([`recv_file`],
/// `opsel recv`, `opsel serve`), with the spec's fixed CCA or OPS; returns
/// once the receiver confirmed every byte and its digest. Data connections
/// go to the same address as `ctl`. `on_event` sees every interval, CCA and
/// OPS event. Raising `stop` (from any thread) ends the sending early: the
/// bytes sent are then confirmed as a verified prefix the receiver keeps for
/// a resume, and the report says so (`complete` false, `driver.end`
/// "stopped"); the same holds at `time_s`.
pub fn send_file(
    ctl: TcpStream,
    path: &Path,
    spec: &SendSpec,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(&DriverEvent),
) -> Result<SendReport> {
    let (opts, cca) = spec.to_opts(path)?;
    with_drive(spec.drive(cca)?, on_event, |d, ev| {
        send_on(ctl, &opts, d, stop, ev)
    })
}

/// [`send_file`] from a reader of `size` bytes instead of a file
/// (`send::send_reader_on`: no offset, resume, time limit or striping; the
/// spec's `name` names the file for a serve directory).
pub fn send_reader(
    ctl: TcpStream,
    reader: &mut dyn std::io::Read,
    size: u64,
    spec: &SendSpec,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(&DriverEvent),
) -> Result<SendReport> {
    let (opts, cca) = spec.to_opts(Path::new(""))?;
    with_drive(spec.drive(cca)?, on_event, |d, ev| {
        crate::send::send_reader_on(ctl, reader, size, &opts, d, stop, ev)
    })
}

/// Receive one transfer into `path` on `listener` (bound by the caller; the
/// sender's control and data connections both arrive there); returns after
/// the first verified transfer. Failed attempts in between are dropped and
/// the receiver keeps waiting (until `accept_timeout_s`, if set).
pub fn recv_file(listener: TcpListener, path: &Path, spec: &RecvSpec) -> Result<RecvReport> {
    let local = listener
        .local_addr()
        .map_err(|e| Error::io("listener address", e))?;
    let opts = spec.to_opts(path, local)?;
    Receiver::from_listener(listener, opts)?.serve(Arc::new(|_| {}), Arc::new(|_| {}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_defaults_and_refuse_what_they_do_not_know() {
        assert_eq!(SendSpec::from_json("").unwrap(), SendSpec::default());
        assert_eq!(SendSpec::from_json("null").unwrap(), SendSpec::default());
        let s = SendSpec::from_json(r#"{"cca":"reno","hash":"blake3","streams":2}"#).unwrap();
        let (o, cca) = s.to_opts(Path::new("f")).unwrap();
        assert_eq!(
            (cca, o.hash, o.streams, o.interval_s),
            (
                CcaName::new("reno").unwrap(),
                Some(HashAlgo::Blake3),
                2,
                1.0
            )
        );
        let e = SendSpec::from_json(r#"{"hsah":"xxh3"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("hsah"), "{e}");
        let bad = SendSpec {
            hash: Some("md5".into()),
            ..SendSpec::default()
        };
        assert!(bad
            .to_opts(Path::new("f"))
            .unwrap_err()
            .to_string()
            .contains("md5"));
        let bad = SendSpec {
            resume: true,
            offset: Some(3),
            ..SendSpec::default()
        };
        assert!(bad.to_opts(Path::new("f")).is_err());
        let bad = SendSpec {
            key: Some("short".into()),
            ..SendSpec::default()
        };
        assert!(bad
            .to_opts(Path::new("f"))
            .unwrap_err()
            .to_string()
            .contains("at least 16"));

        // An ops section: every default, or checked fields; not with cca.
        let s = SendSpec::from_json(r#"{"ops":{}}"#).unwrap();
        assert_eq!(s.ops, Some(OpsSpec::default()));
        let (_, cca) = s.to_opts(Path::new("f")).unwrap();
        assert!(matches!(s.drive(cca), Ok(SpecDrive::Ops(_))));
        let s = SendSpec::from_json(r#"{"ops":{"pattern":"S5-C5-S5-B5","steady_s":0}}"#).unwrap();
        let (_, cca) = s.to_opts(Path::new("f")).unwrap();
        assert!(s.drive(cca).is_ok());
        let s = SendSpec::from_json(r#"{"cca":"bbr","ops":{}}"#).unwrap();
        let e = s.to_opts(Path::new("f")).unwrap_err().to_string();
        assert!(e.contains("exclude"), "{e}");
        let e = SendSpec::from_json(r#"{"ops":{"steady":5}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("steady"), "{e}");
        let s = SendSpec::from_json(r#"{"ops":{"model":"/no/such/model.json"}}"#).unwrap();
        let e = match s.drive(CcaName::CUBIC) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a missing model was accepted"),
        };
        assert!(
            e.starts_with("invalid input: send spec: ops: model")
                && e.contains("/no/such/model.json"),
            "{e}"
        );

        let r = RecvSpec::from_json(r#"{"idle_s":2.5,"force":true}"#).unwrap();
        let o = r
            .to_opts(Path::new("out"), "127.0.0.1:1".parse().unwrap())
            .unwrap();
        assert_eq!(o.limits.idle, Duration::from_millis(2500));
        assert_eq!(o.limits.handshake, Limits::default().handshake);
        assert!(o.force && !o.keep_serving && o.accept_timeout.is_none());
        let bad = RecvSpec {
            idle_s: Some(-1.0),
            ..RecvSpec::default()
        };
        assert!(bad
            .to_opts(Path::new("o"), "127.0.0.1:1".parse().unwrap())
            .is_err());
    }
}
