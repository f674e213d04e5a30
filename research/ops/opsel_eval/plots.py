"""Figures of the evaluation studies: the learning curve (``learning``) and the
per-phase RTT profile (``diagnose``), drawn with the package's matplotlib setup."""

from __future__ import annotations

from opsel.plot import _plt


def learning_curve(rows, path: str, *, title: str | None = None):
    """CV accuracy against windows per class (``opsel_eval.learning`` rows): one panel per w,
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


def segment_profile(profiles, path: str, *, title: str | None = None):
    """Median RTT excess over base per pattern phase and class (``opsel_eval.diagnose.segment_profile``
    output), first cycle of a run vs later cycles, with the pattern's segments shaded."""
    from .diagnose import pattern_segments

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
