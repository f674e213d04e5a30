//! `opsel completions SHELL` and `opsel man`: shell completions and man
//! pages generated from the clap definitions, so they never drift from the
//! flags (`clap_complete`, `clap_mangen`).

use std::path::PathBuf;

use clap::{Args, Command};
use clap_complete::Shell;
use opsel::{Error, Result};

#[derive(Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    shell: Shell,
}

#[derive(Args)]
#[command(after_help = "Example: opsel man --dir target/man && man -l target/man/opsel.1")]
pub struct ManArgs {
    /// Write opsel.1 and one page per subcommand (opsel-classify.1, …) into
    /// this folder instead of printing opsel.1 to stdout.
    #[arg(long)]
    dir: Option<PathBuf>,
}

pub fn completions(a: CompletionsArgs, mut cmd: Command) -> Result<()> {
    clap_complete::generate(a.shell, &mut cmd, "opsel", &mut std::io::stdout());
    Ok(())
}

pub fn man(a: ManArgs, cmd: Command) -> Result<()> {
    match a.dir {
        Some(d) => {
            std::fs::create_dir_all(&d)
                .map_err(|e| Error::io(format!("create {}", d.display()), e))?;
            clap_mangen::generate_to(cmd, &d)
                .map_err(|e| Error::io(format!("write man pages into {}", d.display()), e))?;
            eprintln!("man pages written to {}", d.display());
            Ok(())
        }
        None => clap_mangen::Man::new(cmd)
            .render(&mut std::io::stdout())
            .map_err(|e| Error::io("write the man page", e)),
    }
}
