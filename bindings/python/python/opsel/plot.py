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

