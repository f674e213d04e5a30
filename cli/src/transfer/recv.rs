//! `opsel recv`: accept one transfer, write it to a file (or append), confirm
//! every byte with its SHA-256, and answer UDP echoes for the sender's RTT
//! probe meanwhile. See the parent module for the protocol.

use std::fs::OpenOptions;
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use opsel::sys::linux::rtt::UdpEchoResponder;
use opsel::{Error, Result};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{field_str, field_u64, hex, read_msg, sha256_range, write_msg, HELLO, VERSION};

/// What to receive and where.
#[derive(Debug, Clone)]
pub struct RecvOpts {
    pub listen: SocketAddr,
    pub out: PathBuf,
    pub append: bool,
    /// Give up if no sender connects within this time (`None` = wait forever).
    pub accept_timeout: Option<Duration>,
}

/// Outcome of one received transfer.
#[derive(Debug, Clone)]
pub struct RecvReport {
    pub received: u64,
    pub sha256: String,
    pub verified: bool,
    pub file_size: u64,
    pub file_sha256: String,
    pub elapsed: Duration,
}

/// A bound receiver (TCP listener + UDP echo responder on the same port).
pub struct Receiver {
    opts: RecvOpts,
    listener: TcpListener,
    echo: Option<UdpEchoResponder>,
}

fn accept(l: &TcpListener, timeout: Option<Duration>, what: &str) -> Result<TcpStream> {
    let start = Instant::now();
    l.set_nonblocking(true)
        .map_err(|e| Error::io("set listener non-blocking", e))?;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)
                    .map_err(|e| Error::io("set connection blocking", e))?;
                return Ok(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if timeout.is_some_and(|t| start.elapsed() > t) {
                    return Err(Error::io(
                        format!("waiting for the {what} connection"),
                        std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!(
                                "no sender connected within {:?}",
                                timeout.unwrap_or_default()
                            ),
                        ),
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(Error::io(format!("accept the {what} connection"), e)),
        }
    }
}

impl Receiver {
    /// Bind the listener and start the echo responder.
    pub fn bind(opts: RecvOpts) -> Result<Receiver> {
        let listener = TcpListener::bind(opts.listen).map_err(|e| {
            Error::io(
                format!("listen on {} (is another opsel recv running?)", opts.listen),
                e,
            )
        })?;
        let local = listener
            .local_addr()
            .map_err(|e| Error::io("listener address", e))?;
        // 000 §3.2: the RTT probe targets the peer; a UDP echo needs no privilege.
        let udp = UdpSocket::bind(local)
            .map_err(|e| Error::io(format!("bind the UDP echo responder on {local}"), e))?;
        let echo = UdpEchoResponder::spawn(udp, Duration::ZERO)?;
        Ok(Receiver {
            opts,
            listener,
            echo: Some(echo),
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| Error::io("listener address", e))
    }

    /// Receive one transfer; `on_bytes(n)` is called for every chunk written.
    pub fn serve(mut self, on_bytes: &mut dyn FnMut(u64)) -> Result<RecvReport> {
        let r = self.serve_inner(on_bytes);
        if let Some(e) = self.echo.take() {
            let _ = e.stop();
        }
        r
    }

    fn serve_inner(&mut self, on_bytes: &mut dyn FnMut(u64)) -> Result<RecvReport> {
        let ctl = accept(&self.listener, self.opts.accept_timeout, "control")?;
        let start = Instant::now();
        let mut ctl_w = ctl
            .try_clone()
            .map_err(|e| Error::io("clone control socket", e))?;
        let mut ctl_r = BufReader::new(ctl);
        let hello = read_msg(&mut ctl_r)?;
        let refuse = |w: &mut TcpStream, msg: String| -> Error {
            let _ = write_msg(w, &json!({"ok": false, "error": msg}));
            Error::invalid(msg)
        };
        if hello.get("hello").and_then(|v| v.as_str()) != Some(HELLO)
            || hello.get("version").and_then(|v| v.as_u64()) != Some(VERSION)
        {
            return Err(refuse(
                &mut ctl_w,
                format!("not an opsel-transfer version {VERSION} hello: {hello}"),
            ));
        }
        let offset = field_u64(&hello, "offset")?;
        let out = &self.opts.out;
        let existing = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
        if self.opts.append && existing != offset {
            return Err(refuse(
                &mut ctl_w,
                format!(
                    "{} holds {existing} bytes but the sender starts at offset {offset}; resume with `opsel send --offset {existing}`",
                    out.display()
                ),
            ));
        }
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .append(self.opts.append)
            .truncate(!self.opts.append)
            .open(out)
            .map_err(|e| Error::io(format!("open output {}", out.display()), e));
        let file = match file {
            Ok(f) => f,
            Err(e) => return Err(refuse(&mut ctl_w, e.to_string())),
        };
        let token = {
            let t = opsel::sys::linux::clock::realtime_ns() ^ (u64::from(std::process::id()) << 32);
            t | 1
        };
        write_msg(
            &mut ctl_w,
            &json!({"ok": true, "token": token, "out_size": existing}),
        )?;

        // The one data connection of the transfer.
        let mut data = accept(&self.listener, Some(Duration::from_secs(30)), "data")?;
        let mut tok = [0u8; 8];
        data.read_exact(&mut tok)
            .map_err(|e| Error::io("read the data connection's token", e))?;
        if u64::from_be_bytes(tok) != token {
            return Err(Error::invalid(
                "the data connection presented a wrong token (another sender?); retry the transfer",
            ));
        }
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 18];
        let mut received = 0u64;
        loop {
            let n = match data.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = w.flush();
                    return Err(Error::io(
                        format!(
                            "data connection failed after {received} bytes; resume with `opsel send --offset {}` and `opsel recv --append`",
                            if self.opts.append { offset } else { 0 } + received
                        ),
                        e,
                    ));
                }
            };
            w.write_all(&buf[..n])
                .map_err(|e| Error::io(format!("write {}", out.display()), e))?;
            h.update(&buf[..n]);
            received += n as u64;
            on_bytes(n as u64);
        }
        let file = w
            .into_inner()
            .map_err(|e| Error::io(format!("flush {}", out.display()), e.into_error()))?;
        file.sync_all()
            .map_err(|e| Error::io(format!("fsync {}", out.display()), e))?;
        let sha = hex(&h.finalize());
        let end = read_msg(&mut ctl_r).map_err(|e| {
            Error::invalid(format!(
                "the sender ended without its completion message after {received} bytes ({e}); resume with `opsel send --offset {}` and `opsel recv --append`",
                existing * self.opts.append as u64 + received
            ))
        })?;
        let announced = field_u64(&end, "end")?;
        let their_sha = field_str(&end, "sha256")?;
        let verified = announced == received && their_sha == sha;
        let (file_size, file_sha) = sha256_range(out, 0, None)?;
        write_msg(
            &mut ctl_w,
            &json!({"received": received, "sha256": sha, "ok": verified,
                    "file_size": file_size, "file_sha256": file_sha}),
        )?;
        Ok(RecvReport {
            received,
            sha256: sha,
            verified,
            file_size,
            file_sha256: file_sha,
            elapsed: start.elapsed(),
        })
    }
}
