"""Tuning curves as PNG (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import math

import numpy as np


def plot_curves(curves: dict, path: str, title: str = "", unit: str = "s") -> str:
    """``curves``: name -> list of best-so-far cost curves (one per seed). Draws the median
    over seeds with a min-max band; returns ``path``."""
    from matplotlib.figure import Figure  # Agg canvas; no pyplot global state

    scale, label = (1e3, "best cost (ms)") if unit == "s" else (1.0, f"best cost ({unit})")
    fig = Figure(figsize=(6, 4), dpi=100)
    ax = fig.subplots()
    for name, runs in curves.items():
        n = max(len(r) for r in runs)
        arr = np.full((len(runs), n), np.nan)
        for i, r in enumerate(runs):
            vals = [c if math.isfinite(c) else np.nan for c in r]
            arr[i, : len(vals)] = vals
            if len(vals) < n and len(vals):
                arr[i, len(vals) :] = vals[-1]
        x = np.arange(1, n + 1)
        with np.errstate(all="ignore"):
            med = np.nanmedian(arr, axis=0) * scale
            lo, hi = np.nanmin(arr, axis=0) * scale, np.nanmax(arr, axis=0) * scale
        ax.plot(x, med, label=f"{name} (n={len(runs)})")
        if len(runs) > 1:
            ax.fill_between(x, lo, hi, alpha=0.2)
    ax.set_yscale("log")
    ax.set_xlabel("trials")
    ax.set_ylabel(label)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    return path
