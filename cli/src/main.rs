//! `opsel`: the command-line tool. One module per subcommand group; `lab`
//! drives the emulated WAN (crate opsel-netlab). Other groups (send/recv,
//! probe, classify, bwe, demo) plug in here as further modules.

use clap::{Parser, Subcommand};

mod collect;
mod lab;

#[derive(Parser)]
#[command(
    name = "opsel",
    version,
    about = "Choose TCP congestion control from the background traffic mix"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Emulated shared WAN on this machine (namespaces, user-space pipe, traffic generators).
    Lab(lab::LabArgs),
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Lab(a) => lab::main(a),
    };
    if let Err(e) = r {
        eprintln!("opsel: {e}");
        std::process::exit(1);
    }
}
