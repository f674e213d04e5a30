"""Figures for background-mix recognition (matplotlib, PNG): the RTT signature
of each class (cf. 000 Fig 5.3), accuracy vs window length per model (cf. 000
Figs 5.5–5.8) and confusion matrices (cf. 000 Figs 5.9–5.11).

matplotlib is imported lazily with the non-interactive Agg backend, so these
functions work on a headless machine.
"""

from __future__ import annotations

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def rtt_signatures(traces, path: str, *, w: int = 20, n_windows: int = 3, title: str | None = None):
    """One panel per class: ``n_windows`` consecutive windows of the trace, plus the mean window."""
    from .train.data import trace_windows

    plt = _plt()
    n = len(traces)
    cols = 3
    rows = int(np.ceil(n / cols)) or 1
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows), sharey=True, squeeze=False)
    for ax, tr in zip(axes.flat, traces):
        X = trace_windows(tr, w)
        for i, win in enumerate(X[:n_windows]):
            ax.plot(np.arange(w), win, lw=0.8, alpha=0.6, label="windows" if i == 0 else None)
        if len(X):
            ax.plot(np.arange(w), X.mean(axis=0), color="k", lw=2, label=f"mean of {len(X)}")
        ax.set_title(tr.label)
        ax.set_xlabel("s")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("RTT (ms)")
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def accuracy_vs_w(rows, path: str, *, title: str | None = None, key=("model", "normalization")):
    """Lines of CV accuracy against w, one per (model, normalisation) in ``rows`` (sweep output)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    groups = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in key), []).append(r)
    for g, rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: r["w"])
        ax.plot([r["w"] for r in rs], [100 * r["accuracy"] for r in rs], marker="o", ms=3, label=" / ".join(map(str, g)))
    ax.set_xlabel("window length w (s)")
    ax.set_ylabel("5-fold CV accuracy (%)")
    ax.grid(alpha=0.3)
    if groups:
        ax.legend(fontsize=7)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def learning_curve(rows, path: str, *, title: str | None = None):
    """CV accuracy against windows per class (``opsel.train.learning`` rows): one panel per w,
    one line per (k, radius), error bars = sd over fold seeds."""
    plt = _plt()
    ws = sorted({r["w"] for r in rows}) or [0]
    fig, axes = plt.subplots(1, len(ws), figsize=(5.0 * len(ws), 3.8), squeeze=False, sharey=True)
    for ax, w in zip(axes.flat, ws):
        groups = {}
        for r in rows:
            if r["w"] == w:
                groups.setdefault((r["k"], r["radius"]), []).append(r)
        for (k, rad), rs in groups.items():
            rs = sorted(rs, key=lambda r: r["per_class"])
            ax.errorbar([r["per_class"] for r in rs], [100 * r["accuracy"] for r in rs],
                        yerr=[100 * r["sd"] for r in rs], marker="o", ms=3, capsize=2,
                        label=f"{k}-NN, radius {'full' if rad is None else rad}")
        ax.axhline(95, color="grey", lw=0.8, ls="--")
        ax.set_title(f"w = {w}")
        ax.set_xlabel("windows per class (first n recorded)")
        ax.grid(alpha=0.3)
        if groups:
            ax.legend(fontsize=7)
    axes.flat[0].set_ylabel("5-fold CV accuracy (%)")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def confusion(conf, classes, path: str, *, title: str | None = None):
    """Confusion matrix (rows = true class, columns = predicted), counts and row percentages."""
    plt = _plt()
    conf = np.asarray(conf, dtype=np.float64)
    rowsum = conf.sum(axis=1, keepdims=True)
    pct = np.divide(conf, rowsum, out=np.zeros_like(conf), where=rowsum > 0)
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    ax.imshow(pct, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(classes)), classes, rotation=45)
    ax.set_yticks(range(len(classes)), classes)
    for i in range(len(classes)):
        for j in range(len(classes)):
            ax.text(j, i, f"{int(conf[i, j])}\n{100 * pct[i, j]:.0f}%", ha="center", va="center", fontsize=7,
                    color="white" if pct[i, j] > 0.6 else "black")
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def segment_profile(profiles, path: str, *, title: str | None = None):
    """Median RTT excess over base per pattern phase and class (``opsel.train.diagnose.segment_profile``
    output), first cycle of a run vs later cycles, with the pattern's segments shaded."""
    from .train.diagnose import pattern_segments

    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    if not profiles:
        raise ValueError("segment_profile needs at least one profile")
    segs = pattern_segments(profiles[0]["pattern"])
    colors = {"S": "white", "C": "#fde0c5", "B": "#c6dbef"}
    for ax, (name, sub) in zip(axes, (("first", "first cycle of a run"), ("later", "later cycles"))):
        start = 0
        for kind, n in segs:
            ax.axvspan(start - 0.5, start + n - 0.5, color=colors[kind], alpha=0.8, lw=0)
            ax.text(start + n / 2 - 0.5, 1.0, f"{kind}{n}", transform=ax.get_xaxis_transform(), ha="center",
                    va="bottom", fontsize=8)
            start += n
        for p in profiles:
            y = p[name]["per_phase_median_ms"]
            ax.plot(range(len(y)), y, marker="o", ms=3, lw=1.2, label=p["label"])
        ax.set_xlabel("sample in the pattern cycle (s)")
        ax.set_title(sub, fontsize=9, pad=14)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("median RTT − base RTT (ms)")
    axes[1].legend(fontsize=7, ncol=2, loc="upper right")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
