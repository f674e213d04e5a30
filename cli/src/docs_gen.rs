//! `opsel completions SHELL` and `opsel man`: shell completions and man
//! pages generated from the clap definitions, so they never drift from the
//! flags (`clap_complete`, `clap_mangen`).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

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
            let mut cmd = cmd.disable_help_subcommand(true);
            cmd.build();
            let n = write_pages(&cmd, &d)?;
            eprintln!("{n} man pages written to {}", d.display());
            Ok(())
        }
        None => {
            let page = page(&cmd)?;
            std::io::stdout()
                .write_all(page.as_bytes())
                .map_err(|e| Error::io("write the man page", e))
        }
    }
}

/// `cmd`'s page and its subcommands' (as `clap_mangen::generate_to`, with
/// [`ascii_roff`] applied); returns how many were written.
fn write_pages(cmd: &Command, dir: &Path) -> Result<usize> {
    let mut n = 0;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        n += write_pages(sub, dir)?;
    }
    let name = clap_mangen::Man::new(cmd.clone()).get_filename();
    let p = dir.join(name);
    std::fs::write(&p, page(cmd)?).map_err(|e| Error::io(format!("write {}", p.display()), e))?;
    Ok(n + 1)
}

fn page(cmd: &Command) -> Result<String> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut buf)
        .map_err(|e| Error::io("render the man page", e))?;
    Ok(ascii_roff(&String::from_utf8_lossy(&buf)))
}

/// Non-ASCII characters as groff's `\[uXXXX]` escapes. The help texts cite
/// sections (§) and use arrows and minus signs; troff reads its input as
/// Latin-1 unless run through preconv, so raw UTF-8 renders as garbage
/// (`groff -man` warns "invalid input character"). The escapes render in
/// groff and mandoc alike.
pub fn ascii_roff(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let _ = write!(out, "\\[u{:04X}]", c as u32);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn non_ascii_becomes_groff_escapes() {
        assert_eq!(
            super::ascii_roff("000 §3.2 → x"),
            "000 \\[u00A7]3.2 \\[u2192] x"
        );
    }
}
