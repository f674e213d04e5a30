//! A host-local transport for the fairness manager (002 §4.6: one manager
//! per sender host, coordinating every DPS flow on it, also across
//! processes). The sans-IO [`Manager`] runs in a small service behind a Unix
//! stream socket (a path, or a Linux abstract name that needs no file
//! system); each connection is one flow. Messages are JSON lines: the client
//! sends [`ClientMessage`]s, the service answers with [`Command`]s.
//!
//! Threads: one accepting, one per connection, one evaluating fairness every
//! `evaluate_every` (the fairness sampling interval, unspecified in 002).

use super::manager::{FairnessSpec, Manager};
use super::messages::{Command, FlowId, FlowReport};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Flow → service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientMessage {
    /// First message of a connection: the flow's id, unique on the host.
    Register { flow: FlowId },
    /// A lock/learnt report (002 Fig 4.4).
    Report { report: FlowReport },
    /// The flow's latest sending rate (002 §4.6: measured at the sender).
    Rate { sending_rate_mbps: f64 },
}

struct Shared {
    manager: Manager,
    writers: HashMap<FlowId, UnixStream>,
}

impl Shared {
    /// Deliver every queued command to its flow. A write to a flow that has
    /// gone is ignored: its reader thread deregisters it.
    fn flush(&mut self) {
        while let Some((flow, cmd)) = self.manager.poll() {
            if let (Some(w), Ok(mut line)) =
                (self.writers.get_mut(&flow), serde_json::to_string(&cmd))
            {
                line.push('\n');
                let _ = w.write_all(line.as_bytes());
            }
        }
    }
}

/// The fairness manager served on a Unix socket. Dropping it stops the
/// service.
pub struct ManagerService {
    stop: Arc<AtomicBool>,
    shared: Arc<Mutex<Shared>>,
    threads: Vec<JoinHandle<()>>,
}

impl ManagerService {
    /// Serve on a Linux abstract socket name (no file; gone with the
    /// process).
    pub fn bind_abstract(name: &str, spec: FairnessSpec, evaluate_every: Duration) -> Result<Self> {
        use std::os::linux::net::SocketAddrExt;
        let addr = SocketAddr::from_abstract_name(name.as_bytes())
            .map_err(|e| Error::io(format!("abstract socket name {name:?}"), e))?;
        let l = UnixListener::bind_addr(&addr).map_err(|e| {
            Error::io(
                format!("binding the fairness manager to abstract socket {name:?}"),
                e,
            )
        })?;
        Self::serve(l, spec, evaluate_every)
    }

    /// Serve on a socket file at `path` (which must not exist).
    pub fn bind_path(path: &Path, spec: FairnessSpec, evaluate_every: Duration) -> Result<Self> {
        let l = UnixListener::bind(path).map_err(|e| {
            Error::io(
                format!("binding the fairness manager to {}", path.display()),
                e,
            )
        })?;
        Self::serve(l, spec, evaluate_every)
    }

