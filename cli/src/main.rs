//! `opsel`: the command-line tool. One module per subcommand group; `lab`
//! drives the emulated WAN (crate opsel-netlab). `models` finds model files
//! outside a checkout; `docs_gen` turns these clap definitions into shell
//! completions and man pages.

use clap::{CommandFactory, Parser, Subcommand};

mod bwe;
mod calibrate;
mod classify;
mod collect;
mod docs_gen;
mod dps_send;
mod fair;
mod flows;
mod lab;
mod models;
mod probe;
mod report;
mod rtt_series;
mod send_probe_lab;
mod tput_logs;
mod transfer;

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
    /// Live available-bandwidth probing (p-streams, BASS, ML, rate adapter).
    Bwe(bwe::BweArgs),
    /// Send a file with a fixed CCA or with OPS choosing it (000 Ch. 7, iPerfOPS client).
    Send(transfer::args::SendArgs),
    /// Receive one transfer into a file, confirming every byte (iPerfOPS server, one-shot).
    Recv(transfer::args::RecvArgs),
    /// Receive transfer after transfer into a directory (like `iperf3 -s`).
    Serve(transfer::args::ServeArgs),
    /// Classify RTT windows (given, from a CSV/JSON file or stdin, or probed live toward a host):
    /// class, confidence and the CCA OPS would pick; or the accuracy over labelled traces.
    Classify(classify::ClassifyArgs),
    /// The RTT series toward a host as OPS samples it (000 §3.2), as CSV or JSON.
    Probe(probe::ProbeArgs),
    /// Extend a background-mix model with references recorded in netlab at your path's rate and RTT.
    Calibrate(calibrate::CalibrateArgs),
    /// OPS vs fixed CUBIC / BBR on the emulated WAN: 000 Table 6.3 (static) and ALT-X backgrounds.
    Demo(transfer::demo::DemoArgs),
    /// Alpha-flow identification from NetFlow v5/v9/IPFIX (003 AFTES): collect, report.
    Flows(flows::FlowsArgs),
    /// The host's DPS fairness manager (002 §4.6) and live DPS flows on netlab.
    Fair(fair::FairArgs),
    /// Print a shell completion script (bash, zsh, fish, …).
    Completions(docs_gen::CompletionsArgs),
    /// Print the man page, or write one per subcommand with --dir.
    Man(docs_gen::ManArgs),
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Lab(a) => lab::main(a),
        Cmd::Bwe(a) => bwe::main(a),
        Cmd::Send(a) => transfer::args::send_main(a),
        Cmd::Recv(a) => transfer::args::recv_main(a),
        Cmd::Serve(a) => transfer::args::serve_main(a),
        Cmd::Demo(a) => transfer::demo::main(a),
        Cmd::Calibrate(a) => calibrate::main(a),
        Cmd::Classify(a) => classify::main(a),
        Cmd::Flows(a) => flows::main(a),
        Cmd::Fair(a) => fair::main(a),
        Cmd::Probe(a) => probe::main(a),
        Cmd::Completions(a) => docs_gen::completions(a, Cli::command()),
        Cmd::Man(a) => docs_gen::man(a, Cli::command()),
    };
    if let Err(e) = r {
        eprintln!("opsel: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap's own consistency checks (argument ids, `requires` targets,
    /// duplicate flags) over every subcommand, which release builds skip.
    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
