"""Load RTT training traces written by ``opsel lab collect`` and cut windows.

A trace is ``<root>/<condition>/<mode>/<class>.csv`` with a JSON side-car of
the same stem (conditions + one entry per recording run). Columns::

    run,k,t_unix_s,rtt_ms,min_ms,max_ms,answered,cycle,phase,segment

``k`` is the 1 Hz sample index within a run; in active mode ``k = 0`` is the
start of the probing pattern. Windows never straddle runs and never contain
a lost sample (empty ``rtt_ms``), the same rule the Rust collector uses to
count windows when it resumes (``opsel_netlab::collect::count_windows``).

Alignment (000 §10 gap 2, project decision: align):

* passive: non-overlapping windows ``k // w`` within each run;
* active: windows start at a pattern-cycle boundary; a window of ``w``
  samples uses ``ceil(w / P)`` cycles (``P`` = pattern length in samples), so
  w = 20 with a 20 s pattern is exactly one window per cycle, w = 5 is the
  first segment of each cycle, and w = 50 takes 50 s of each 3-cycle block.
  A deployed OPS probe sees exactly these windows: it starts the pattern and
  classifies the first ``w`` samples.
"""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass, field

import numpy as np

SIX_CLASSES = ("B0-C0", "B0-C1", "B1-C0", "B1-C1", "B1-B1", "C1-C1")
CSV_HEADER = "run,k,t_unix_s,rtt_ms,min_ms,max_ms,answered,cycle,phase,segment"


@dataclass
class Trace:
    """One trace: the RTT samples of one (condition, mode, class)."""

    path: str
    condition: str
    mode: str
    label: str
    run: np.ndarray  # int, per sample
    k: np.ndarray  # int, per sample
    rtt_ms: np.ndarray  # float, NaN = lost
    segment: list
    meta: dict = field(default_factory=dict)
    # Recorded samples per sample of this series: 1, or 5 for a 200-ms trace read at 1 Hz
    # (``at_1hz``); ``k * stride`` is the row's index in the CSV's own numbering.
    stride: int = 1

    @property
    def sample_interval_ms(self) -> float:
        """Time between two recorded samples (1000 unless recorded with ``passive-<ms>ms``)."""
        probe = (self.meta.get("conditions") or {}).get("probe") or {}
        return float(probe.get("sample_interval_ms", 1000.0)) * self.stride

    @property
    def pattern_len(self) -> int | None:
        """Samples per pattern cycle (active traces), from the side-car or the pattern text."""
        pat = (self.meta.get("conditions") or {}).get("pattern")
        if not pat:
            return None
        total = 0
        for seg in pat.split("-"):
            digits = "".join(ch for ch in seg if ch.isdigit() or ch == ".")
            total += float(digits) if digits else 0.0
        return int(round(total))

    @property
    def base_rtt_ms(self) -> float:
        """Median of the side-car's base-RTT samples (taken before the background started)."""
        vals = [v for r in self.meta.get("runs", []) for v in r.get("base_rtt_ms", [])]
        return float(np.median(vals)) if vals else float("nan")


def read_trace(path: str) -> Trace:
    """Read one trace CSV (and its side-car if present). A torn last line is ignored."""
    with open(path, newline="") as f:
        text = f.read()
    if not text.startswith(CSV_HEADER):
        raise ValueError(f"{path}: header is not {CSV_HEADER!r}; is this an opsel trace?")
    if not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    rows = list(csv.reader(text.splitlines()[1:]))
    rows = [r for r in rows if r]
    for i, r in enumerate(rows):
        if len(r) != 10:
            raise ValueError(f"{path}: line {i + 2} has {len(r)} fields, expected 10")
    run = np.array([int(r[0]) for r in rows], dtype=np.int64)
    k = np.array([int(r[1]) for r in rows], dtype=np.int64)
    rtt = np.array([float(r[3]) if r[3] else math.nan for r in rows], dtype=np.float64)
    seg = [r[9] for r in rows]
    meta = {}
    side = os.path.splitext(path)[0] + ".json"
    if os.path.exists(side):
        with open(side) as f:
            meta = json.load(f)
    parts = os.path.normpath(path).split(os.sep)
    label = os.path.splitext(parts[-1])[0]
    mode = parts[-2] if len(parts) >= 2 else "?"
    condition = parts[-3] if len(parts) >= 3 else "?"
    return Trace(path, condition, mode, label, run, k, rtt, seg, meta)