    /// Serve on a socket file at `path`, replacing a stale one: a socket
    /// file nobody listens on (left by a manager that was killed) is
    /// removed; a live manager at `path` is an error, as is a path that is
    /// not a socket.
    pub fn bind_path_replacing_stale(
        path: &Path,
        spec: FairnessSpec,
        evaluate_every: Duration,
    ) -> Result<Self> {
        use std::os::unix::fs::FileTypeExt;
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(Error::invalid(format!(
                    "{} exists and is not a socket; choose another --socket path",
                    path.display()
                )));
            }
            match UnixStream::connect(path) {
                Ok(_) => {
                    return Err(Error::invalid(format!(
                        "a fairness manager already serves {}; flows join it with `opsel send --dps SPEC --fair {}` (one manager per host, 002 §4.6)",
                        path.display(),
                        path.display()
                    )))
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(path).map_err(|e| {
                        Error::io(
                            format!("removing the stale fairness manager socket {}", path.display()),
                            e,
                        )
                    })?;
                }
                Err(e) => {
                    return Err(Error::io(
                        format!("checking the existing socket {}", path.display()),
                        e,
                    ))
                }
            }
        }
        Self::bind_path(path, spec, evaluate_every)
    }

    fn serve(listener: UnixListener, spec: FairnessSpec, evaluate_every: Duration) -> Result<Self> {
        if evaluate_every.is_zero() {
            return Err(Error::invalid(
                "fairness evaluation interval must be > 0 (e.g. 1 s, one fairness sample per second)",
            ));
        }
        let shared = Arc::new(Mutex::new(Shared {
            manager: Manager::new(spec)?,
            writers: HashMap::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("making the fairness manager socket non-blocking", e))?;
        let mut threads = Vec::new();
        {
            let (shared, stop) = (shared.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let shared = shared.clone();
                            std::thread::spawn(move || serve_flow(stream, shared));
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(5))
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            }));
        }
        {
            let (shared, stop) = (shared.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(evaluate_every);
                    if let Ok(mut s) = shared.lock() {
                        s.manager.evaluate();
                        s.flush();
                    }
                }
            }));
        }
        Ok(Self {
            stop,
            shared,
            threads,
        })
    }

    /// Counters of the manager (unlocks, violations, fairness samples).
    pub fn stats(&self) -> Result<super::ManagerStats> {
        self.shared.lock().map(|s| s.manager.stats()).map_err(|_| {
            Error::invalid("fairness manager state is unusable: a service thread panicked")
        })
    }
}

impl Drop for ManagerService {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // Close every flow's connection so clients see the end.
        if let Ok(mut s) = self.shared.lock() {
            for (_, w) in s.writers.drain() {
                let _ = w.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// One connection: `Register` first, then reports and rates until EOF or a
/// malformed line, which closes the connection and deregisters the flow.
fn serve_flow(stream: UnixStream, shared: Arc<Mutex<Shared>>) {
    let Ok(writer) = stream.try_clone() else {
        return;
    };
    let mut lines = BufReader::new(stream).lines();
    let flow = match lines.next() {
        Some(Ok(l)) => match serde_json::from_str::<ClientMessage>(&l) {
            Ok(ClientMessage::Register { flow }) => flow,
            _ => return,
        },
        _ => return,
    };
    {
        let Ok(mut s) = shared.lock() else { return };
        if s.manager.register(flow).is_err() {
            // Duplicate id: refuse the connection.
            let _ = writer.shutdown(std::net::Shutdown::Both);
            return;
        }
        s.writers.insert(flow, writer);
        s.flush();
    }
    for line in lines {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<ClientMessage>(&line) else {
            break;
        };
        let Ok(mut s) = shared.lock() else { return };
        let ok = match msg {
            ClientMessage::Register { .. } => false,
            ClientMessage::Report { report } => s.manager.handle_report(flow, &report).is_ok(),
            ClientMessage::Rate { sending_rate_mbps } => {
                s.manager.report_rate(flow, sending_rate_mbps).is_ok()
            }
        };
        s.flush();
        if !ok {
            break;
        }
    }
    if let Ok(mut s) = shared.lock() {
        let _ = s.manager.deregister(flow);
        if let Some(w) = s.writers.remove(&flow) {
            let _ = w.shutdown(std::net::Shutdown::Both);
        }
        s.flush();
    }
}

/// A flow's connection to a [`ManagerService`].
pub struct ManagerClient {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    /// A line read in part when a timeout struck; completed by the next
    /// `recv`.
    pending: Vec<u8>,
}

impl std::fmt::Debug for ManagerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagerClient").finish_non_exhaustive()
    }
}

impl ManagerClient {
    /// Connect to the service on an abstract name and register `flow`.
    pub fn connect_abstract(name: &str, flow: FlowId) -> Result<Self> {
        use std::os::linux::net::SocketAddrExt;
        let addr = SocketAddr::from_abstract_name(name.as_bytes())
            .map_err(|e| Error::io(format!("abstract socket name {name:?}"), e))?;
        let s = UnixStream::connect_addr(&addr).map_err(|e| {
            Error::io(
                format!("connecting to the fairness manager at abstract socket {name:?}"),
                e,
            )
        })?;
        Self::register(s, flow)
    }

