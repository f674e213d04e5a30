"""Why active probing misclassifies: the evidence behind docs/results/classifier.md.

Three checks on collected active traces (and their passive counterparts):

* **alignment**: every row's ``phase`` is ``k mod P`` and its ``segment`` is the
  pattern's segment at that phase, so windows cut at ``k = 0, P, 2P, ...``
  start at a cycle boundary (000 §10 gap 2, the project's alignment decision);
* **segment profile**: the RTT excess over the run's base RTT per pattern
  segment and class, separately for the first cycle of a run (the background
  has run alone for the warm-up) and for the later cycles (the background has
  lived through the probe's bursts), plus the share of silence samples within
  1 ms of the base RTT (an empty queue);
* **background goodput**: the side-cars' per-flow background throughput and
  bottleneck drops, active against passive: how much the probe's own bursts
  knock the background back.
"""

from __future__ import annotations

import csv

import numpy as np

from opsel.train.data import SIX_CLASSES, Trace

EMPTY_QUEUE_MS = 1.0


def pattern_segments(pattern: str) -> list[tuple[str, int]]:
    """``"S5-C5-S5-B5"`` → ``[("S", 5), ("C", 5), ("S", 5), ("B", 5)]``."""
    out = []
    for seg in pattern.split("-"):
        kind = seg[:1].upper()
        digits = "".join(ch for ch in seg[1:] if ch.isdigit())
        if kind not in "SCB" or not digits:
            raise ValueError(f"pattern segment {seg!r} of {pattern!r} is not S<n>, C<n> or B<n>")
        out.append((kind, int(digits)))
    return out


SEGMENT_NAMES = {"S": "silence", "C": "cubic", "B": "bbr"}


def _phase_rows(tr: Trace):
    """(phase, segment name) per row, read back from the CSV (the loader keeps only the segment)."""
    with open(tr.path, newline="") as f:
        text = f.read()
    if not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    rows = [r for r in csv.reader(text.splitlines()[1:]) if len(r) == 10]
    phase = np.array([int(r[8]) if r[8] else -1 for r in rows], dtype=np.int64)
    return phase, [r[9] for r in rows]


def alignment(tr: Trace) -> dict:
    """Does every row sit where the pattern says? Counts of rows whose phase or segment disagree."""
    P = tr.pattern_len
    if not P:
        raise ValueError(f"{tr.path}: not an active trace (no pattern in the side-car)")
    segs = pattern_segments(tr.meta["conditions"]["pattern"])
    expect = [SEGMENT_NAMES[kind] for kind, n in segs for _ in range(n)]
    phase, seg = _phase_rows(tr)
    k = tr.k[: len(phase)]
    bad_phase = int(np.sum(phase != k % P))
    bad_seg = sum(1 for p, s in zip(phase, seg) if 0 <= p < P and s != expect[p])
    return {"label": tr.label, "rows": int(len(phase)), "phase_mismatch": bad_phase, "segment_mismatch": bad_seg}


def _base_per_sample(tr: Trace) -> np.ndarray:
    """The base RTT of each sample's run (median of that run's side-car base samples, else the trace's)."""
    runs = {int(r.get("run", i)): r for i, r in enumerate(tr.meta.get("runs", []))}
    fallback = tr.base_rtt_ms
    if not np.isfinite(fallback):
        fallback = float(np.nanmin(tr.rtt_ms)) if len(tr.rtt_ms) else float("nan")
    base = {r: float(np.median(v["base_rtt_ms"])) if v.get("base_rtt_ms") else fallback for r, v in runs.items()}
    return np.array([base.get(int(r), fallback) for r in tr.run], dtype=np.float64)


def segment_profile(tr: Trace) -> dict:
    """RTT excess over base per phase and per segment, first cycle vs later cycles."""
    P = tr.pattern_len
    if not P:
        raise ValueError(f"{tr.path}: not an active trace (no pattern in the side-car)")
    segs = pattern_segments(tr.meta["conditions"]["pattern"])
    excess = tr.rtt_ms - _base_per_sample(tr)
    phase = tr.k % P
    cycle = tr.k // P
    out = {"label": tr.label, "pattern": tr.meta["conditions"]["pattern"], "period": P}
    for name, sel in (("first", cycle == 0), ("later", cycle >= 1)):
        per_phase = [float(np.nanmedian(excess[sel & (phase == p)])) if np.any(sel & (phase == p)) else float("nan")
                     for p in range(P)]
        seg_rows = []
        start = 0
        for i, (kind, n) in enumerate(segs):
            m = sel & (phase >= start) & (phase < start + n)
            x = excess[m]
            x = x[np.isfinite(x)]
            seg_rows.append({
                "segment": f"{kind}{n}#{i + 1}",
                "kind": kind,
                "median_ms": float(np.median(x)) if len(x) else float("nan"),
                "p10_ms": float(np.percentile(x, 10)) if len(x) else float("nan"),
                "p90_ms": float(np.percentile(x, 90)) if len(x) else float("nan"),
                # the first sample of a segment still shows the previous one (it is taken at its start)
                "empty_queue_share": float(np.mean(excess[m & (phase > start)] < EMPTY_QUEUE_MS))
                if np.any(m & (phase > start)) else float("nan"),
                "samples": int(len(x)),
            })
            start += n
        out[name] = {"per_phase_median_ms": per_phase, "segments": seg_rows, "cycles": int(len(np.unique(
            tr.run[sel] * 100000 + cycle[sel])))}
    return out