def at_interval(tr: Trace, ms: float) -> Trace:
    """A passive trace as the series a prober sampling every ``ms`` would have recorded on the
    same traffic: every ``ms / p``-th sample of a trace recorded every ``p`` ms (k = 0, 5, 10, …
    for a 200-ms trace read at 1 s), renumbered. A trace already at ``ms`` is returned as is."""
    p = tr.sample_interval_ms
    if p == ms:
        return tr
    per = int(round(ms / p))
    if per < 1 or per * p != ms or tr.pattern_len:
        raise ValueError(f"{tr.path}: a trace sampled every {p:g} ms cannot be read every {ms:g} ms")
    keep = tr.k % per == 0
    return Trace(tr.path, tr.condition, tr.mode, tr.label, tr.run[keep], tr.k[keep] // per,
                 tr.rtt_ms[keep], [s for s, k in zip(tr.segment, keep) if k], tr.meta, stride=tr.stride * per)


def at_1hz(tr: Trace) -> Trace:
    """A passive trace recorded every ``p`` ms (``passive-200ms``) as the 1 Hz series a
    one-burst-a-second prober would have recorded on the same traffic (:func:`at_interval`).
    A 1 Hz trace is returned as is."""
    if tr.sample_interval_ms >= 1000.0:
        return tr
    return at_interval(tr, 1000.0)


def find_traces(root: str, condition: str, mode: str, classes=SIX_CLASSES) -> list[Trace]:
    """The traces of ``root/condition/mode`` for ``classes`` (missing files are skipped)."""
    return find_traces_dir(os.path.join(root, condition, mode), classes)


def find_traces_dir(directory: str, classes=SIX_CLASSES) -> list[Trace]:
    """The traces ``directory/<class>.csv`` for ``classes`` (missing files are skipped)."""
    return [read_trace(os.path.join(directory, f"{c}.csv")) for c in classes
            if os.path.exists(os.path.join(directory, f"{c}.csv"))]


def trace_windows(tr: Trace, w: int, aligned: bool | None = None, max_windows: int | None = None) -> np.ndarray:
    """Non-overlapping windows of ``w`` samples from one trace, shape (n, w).

    ``aligned`` defaults to True for active traces (see the module docs).
    """
    return trace_windows_meta(tr, w, aligned, max_windows)[0]


def trace_windows_meta(tr: Trace, w: int, aligned: bool | None = None, max_windows: int | None = None):
    """Like :func:`trace_windows`, plus where each window comes from: ``(X, runs, starts)``
    with the run number and the first sample index ``k`` of every window."""
    if w <= 0:
        raise ValueError(f"window length w = {w} must be positive")
    period = tr.pattern_len
    if aligned is None:
        aligned = period is not None
    stride = w
    if aligned:
        if not period:
            raise ValueError(f"{tr.path}: aligned windows need an active trace with a pattern")
        stride = int(math.ceil(w / period)) * period
    out, runs, starts = [], [], []
    for r in np.unique(tr.run):
        sel = tr.run == r
        ks = tr.k[sel]
        vals = tr.rtt_ms[sel]
        if len(ks) == 0:
            continue
        series = np.full(int(ks.max()) + 1, np.nan)
        series[ks] = vals
        for start in range(0, len(series) - w + 1, stride):
            win = series[start : start + w]
            if np.all(np.isfinite(win)) and np.all(win > 0):
                out.append(win)
                runs.append(int(r))
                starts.append(start)
            if max_windows is not None and len(out) >= max_windows:
                break
    return (np.array(out, dtype=np.float64).reshape(-1, w), np.array(runs, dtype=np.int64),
            np.array(starts, dtype=np.int64))


def dataset(traces: list[Trace], w: int, aligned: bool | None = None, balance: bool = False):
    """Stack the windows of several traces: (X (n, w), y labels as str array).

    ``balance`` keeps the same number of windows per class (the smallest),
    taking each trace's first windows so the subset is deterministic.
    """
    per = [trace_windows(t, w, aligned) for t in traces]
    if balance and per:
        n = min(len(p) for p in per)
        per = [p[:n] for p in per]
    X = np.concatenate(per, axis=0) if per else np.zeros((0, w))
    y = np.concatenate([[t.label] * len(p) for t, p in zip(traces, per)]) if per else np.array([])
    return X, np.asarray(y, dtype=object).astype(str)


def summary(traces: list[Trace], w: int = 20) -> list[dict]:
    """Per trace: label, samples, windows of ``w``, base RTT, mean RTT."""
    return [
        {
            "label": t.label,
            "samples": int(len(t.k)),
            "lost": int(np.sum(~np.isfinite(t.rtt_ms))),
            "runs": int(len(np.unique(t.run))),
            "windows": int(len(trace_windows(t, w))),
            "base_rtt_ms": t.base_rtt_ms,
            "mean_rtt_ms": float(np.nanmean(t.rtt_ms)) if len(t.rtt_ms) else float("nan"),
        }
        for t in traces
    ]