    /// Connect to the service on a socket file and register `flow`.
    /// An absent socket and a stale one (no manager listening) get errors
    /// that say how to start the manager.
    pub fn connect_path(path: &Path, flow: FlowId) -> Result<Self> {
        let s = UnixStream::connect(path).map_err(|e| {
            let hint = match e.kind() {
                std::io::ErrorKind::NotFound => format!(
                    "no fairness manager socket at {}: start one with `opsel fair serve --socket {}`",
                    path.display(),
                    path.display()
                ),
                std::io::ErrorKind::ConnectionRefused => format!(
                    "{} is a stale fairness manager socket (nobody listens on it): restart `opsel fair serve --socket {}`, which replaces it",
                    path.display(),
                    path.display()
                ),
                _ => format!("connecting to the fairness manager at {}", path.display()),
            };
            Error::io(hint, e)
        })?;
        Self::register(s, flow)
    }

    fn register(stream: UnixStream, flow: FlowId) -> Result<Self> {
        let reader = BufReader::new(
            stream
                .try_clone()
                .map_err(|e| Error::io("duplicating the fairness manager socket", e))?,
        );
        let mut c = Self {
            writer: stream,
            reader,
            pending: Vec::new(),
        };
        c.send(&ClientMessage::Register { flow })?;
        Ok(c)
    }

    /// Send one message.
    pub fn send(&mut self, msg: &ClientMessage) -> Result<()> {
        let mut line = serde_json::to_string(msg).map_err(|e| {
            Error::invalid(format!("fairness message cannot be written as JSON: {e}"))
        })?;
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(|e| Error::io("sending to the fairness manager", e))
    }

    /// Report learnt/locked.
    pub fn report(&mut self, report: FlowReport) -> Result<()> {
        self.send(&ClientMessage::Report { report })
    }

    /// Report the sending rate, Mbps.
    pub fn rate(&mut self, sending_rate_mbps: f64) -> Result<()> {
        self.send(&ClientMessage::Rate { sending_rate_mbps })
    }

    /// The next command if one has arrived, without waiting (a driver calls
    /// this from its sending loop once per sampling interval).
    pub fn try_recv(&mut self) -> Result<Option<Command>> {
        use std::os::fd::AsRawFd;
        if self.reader.buffer().is_empty() {
            let mut pfd = libc::pollfd {
                fd: self.reader.get_ref().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, zero timeout.
            let n = unsafe { libc::poll(&mut pfd, 1, 0) };
            if n <= 0 {
                return Ok(None);
            }
        }
        // Something is readable (a line, its start, or EOF): read it.
        self.recv(Duration::from_millis(1))
    }

    /// The next command, waiting at most `timeout`; `Ok(None)` on timeout.
    /// The service closing the connection is an error.
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<Command>> {
        self.reader
            .get_ref()
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
            .map_err(|e| Error::io("setting the fairness manager read timeout", e))?;
        match self.reader.read_until(b'\n', &mut self.pending) {
            Ok(_) if !self.pending.ends_with(b"\n") => Err(Error::io(
                "the fairness manager closed the connection",
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            )),
            Ok(_) => {
                let line = std::mem::take(&mut self.pending);
                serde_json::from_slice(&line).map(Some).map_err(|e| {
                    Error::invalid(format!(
                        "fairness manager sent an unreadable command {:?}: {e}",
                        String::from_utf8_lossy(&line)
                    ))
                })
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(Error::io("reading from the fairness manager", e)),
        }
    }
}
