"""Manifest of a recorded corpus: what was recorded where, and at what load.

Reads every ``<condition>/<mode>/<class>.csv`` trace and its side-car under a
corpus folder (``opsel lab collect --out``) and writes ``MANIFEST.json`` (one
entry per trace) plus a Markdown table on stdout: per condition and mode, the
network (rate, RTT, buffer), complete windows of w per class, runs, and the
1-minute load average of the machine when each run started (min / median /
max), since the RTT series of a user-space pipe picks up scheduling noise on a
busy machine.

Usage::

    .venv/bin/python research/generalisation/manifest.py data/collect > data/collect/MANIFEST.md
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from opsel.train.data import SIX_CLASSES, read_trace, trace_windows


def load1(run: dict) -> float | None:
    s = run.get("loadavg_at_start")
    try:
        return float(s.split()[0]) if s else None
    except (ValueError, IndexError):
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--w", type=int, default=20)
    a = ap.parse_args(argv)
    entries = []
    for cond in sorted(os.listdir(a.root)):
        cdir = os.path.join(a.root, cond)
        if not os.path.isdir(cdir):
            continue
        for mode in sorted(os.listdir(cdir)):
            mdir = os.path.join(cdir, mode)
            if not os.path.isdir(mdir):
                continue
            for cl in SIX_CLASSES:
                p = os.path.join(mdir, f"{cl}.csv")
                if not os.path.exists(p):
                    continue
                tr = read_trace(p)
                c = tr.meta.get("conditions", {})
                runs = tr.meta.get("runs", [])
                loads = [v for v in (load1(r) for r in runs) if v is not None]
                # Windows of w seconds: w samples at 1 Hz, 5 w with passive-200ms.
                period_ms = float(c.get("probe", {}).get("sample_interval_ms", 1000.0))
                ws = max(1, round(a.w * 1000.0 / period_ms))
                entries.append({
                    "condition": cond, "mode": mode, "class": cl,
                    "rate_mbps": c.get("rate_mbps"), "rtt_ms": c.get("rtt_ms"),
                    "buffer_bdp": c.get("buffer_bdp"), "buffer_bytes": c.get("buffer_bytes"),
                    "windows": int(len(trace_windows(tr, ws))), "w": ws,
                    "sample_interval_ms": period_ms,
                    "samples": int(len(tr.k)), "runs": len(runs),
                    "kernels": sorted({r.get("kernel", "?") for r in runs}),
                    "load1_at_start": loads,
                    "first_run_unix_s": min((r.get("start_unix_s", 0) for r in runs), default=None),
                    "last_run_unix_s": max((r.get("end_unix_s", 0) or 0 for r in runs), default=None),
                })
    with open(os.path.join(a.root, "MANIFEST.json"), "w") as f:
        json.dump({"format": "opsel-corpus-manifest", "version": 1, "w": a.w, "traces": entries}, f, indent=1)
    print(f"| condition | mode | rate Mbit/s | RTT ms | buffer × BDP | windows of {a.w} s per class "
          f"({', '.join(SIX_CLASSES)}) | runs | load at run start (min / median / max) |")
    print("|---|---|---|---|---|---|---|---|")
    keys = sorted({(e["condition"], e["mode"]) for e in entries},
                  key=lambda k: next((e["rate_mbps"] or 0, e["rtt_ms"] or 0, e["buffer_bdp"] or 0, k[1])
                                     for e in entries if (e["condition"], e["mode"]) == k))
    for k in keys:
        es = {e["class"]: e for e in entries if (e["condition"], e["mode"]) == k}
        e0 = next(iter(es.values()))
        wins = " / ".join(str(es[c]["windows"]) if c in es else "–" for c in SIX_CLASSES)
        loads = [v for e in es.values() for v in e["load1_at_start"]]
        lo = f"{min(loads):.1f} / {np.median(loads):.1f} / {max(loads):.1f}" if loads else "–"
        print(f"| `{k[0]}` | {k[1]} | {e0['rate_mbps']:g} | {e0['rtt_ms']:g} | {e0['buffer_bdp']:g} | {wins} | "
              f"{sum(e['runs'] for e in es.values())} | {lo} |")


if __name__ == "__main__":
    main()
