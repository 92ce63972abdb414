"""Tuning curves as PNG (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import math

import numpy as np

ZOOM_FROM_TRIAL = 8  # with a best: the cost axis starts at the curves' median here


def plot_curves(
    curves: dict, path: str, title: str = "", unit: str = "s", best: float | None = None
) -> str:
    """``curves``: name -> list of best-so-far cost curves (one per seed). Draws the median
    over seeds with a min-max band (cost axis logarithmic); with ``best`` (the best cost any
    run found), the line of 95% of it (``best / 0.95``), and a linear cost axis from just below
    ``best`` to the curves' highest median at trial ``ZOOM_FROM_TRIAL``, where the runs part.
    Returns ``path``."""
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
    zoom = best is not None and math.isfinite(best) and best > 0
    ax.set_yscale("linear" if zoom else "log")
    if zoom:
        ax.axhline(best / 0.95 * scale, color="k", lw=0.6, ls="--", label="95% of the best")
        tops = [np.nanmedian([r[min(len(r), ZOOM_FROM_TRIAL) - 1] for r in runs])
                for runs in curves.values() if runs]  # fmt: skip
        top = max([t for t in tops if math.isfinite(t)] + [best / 0.95 * 1.1])
        ax.set_ylim(best * 0.97 * scale, top * 1.05 * scale)
    ax.set_xlabel("trials")
    ax.set_ylabel(label)
    ax.set_title(title, fontsize=8 if len(title) > 60 else None)  # a task's key: 70-odd chars
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    return path


def plot_curve_grid(panels: dict, path: str, title: str = "") -> str:
    """One panel per task: ``panels`` maps a label to ``(curves, best)`` (``curves`` as for
    ``plot_curves``, ``best`` the cost the panel is normalised by). Draws each tuner's median
    best-so-far / ``best`` over seeds with an interquartile band, and the 95% line (1 / 0.95)."""
    from matplotlib.figure import Figure

    n = len(panels)
    cols = min(4, n)
    rows = -(-n // cols)
    fig = Figure(figsize=(3.2 * cols, 2.6 * rows), dpi=100)
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for ax, (label, (curves, best)) in zip(axes, panels.items(), strict=False):
        for name, runs in curves.items():
            m = max(len(r) for r in runs)
            arr = np.array([[c if math.isfinite(c) else np.nan for c in r] + [r[-1]] * (m - len(r))
                            for r in runs]) / best  # fmt: skip
            x = np.arange(1, m + 1)
            with np.errstate(all="ignore"):
                q1, med, q3 = np.nanpercentile(arr, [25, 50, 75], axis=0)
            ax.plot(x, med, label=name)
            ax.fill_between(x, q1, q3, alpha=0.2)
        ax.axhline(1 / 0.95, color="k", lw=0.6, ls="--")
        ax.set_yscale("log")
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes[n:]:
        ax.set_visible(False)
    axes[0].legend(fontsize=7)
    axes[0].set_ylabel("best so far / best")
    axes[min(n, len(axes)) - 1].set_xlabel("trials")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    return path


def plot_trials_to_target(
    medians: dict, trials: int, path: str, title: str = "", estimates: dict | None = None
) -> str:
    """:func:`trials_figure` saved to ``path``; returns ``path``."""
    trials_figure(medians, trials, title, estimates).savefig(path)
    return path


def trials_figure(medians: dict, trials: int, title: str = "", estimates: dict | None = None):
    """Per layer, each tuner's median trials to 95% of the best as a bar (logarithmic axis):
    ``medians`` maps a layer to ``{tuner: median}`` (``trials + 1`` where the median run
    missed: drawn to the cap, hatched, labelled ``>trials``); ``estimates`` maps a layer to
    random search's trials estimated from its samples (negative: a bound), drawn as a mark."""
    from matplotlib.figure import Figure

    layers = list(medians)
    names = list({n: None for r in medians.values() for n in r})
    width = 0.8 / max(len(names), 1)
    fig = Figure(figsize=(max(6.0, 0.7 * len(layers) + 2), 4), dpi=100)
    ax = fig.subplots()
    x = np.arange(len(layers))
    for k, name in enumerate(names):
        vals = [medians[layer].get(name, np.nan) for layer in layers]
        missed = [v > trials for v in vals]
        pos = x + (k - (len(names) - 1) / 2) * width
        bars = ax.bar(pos, [min(v, trials) for v in vals], width, label=name)
        for bar, miss in zip(bars, missed, strict=True):
            if miss:
                bar.set_hatch("//")
                bar.set_alpha(0.5)
                ax.annotate(f">{trials}", (bar.get_x() + bar.get_width() / 2, trials),
                            ha="center", va="bottom", fontsize=6)  # fmt: skip
    est = {i: estimates[layer] for i, layer in enumerate(layers) if layer in (estimates or {})}
    for bound, marker, what in ((False, "_", ""), (True, "^", ", at least")):
        pts = [(i, abs(e)) for i, e in est.items() if (e < 0) == bound]
        if pts:
            ax.scatter(*zip(*pts, strict=True), marker=marker, s=120, color="k", zorder=3,
                       label=f"random, estimated from its samples{what}")  # fmt: skip
    ax.set_yscale("log")
    ax.set_ylim(top=ax.get_ylim()[1] * 4)  # room for the legend above the bars
    ax.set_xticks(x, layers)
    ax.set_ylabel("median trials to 95% of the best")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_latency(run, path: str, unit: str = "cycles", title: str = "") -> str:
    """A budgeted run's (``tuner.budget.BudgetRun``) estimated network cost over tuning time,
    from 0 (the untuned network: ``BudgetRun.latency_curve``) as a step per improvement, with
    the budget (and the tuning's share of it, where re-rankings in the network had the rest:
    their spans shaded), the end of the first pass (every default measured) and each resumed
    session's start; returns ``path``."""
    from matplotlib.figure import Figure

    curve = run.latency_curve()
    _, n_est = run.baseline()
    scale, shown = (1e-6, "M cycles") if unit == "cycles" else (1e3, "ms")
    label = f"{shown} per inference"
    fig = Figure(figsize=(7, 4), dpi=100)
    ax = fig.subplots()
    if curve:
        t, c = zip(*curve, strict=True)
        t, c = [*t, max(t[-1], run.spent_s)], [*c, c[-1]]  # held to the run's end
        ax.step(np.array(t), np.array(c) * scale, where="post", color="k", label="best known")
        est = f", {n_est} layers estimated" if n_est else ""
        ax.axhline(curve[0][1] * scale, ls="--", color="gray", lw=0.8,
                   label=f"untuned network {curve[0][1] * scale:.4g} {shown}{est}")  # fmt: skip
        ax.set_title(title + f": {curve[0][1] / curve[-1][1]:.3f}x over the untuned network")
    else:
        ax.set_title(title)
    if run.first_pass_s is not None:
        ax.axvline(run.first_pass_s, ls="--", color="g", lw=0.8, label="every default measured")
    budget_s = run.budget_total_s or run.budget_s
    ax.axvline(budget_s, ls=":", color="r", lw=1.0, label="budget")
    if run.budget_total_s:
        ax.axvline(run.budget_s, ls=":", color="orange", lw=1.0, label="the tuning's share")
    for k, (a, b) in enumerate(run.in_network_s):
        ax.axvspan(a, b, color="tab:purple", alpha=0.15, lw=0,
                   label=None if k else "re-ranking in the network")  # fmt: skip
    for k, t in enumerate(run.session_starts_s[1:]):
        ax.axvline(t, ls="-.", color="b", lw=0.8, label=None if k else "a session resumed")
    ax.set_xlim(0, max(budget_s, run.spent_s) * 1.03)
    ax.legend(fontsize=8)
    ax.set_xlabel("tuning time (s, sessions end to end)")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    return str(path)


