//! One transfer through the library, no CLI: a receiver on a loopback
//! listener in one thread, the sender on a connected socket in another.
//!
//! `cargo run --release -p opsel-transfer --example loopback -- FILE [DEST] [--hash blake3]`
//! (DEST defaults to FILE with the extension `.copy`).

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use opsel_transfer::{recv_file, send_file, RecvSpec, SendSpec};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let src = PathBuf::from(
        args.first()
            .ok_or("usage: loopback FILE [DEST] [--hash blake3]")?,
    );
    let dst = args
        .get(1)
        .filter(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .unwrap_or_else(|| src.with_extension("copy"));
    let hash = args
        .iter()
        .position(|a| a == "--hash")
        .and_then(|i| args.get(i + 1).cloned());

    // The receiver: a listener the caller binds; control and data
    // connections both arrive on it.
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let rx = std::thread::spawn(move || {
        let spec = RecvSpec {
            force: true,
            ..RecvSpec::default()
        };
        recv_file(listener, &dst, &spec)
    });

    // The sender: any connected TCP socket to the receiver.
    let sock = TcpStream::connect(addr)?;
    let spec = SendSpec {
        hash,
        ..SendSpec::default()
    };
    let stop = AtomicBool::new(false);
    let sent = send_file(sock, &src, &spec, &stop, &mut |_event| {})?;
    let got = rx.join().map_err(|_| "the receiver thread panicked")??;
    println!("{}", serde_json::to_string_pretty(&sent)?);
    println!("{}", serde_json::to_string_pretty(&got)?);
    Ok(())
}
