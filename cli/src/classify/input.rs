//! RTT windows from text: CSV or JSON, a file or stdin.
//!
//! Accepted forms (w = the model's window length):
//!
//! * CSV, one window per line: `v1,v2,…` (commas or blanks);
//! * CSV with a header naming an `rtt_ms` column (`opsel probe` output,
//!   netlab traces): that column is one series;
//! * JSON: `[v, …]` (one series), `[[v, …], …]` (windows), `{"rtt_ms": [v, …]}`,
//!   `{"windows": [[…], …]}`, or `opsel probe --json` (`{"samples": [{"rtt_ms": v}, …]}`).
//!
//! A series is cut into non-overlapping windows of w samples (000 §3.4);
//! samples past the last whole window are reported, not guessed at. Every
//! value must be a finite number: a missing or NaN sample is an error that
//! names where it is, since the classifier's distances would be meaningless.

use opsel::{Error, Result};
use serde_json::Value;

/// Windows read from one input, and what was left over.
#[derive(Debug, Clone, PartialEq)]
pub struct Windows {
    pub windows: Vec<Vec<f64>>,
    /// Samples of a series after its last whole window (not classified).
    pub leftover: usize,
}

/// Parse `text` (named `src` in errors) into windows of `w` samples.
pub fn parse(text: &str, src: &str, w: usize) -> Result<Windows> {
    let t = text.trim_start();
    if t.is_empty() {
        return Err(Error::invalid(format!(
            "{src} is empty: give {w} RTT samples (ms) per window"
        )));
    }
    let parsed = if t.starts_with('[') || t.starts_with('{') {
        json(t, src)?
    } else {
        csv(text, src)?
    };
    let out = match parsed {
        Parsed::Windows(ws) => {
            for (i, win) in ws.iter().enumerate() {
                if win.is_empty() {
                    return Err(Error::invalid(format!("{src}: window {} is empty", i + 1)));
                }
                if win.len() != w {
                    return Err(Error::invalid(format!(
                        "{src}: window {} has {} samples; the model takes w = {w}",
                        i + 1,
                        win.len()
                    )));
                }
            }
            Windows {
                windows: ws,
                leftover: 0,
            }
        }
        Parsed::Series(s) => {
            if s.len() < w {
                return Err(Error::invalid(format!(
                    "{src}: the series has {} samples; the model takes windows of w = {w} \
                     (at 1 Hz, probe for at least {w} s)",
                    s.len()
                )));
            }
            Windows {
                windows: s.chunks_exact(w).map(<[f64]>::to_vec).collect(),
                leftover: s.len() % w,
            }
        }
    };
    Ok(out)
}

enum Parsed {
    Windows(Vec<Vec<f64>>),
    Series(Vec<f64>),
}

fn finite(v: f64, src: &str, at: &str) -> Result<f64> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(Error::invalid(format!(
            "{src}: {at} is {v}; every RTT sample must be a finite number of ms"
        )))
    }
}

fn csv(text: &str, src: &str) -> Result<Parsed> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    let split = |l: &str| -> Vec<String> {
        l.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let Some(&(_, first)) = lines.first() else {
        return Err(Error::invalid(format!("{src} has no data lines")));
    };
    let head = split(first);
    // A header names columns: no token is a number (or it names rtt_ms).
    // A line mixing numbers and a typo is data with a bad value.
    let is_header =
        head.iter().all(|c| c.parse::<f64>().is_err()) || head.iter().any(|c| c == "rtt_ms");
    if is_header {
        // Header: the series is the rtt_ms column; keep empty cells as
        // positions so a missing sample is reported on its line.
        let cols: Vec<&str> = first.split(',').map(str::trim).collect();
        let col = cols.iter().position(|c| *c == "rtt_ms").ok_or_else(|| {
            Error::invalid(format!(
                "{src} line {}: a header without an rtt_ms column ({first:?}); give one window per line \
                 or a CSV with an rtt_ms column",
                lines[0].0 + 1
            ))
        })?;
        let mut series = Vec::new();
        for &(n, l) in &lines[1..] {
            let cell = l.split(',').nth(col).map(str::trim).unwrap_or("");
            let at = format!("line {} rtt_ms", n + 1);
            if cell.is_empty() {
                return Err(Error::invalid(format!(
                    "{src}: {at} is missing (a sample without a reply?); every RTT sample must be a finite number of ms"
                )));
            }
            let v = cell
                .parse::<f64>()
                .map_err(|e| Error::invalid(format!("{src}: {at} {cell:?}: {e}")))?;
            series.push(finite(v, src, &at)?);
        }
        return Ok(Parsed::Series(series));
    }
    let mut ws = Vec::new();
    for (n, l) in lines {
        let mut win = Vec::new();
        for (j, c) in split(l).iter().enumerate() {
            let at = format!("line {} value {}", n + 1, j + 1);
            let v = c
                .parse::<f64>()
                .map_err(|e| Error::invalid(format!("{src}: {at} {c:?}: {e}")))?;
            win.push(finite(v, src, &at)?);
        }
        ws.push(win);
    }
    Ok(Parsed::Windows(ws))
}

