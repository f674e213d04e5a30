//! Where a throughput-log plan's transfers are kept: every complete block of
//! [`SEGMENT`] transfers in a gzip file of its own, `transfers-<first
//! seq>.jsonl.gz`, and the transfers after the last block in a plain
//! `transfers.jsonl` that the recorder appends to. A block is written once
//! and never changes again, so a corpus of thousands of transfers stays a
//! few small compressed files in the repository, and appending stays cheap.
//!
//! [`read`] gives the whole log as one text, blocks in order then the tail,
//! exactly as if it were one `transfers.jsonl`; [`roll`] moves full blocks
//! from the tail into segments (a tail of any length, so a log written as
//! one file is split the first time a recorder or [`roll`] runs over it).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use opsel::{Error, Result};

/// Transfers per gzip segment.
pub const SEGMENT: usize = 1000;

/// The plain tail the recorder appends to.
pub const TAIL: &str = "transfers.jsonl";

/// The segment holding transfers `first .. first + SEGMENT`.
pub fn segment_path(dir: &Path, first: u64) -> PathBuf {
    dir.join(format!("transfers-{first:06}.jsonl.gz"))
}

/// The segments in `dir`, in order of their first transfer. A gap (a
/// segment missing between two others, or one that does not start where the
/// previous ended) is an error naming it.
fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("listing {}", dir.display()), e)),
    };
    let mut v = Vec::new();
    for e in rd {
        let e = e.map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        let name = e.file_name();
        let Some(first) = name
            .to_str()
            .and_then(|n| n.strip_prefix("transfers-"))
            .and_then(|n| n.strip_suffix(".jsonl.gz"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        v.push((first, e.path()));
    }
    v.sort();
    for (i, (first, p)) in v.iter().enumerate() {
        if *first != (i * SEGMENT) as u64 {
            return Err(Error::invalid(format!(
                "{} should start at transfer {}: a segment is missing or misnamed",
                p.display(),
                i * SEGMENT
            )));
        }
    }
    Ok(v)
}

fn gunzip(p: &Path) -> Result<String> {
    let f = std::fs::File::open(p).map_err(|e| Error::io(format!("opening {}", p.display()), e))?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(f)
        .read_to_string(&mut text)
        .map_err(|e| Error::io(format!("decompressing {}", p.display()), e))?;
    Ok(text)
}

/// The segments' text (complete lines only) and the tail's, as they are on
/// disk. A segment that does not hold exactly [`SEGMENT`] lines is an error.
pub fn read_parts(dir: &Path) -> Result<(String, String)> {
    let mut done = String::new();
    for (_, p) in segments(dir)? {
        let t = gunzip(&p)?;
        let lines = t
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .count();
        if lines != SEGMENT || !t.ends_with('\n') {
            return Err(Error::invalid(format!(
                "{} holds {lines} complete lines; a segment holds {SEGMENT}",
                p.display()
            )));
        }
        done.push_str(&t);
    }
    let tail = match std::fs::read_to_string(dir.join(TAIL)) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(Error::io(
                format!("reading {}", dir.join(TAIL).display()),
                e,
            ))
        }
    };
    Ok((done, tail))
}

/// The whole log of a plan's folder as one text (segments, then the tail).
pub fn read(dir: &Path) -> Result<String> {
    let (mut done, tail) = read_parts(dir)?;
    done.push_str(&tail);
    Ok(done)
}