def background_goodput(tr: Trace) -> dict:
    """Mean background goodput per flow (Mbit/s) and bottleneck drops per run, from the side-car."""
    runs = tr.meta.get("runs", [])
    flows: dict[str, list] = {}
    drops = []
    for r in runs:
        for name, v in (r.get("background_mbps") or {}).items():
            flows.setdefault(name, []).append(float(v))
        if r.get("bottleneck_drops") is not None:
            drops.append(float(r["bottleneck_drops"]))
    per_flow = {k: float(np.mean(v)) for k, v in sorted(flows.items())}
    return {"label": tr.label, "runs": len(runs), "per_flow_mbps": per_flow,
            "total_mbps": float(sum(per_flow.values())), "drops_per_run": float(np.mean(drops)) if drops else float("nan")}


def report(active: list[Trace], passive: list[Trace] | None = None) -> dict:
    """All three checks; ``passive`` (same condition) adds the passive goodput for comparison."""
    pas = {t.label: t for t in passive or []}
    out = {"alignment": [], "profile": [], "goodput": []}
    for tr in sorted(active, key=lambda t: SIX_CLASSES.index(t.label) if t.label in SIX_CLASSES else 99):
        out["alignment"].append(alignment(tr))
        out["profile"].append(segment_profile(tr))
        g = {"active": background_goodput(tr)}
        if tr.label in pas:
            g["passive"] = background_goodput(pas[tr.label])
        out["goodput"].append(g)
    return out


def markdown(rep: dict) -> list[str]:
    """The report as markdown lines."""
    L = []
    al = rep["alignment"]
    L += ["### Window alignment", "",
          f"Rows checked: {sum(a['rows'] for a in al)}; rows whose phase is not k mod P: "
          f"{sum(a['phase_mismatch'] for a in al)}; rows whose segment is not the pattern's: "
          f"{sum(a['segment_mismatch'] for a in al)}.", ""]
    if rep["profile"]:
        segs = [s["segment"] for s in rep["profile"][0]["later"]["segments"]]
        for name, title in (("first", "first cycle of each run (background alone during the warm-up before it)"),
                            ("later", "cycles 2, 3, … of each run (background has lived through the probe's bursts)")):
            L += [f"### RTT excess over base per segment: {title}", "",
                  "Median [p10, p90] in ms; in brackets after `|` the share of silence samples (after the first) "
                  f"within {EMPTY_QUEUE_MS:g} ms of base, i.e. an empty queue.", "",
                  "| class | cycles | " + " | ".join(segs) + " |", "|---" * (len(segs) + 2) + "|"]
            for p in rep["profile"]:
                cells = []
                for s in p[name]["segments"]:
                    c = f"{s['median_ms']:.1f} [{s['p10_ms']:.1f}, {s['p90_ms']:.1f}]"
                    if s["kind"] == "S":
                        c += f" \\| {100 * s['empty_queue_share']:.0f} %"
                    cells.append(c)
                L.append(f"| {p['label']} | {p[name]['cycles']} | " + " | ".join(cells) + " |")
            L.append("")
    L += ["### Background goodput and drops, active vs passive (side-cars, mean over runs)", "",
          "| class | active: background Mbit/s (per flow) | passive: background Mbit/s (per flow) | "
          "drops/run active | drops/run passive |", "|---|---|---|---|---|"]
    for g in rep["goodput"]:
        a, p = g["active"], g.get("passive")

        def fmt(x):
            if not x or not x["per_flow_mbps"]:
                return "0"
            return f"{x['total_mbps']:.1f} (" + ", ".join(f"{v:.1f}" for v in x["per_flow_mbps"].values()) + ")"

        L.append(f"| {a['label']} | {fmt(a)} | {fmt(p) if p else '–'} | {a['drops_per_run']:.0f} | "
                 f"{p['drops_per_run'] if p else float('nan'):.0f} |")
    L.append("")
    return L