fn numbers(v: &Value, src: &str, what: &str) -> Result<Vec<f64>> {
    let a = v
        .as_array()
        .ok_or_else(|| Error::invalid(format!("{src}: {what} is not an array of numbers")))?;
    a.iter()
        .enumerate()
        .map(|(i, x)| {
            let at = format!("{what}[{i}]");
            match x {
                Value::Number(n) => finite(n.as_f64().unwrap_or(f64::NAN), src, &at),
                Value::Null => Err(Error::invalid(format!(
                    "{src}: {at} is null (a sample without a reply?); every RTT sample must be a finite number of ms"
                ))),
                other => Err(Error::invalid(format!(
                    "{src}: {at} is {other}, not a number of ms"
                ))),
            }
        })
        .collect()
}

fn json(text: &str, src: &str) -> Result<Parsed> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| Error::invalid(format!("{src} is not valid JSON: {e}")))?;
    match &v {
        Value::Array(a) if a.iter().all(Value::is_array) && !a.is_empty() => Ok(Parsed::Windows(
            a.iter()
                .enumerate()
                .map(|(i, w)| numbers(w, src, &format!("window {}", i + 1)))
                .collect::<Result<_>>()?,
        )),
        Value::Array(_) => Ok(Parsed::Series(numbers(&v, src, "the series")?)),
        Value::Object(o) => {
            if let Some(r) = o.get("rtt_ms") {
                return Ok(Parsed::Series(numbers(r, src, "rtt_ms")?));
            }
            if let Some(ws) = o.get("windows") {
                return json(&ws.to_string(), src).and_then(|p| match p {
                    Parsed::Windows(w) => Ok(Parsed::Windows(w)),
                    Parsed::Series(_) => Err(Error::invalid(format!(
                        "{src}: windows must be an array of arrays"
                    ))),
                });
            }
            if let Some(Value::Array(ss)) = o.get("samples") {
                let rtts: Vec<Value> = ss
                    .iter()
                    .map(|s| s.get("rtt_ms").cloned().unwrap_or(Value::Null))
                    .collect();
                return Ok(Parsed::Series(numbers(
                    &Value::Array(rtts),
                    src,
                    "samples[].rtt_ms",
                )?));
            }
            Err(Error::invalid(format!(
                "{src}: a JSON object needs rtt_ms, windows or samples (opsel probe --json)"
            )))
        }
        _ => Err(Error::invalid(format!(
            "{src}: expected a JSON array or object of RTT samples"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_are_windows_and_a_header_selects_the_series() {
        let w = parse("1,2,3\n4 5 6\n\n", "x", 3).unwrap();
        assert_eq!(w.windows, vec![vec![1.0, 2.0, 3.0], vec![4.0, 5.0, 6.0]]);
        let w = parse(
            "t_s,rtt_ms,answered\n0,1,10\n1,2,10\n2,3,10\n3,4,10\n",
            "x",
            2,
        )
        .unwrap();
        assert_eq!(w.windows, vec![vec![1.0, 2.0], vec![3.0, 4.0]]);
        let w = parse("t_s,rtt_ms\n0,1\n1,2\n2,3\n", "x", 2).unwrap();
        assert_eq!(w.leftover, 1);
    }

    #[test]
    fn json_forms() {
        assert_eq!(parse("[1,2,3,4]", "x", 2).unwrap().windows.len(), 2);
        assert_eq!(parse("[[1,2],[3,4]]", "x", 2).unwrap().windows.len(), 2);
        assert_eq!(
            parse(r#"{"rtt_ms":[1,2]}"#, "x", 2).unwrap().windows.len(),
            1
        );
        assert_eq!(
            parse(r#"{"windows":[[1,2]]}"#, "x", 2).unwrap().windows,
            vec![vec![1.0, 2.0]]
        );
        let probe =
            r#"{"target":"icmp:10.0.0.1","samples":[{"t_s":0,"rtt_ms":5.5},{"t_s":1,"rtt_ms":6}]}"#;
        assert_eq!(parse(probe, "x", 2).unwrap().windows, vec![vec![5.5, 6.0]]);
    }

    #[test]
    fn bad_input_says_what_and_where() {
        let e = |t: &str, w: usize| parse(t, "in.csv", w).unwrap_err().to_string();
        assert!(e("", 3).contains("in.csv is empty"));
        assert!(e("1,2\n", 3).contains("window 1 has 2 samples; the model takes w = 3"));
        assert!(e("1,NaN,3\n", 3).contains("line 1 value 2 is NaN"));
        assert!(e("1,x,3\n", 3).contains("line 1 value 2 \"x\""));
        assert!(e("[1,null,3]", 3).contains("the series[1] is null"));
        assert!(e("[[1,2,3],[]]", 3).contains("window 2 is empty"));
        assert!(e("[1,2]", 3).contains("the series has 2 samples"));
        assert!(e("t_s,rtt_ms\n0,1\n1,\n2,3\n", 3).contains("line 3 rtt_ms is missing"));
        assert!(e("a,b\n1,2\n", 2).contains("without an rtt_ms column"));
        assert!(e("{\"x\":1}", 2).contains("needs rtt_ms, windows or samples"));
        assert!(e("[1,2", 2).contains("not valid JSON"));
    }
}