def plot_descent(reranks: list, path: str, title: str = "") -> str:
    """A coordinate descent in the network (``tuner.in_network.descend_in_network``), pass by
    pass: each confirmation's paired speed-up of the changed network over the default one
    (dots), the one whose layers the pass kept (a large marker; none where no network beat the
    default beyond its control) and each confirmation's control (the default built again: what
    no change measures, grey); returns ``path``."""
    from matplotlib.figure import Figure

    from pyvta.tuner.in_network_confirm import fastest

    fig = Figure(figsize=(6, 4), dpi=100)
    ax = fig.subplots()
    for n, rr in enumerate(reranks, 1):
        confs = rr.confirmations
        first = n == 1
        ax.scatter([n] * len(confs), [c.speedup for c in confs], s=12, color="tab:blue",
                   label="confirmations" if first else None)  # fmt: skip
        controls = [c.control for c in confs if c.control is not None]
        ax.scatter([n] * len(controls), controls, s=12, color="gray", marker="x",
                   label="their controls" if first else None)  # fmt: skip
        kept = fastest(confs)
        if kept is not None:
            ax.scatter([n], [kept.speedup], s=80, facecolors="none", edgecolors="tab:red",
                       label="kept" if first else None)  # fmt: skip
    ax.axhline(1.0, color="k", lw=0.6)
    ax.set_xticks(range(1, len(reranks) + 1))
    ax.set_xlabel("pass")
    ax.set_ylabel("network speed-up over the defaults (paired)")
    ax.set_title(title, fontsize=8 if len(title) > 60 else None)
    ax.grid(alpha=0.3)
    if any(rr.confirmations for rr in reranks):
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    return str(path)