/// Moves every full block of [`SEGMENT`] complete lines at the front of the
/// tail into a new segment; returns how many lines moved. Each segment is
/// written to a temporary file, synced and renamed before the shorter tail
/// replaces the old one (also by a rename), so no line is ever lost. A crash
/// between the two renames leaves the block's lines in the segment and still
/// in the tail; the next [`roll`] sees that the tail's first `seq` is already
/// in a segment and drops those lines from it.
pub fn roll(dir: &Path) -> Result<usize> {
    let (done, tail) = read_parts(dir)?;
    let mut have = done.split_inclusive('\n').count();
    let mut rest: &str = &tail;
    let mut moved = 0usize;
    // Lines already in a segment (a crash between the renames): drop them.
    let first_seq = first_seq(rest);
    if let Some(s) = first_seq {
        if (s as usize) < have {
            let dup = have - s as usize;
            rest = skip_lines(rest, dup);
        }
    }
    loop {
        let block_end = nth_line_end(rest, SEGMENT);
        let Some(end) = block_end else { break };
        let path = segment_path(dir, have as u64);
        let tmp = path.with_extension("gz.tmp");
        let f = std::fs::File::create(&tmp)
            .map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
        let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::best());
        gz.write_all(&rest.as_bytes()[..end])
            .map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
        let f = gz
            .finish()
            .map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
        f.sync_all()
            .map_err(|e| Error::io(format!("syncing {}", tmp.display()), e))?;
        std::fs::rename(&tmp, &path)
            .map_err(|e| Error::io(format!("renaming {}", tmp.display()), e))?;
        rest = &rest[end..];
        have += SEGMENT;
        moved += SEGMENT;
    }
    if rest.len() != tail.len() {
        let p = dir.join(TAIL);
        let tmp = dir.join(format!("{TAIL}.tmp"));
        std::fs::write(&tmp, rest)
            .map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(|e| Error::io(format!("syncing {}", tmp.display()), e))?;
        std::fs::rename(&tmp, &p)
            .map_err(|e| Error::io(format!("renaming {}", tmp.display()), e))?;
    }
    Ok(moved)
}

/// The `seq` of the first line of `text`, if it has one.
fn first_seq(text: &str) -> Option<u64> {
    let line = text.lines().next()?;
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    v["seq"].as_u64()
}

/// `text` without its first `n` lines.
fn skip_lines(text: &str, n: usize) -> &str {
    match nth_line_end(text, n) {
        Some(end) => &text[end..],
        None => "",
    }
}

/// The byte offset just past the `n`-th complete line of `text`.
fn nth_line_end(text: &str, n: usize) -> Option<usize> {
    if n == 0 {
        return Some(0);
    }
    text.match_indices('\n').nth(n - 1).map(|(i, _)| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64) -> String {
        format!(
            "{{\"seq\":{seq},\"x\":\"{}\"}}\n",
            "a".repeat((seq % 7) as usize)
        )
    }

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("opsel-tput-store-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_long_tail_is_split_into_segments_and_reads_back_the_same() {
        let d = tmpdir("split");
        let all: String = (0..2 * SEGMENT as u64 + 17).map(line).collect();
        // A torn last line stays in the tail, untouched.
        std::fs::write(d.join(TAIL), format!("{all}{{\"seq\":20")).unwrap();
        assert_eq!(roll(&d).unwrap(), 2 * SEGMENT);
        assert!(segment_path(&d, 0).exists() && segment_path(&d, SEGMENT as u64).exists());
        let tail = std::fs::read_to_string(d.join(TAIL)).unwrap();
        assert_eq!(tail.lines().count(), 18);
        assert_eq!(read(&d).unwrap(), format!("{all}{{\"seq\":20"));
        // Nothing more to move.
        assert_eq!(roll(&d).unwrap(), 0);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn lines_left_in_the_tail_by_a_crash_between_the_renames_are_dropped() {
        let d = tmpdir("crash");
        let all: String = (0..SEGMENT as u64 + 3).map(line).collect();
        std::fs::write(d.join(TAIL), &all).unwrap();
        roll(&d).unwrap();
        // As if the tail's rename had not happened: the whole text again.
        std::fs::write(d.join(TAIL), &all).unwrap();
        assert_eq!(roll(&d).unwrap(), 0);
        assert_eq!(read(&d).unwrap(), all);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_missing_or_short_segment_is_an_error_naming_it() {
        let d = tmpdir("gap");
        let all: String = (0..2 * SEGMENT as u64).map(line).collect();
        std::fs::write(d.join(TAIL), &all).unwrap();
        roll(&d).unwrap();
        std::fs::remove_file(segment_path(&d, 0)).unwrap();
        let e = read(&d).unwrap_err().to_string();
        assert!(
            e.contains("transfers-001000.jsonl.gz") && e.contains("missing"),
            "{e}"
        );
        // A segment of the wrong length.
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(segment_path(&d, 0)).unwrap(),
            flate2::Compression::fast(),
        );
        gz.write_all(line(0).as_bytes()).unwrap();
        gz.finish().unwrap();
        let e = read(&d).unwrap_err().to_string();
        assert!(e.contains("holds 1 complete lines"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
