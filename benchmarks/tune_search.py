"""Search comparison: XGB-rank + SA vs random vs GA (and optionally XGB regression), best-so-far
curves over several seeds, and trials needed to reach 95% of the best cost found by any run.

    .venv/bin/python benchmarks/tune_search.py                     # synthetic GEMM, ~1 min
    .venv/bin/python benchmarks/tune_search.py --task gemm         # CPU GEMM 512^3, a few min
    .venv/bin/python benchmarks/tune_search.py --task vta --layer C6   # VTA cycle model, ~2 min
    .venv/bin/python benchmarks/tune_search.py --task gemm --trials 200 --seeds 5 --plot s.png
    .venv/bin/python benchmarks/tune_search.py --task vta --layer C7-C12 --trials 48 --batch 8 \
        --seeds 5 --build-timeout 4 --cache out/vta.jsonl --plot vta.png --grid-plot
    .venv/bin/python benchmarks/tune_search.py --task cpu --layer C12 --seeds 10 --cost-stat min
        # the CPU network's direct NCHWc conv template (nchwc:C12), one thread timed by its
        # CPU time (--timer thread, the default: steady on a shared machine)
    .venv/bin/python benchmarks/tune_search.py --task cpu --layer C4 --trials 128 --batch 8 \
        --seeds 5 --repeats 3 --run-workers 2 --trend 0 --cache c4.jsonl --confirm 16
        # docs/measurements.md's Zen 1 table: each config judged by the median of its repeats, the 16
        # best measured 3 more times before the runs are judged (--confirm)
    .venv/bin/python benchmarks/tune_search.py --from-summaries S1.json S2.json ...
        # measures nothing: the table of sittings whose figures --summary S.json kept (a layer
        # may have several: the rule combines them by the geometric mean of their ratios)

Each distinct config is measured once per benchmark run and the cost is shared by all tuners
and seeds (same noise for everyone, fewer measurements); ``--cache LOG`` keeps them across runs.
When the cache holds every point of the space (``benchmarks/vta_space_census.py``), "best" is the
true optimum and random search's trials to 95% are also given exactly. The VTA task is the conv2d template on
a ResNet-18 layer, costed by the simulator's cycle model (deterministic, noise-free).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from pyvta.tuner.comparison import confirmed_judge
from pyvta.tuner.measure import (
    REPEAT_STATS,
    CachedMeasurer,
    InProcessMeasurer,
    MinOfRepeats,
    repeat_stat,
)
from pyvta.tuner.search_summary import sitting_summary, summarize_sittings, summary_table
from pyvta.tuner.synthetic import SyntheticBackend, tiled_gemm_task
from pyvta.tuner.tune import equal_quality, judged_costs, judged_curve, trials_to_reach, tune


def _load() -> str:
    """The machine's 1 / 5 / 15-minute load averages (it may be shared)."""
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def make_search(name: str, task, seed: int, batch: int, trend: float | None = None):
    """``(tuner, initial configs)`` for a ``--tuners`` entry: ``xgb`` (the task's default
    features; ``trend``: the linear trend's weight, None: ``make_tuner``'s default),
    ``xgb-knob`` / ``xgb-curve`` / ``xgb-context`` / ``xgb-context+knob`` (those features),
    ``xgb+prior`` (the first batch is the backend's most promising candidates, ``task.prior``,
    as ``pyvta tune`` measures by default, instead of random points), ``xgb-reg``, ``random``,
    ``ga``."""
    from pyvta.tuner.tuners import make_tuner

    prior = name.endswith("+prior")
    base = name.removesuffix("+prior")
    kind, _, feats = base.partition("-")
    kw = {"features": feats} if kind == "xgb" and feats not in ("", "reg") else {}
    if kind == "xgb" and trend is not None:
        kw["trend"] = trend
    tuner = make_tuner("xgb-reg" if base == "xgb-reg" else kind, task, seed, batch, **kw)
    initial = task.prior(batch) if prior else ()
    if prior and not initial:
        raise SystemExit(f"{name}: {task.name} has no analytic prior (prior_fn)")
    return tuner, initial


def run_one(name: str, task, seed: int, trials: int, batch: int, meas, trend=None):
    """``(TuneResult, run seed)`` of tuner ``name`` for seed ``seed`` on ``task``: every random
    draw (random's points, GA's first generation, the model's first batch and its SA) comes
    from ``run_seed(seed, task)``, so the seeds of one layer are independent of another's."""
    from pyvta.tuner.comparison import run_seed

    derived = run_seed(seed, task)
    tuner, initial = make_search(name, task, derived, batch, trend)
    res = tune(
        task,
        trials,
        meas,
        tuner=tuner,
        batch_size=batch,
        seed=derived,
        progress=False,
        initial=initial,
    )
    return res, derived


def compare(
    task,
    meas,
    tuner_names,
    trials: int,
    batch: int,
    seeds: int,
    plot=None,
    trend=None,
    judge_stat: str | None = None,
    confirm: int = 0,
) -> dict:
    """Run every tuner for every seed on ``task`` through ``meas``; print the curves' summary
    and trials to 95%; return the median trials to 95% per tuner (``trials + 1``: missed),
    with ``"random (exact)"`` when ``meas`` knows every point of the space. ``judge_stat``
    (``"median"``/``"min"``, None: the costs the search saw): the statistic of each config's
    repeats the summary judges it by. The fastest of 3 repeats can be one taken in a moment the
    host ran faster: Zen 1 C6's fastest config by the minimum had repeats 1.14, 1.00 and 1.15
    of it, and 125 configs lay within 95% of the best median, none within 95% of that minimum.
    ``confirm``: before judging, measure the ``confirm`` best configs of all runs 3 more times
    in one sitting and judge them by the median of their costs
    (``tuner.comparison.confirmed_judge``)."""
    print(f"\ntask {task.key}: {task.space}; load average {_load()}")
    from pyvta.tuner.tuners import default_trend

    w = default_trend(task) if trend is None else trend
    print(f"{trials} trials, batch {batch}, seeds 0..{seeds - 1}; xgb linear-trend weight {w:g}")
    judge = None if judge_stat is None else repeat_stat(meas, task, judge_stat)
    if judge is not None:
        print(f"configs judged by the {judge_stat} of their repeats (the search saw another cost)")
    tuner_s: dict[str, float] = {}
    t_all = time.perf_counter()
    n_before = meas.n_measured
    histories: dict[str, list[list]] = {name: [] for name in tuner_names}
    for seed in range(seeds):  # seeds outermost: a run stopped early has whole seeds
        for name in tuner_names:
            t0 = time.perf_counter()
            res, derived = run_one(name, task, seed, trials, batch, meas, trend)
            histories[name].append(res.history)
            tuner_s[name] = tuner_s.get(name, 0.0) + time.perf_counter() - t0
            judged = ""
            if judge is not None:
                judged = f" (by the {judge_stat}: {judged_curve(res.history, judge)[-1]:.6g})"
            print(
                f"  {name:8s} seed {seed} (run seed {derived}): best {res.best_cost:.6g}"
                f" {task.cost_unit}{judged} "
                f"({res.n_errors} errors; {time.perf_counter() - t0:.0f} s,"
                f" {meas.n_measured - n_before} distinct configs measured so far)",
                flush=True,
            )
    if confirm:
        judge = confirmed_judge(task, meas, histories, judge, judge_stat, confirm)
    curves = {n: [judged_curve(h, judge) for h in runs] for n, runs in histories.items()}
    # every cost each tuner measured, its seeds pooled
    samples = {
        n: [c for h in runs for c in judged_costs(h, judge)] for n, runs in histories.items()
    }
    best = min(min(c[-1] for c in runs) for runs in curves.values())
    known = meas.costs(task)
    if judge is not None:
        known = {i: judge(i) for i in known}
    exact = len(known) == len(task.space)
    if exact:  # every point measured: the true optimum, and random search's exact odds
        best = min(known.values())
    target = best / 0.95
    print(
        f"\nbest cost {'of the whole space' if exact else 'over all runs'}: {best:.6g} "
        f"{task.cost_unit}; distinct configs measured in this run: {meas.n_measured - n_before};"
        f" wall {time.perf_counter() - t_all:.1f} s; load average {_load()}"
    )
    checks = [c for c in (16, 32, 64, 128, 256, 512, 1024) if c <= trials]
    print("\nbest-so-far / best (mean over seeds) at trials " + ", ".join(map(str, checks)))
    medians, at, run_hits = {}, {}, {}
    for name, runs in curves.items():
        arr = np.array([r + [r[-1]] * (trials - len(r)) for r in runs]) / best
        row = "  ".join(f"{arr[:, c - 1].mean():6.3f}" for c in checks)
        at[name] = {c: float(arr[:, c - 1].mean()) for c in checks}
        hits = [trials_to_reach(r, target) for r in runs]
        hits99 = [trials_to_reach(r, best / 0.99) for r in runs]
        # a run that never reaches the target counts as trials + 1 (a median of those is ">")
        med = float(np.median([h if h is not None else trials + 1 for h in hits]))
        medians[name] = med
        run_hits[name] = hits
        shown = f">{trials}" if med > trials else f"{med:g}"
        print(
            f"  {name:8s} {row}   trials to 95%: {hits} (median {shown})   to 99%: {hits99}"
            f"   search+measure time {tuner_s[name]:.1f} s"
        )
    if exact:
        from pyvta.tuner.tuners import random_hit_trials

        k = sum(c <= target for c in known.values())
        mean, med = random_hit_trials(len(known), k)
        medians["random (exact)"] = med
        print(
            f"  random search, exact: {k} of {len(known)} points within 95%; "
            f"median {med} trials, mean {mean:.1f}"
        )
    elif "random" in samples:
        medians["random (sampled)"] = _sampled_random_trials(samples["random"], target)
        if not all(np.isfinite(samples["random"])):  # it paid for points that do not lower
            medians["random (valid)"] = _sampled_random_trials(
                [c for c in samples["random"] if math.isfinite(c)], target, "valid"
            )
    base_name = "random (exact)" if exact else "random"
    base = medians.get(base_name)
    if base is not None:
        for name, med in medians.items():
            if name.startswith("random"):
                continue
            bound = ">=" if base > trials and not exact else ""
            note = " (lower bound: random missed)" if bound else ""
            if med > trials:
                print(f"  {base_name} / {name} median trials to 95%: n/a ({name} missed)")
            else:
                print(
                    f"  {base_name} / {name} median trials to 95%: {bound}{base / med:.2f}x{note}"
                )
    if "random" in curves:
        medians["at random's level"] = _equal_quality(curves, trials, best, task.cost_unit)
    if plot:
        from pyvta.tuner.plot import plot_curves

        plot_curves(curves, plot, title=task.key, unit=task.cost_unit, best=best)
        print(f"curves: {plot}")
    medians["best"] = best
    medians["hits"] = run_hits  # each run's trials to 95% (None: missed)
    medians["at"] = at
    medians["curves"] = curves
    return medians


def _equal_quality(curves: dict, trials: int, best: float, unit: str) -> dict:
    """Trials each tuner needs to reach what random search reaches in ``trials``
    (``tuner.tune.equal_quality``), and random's own to the same level. Printed; returned as
    name -> median trials (``trials + 1``: missed)."""
    eq = equal_quality(curves, "random", trials)
    print(
        f"\ntrials to random's median best at trial {trials} ({eq.level:.6g} {unit},"
        f" {eq.level / best:.3f} of the best), and random's / each one's median:"
    )
    for name, med in eq.median.items():
        shown = f">{trials}" if med > trials else f"{med:g}"
        ratio = "" if name == "random" else f"   random / {name}: {eq.ratio(name):.2f}x"
        print(f"  {name:8s} {eq.hits[name]} (median {shown}){ratio}")
    return eq.median


def _sampled_random_trials(costs, target: float, kind: str = "uniform") -> float:
    """Random search's median trials to ``target``, estimated from its own measurements (all
    seeds pooled: a uniform sample of the space, failed points included, as random search pays
    for them too; ``kind="valid"``: only its points that lowered, a uniform sample of those,
    i.e. random search that skips points known not to fit, as the model's search does): with a
    share ``p`` of them at ``target`` or better, ``ln 0.5 / ln(1 - p)`` draws. None of ``n``
    there: a lower bound, ``ln 2 x n`` (the median for ``p = 1 / n``), returned negative so
    that the table marks it ``>``. Printed with its count."""
    c = np.asarray(costs, dtype=np.float64)
    n, k = c.size, int(np.sum(c <= target))
    if k:
        est = max(1.0, math.log(0.5) / math.log1p(-k / n)) if k < n else 1.0
        shown = f"{est:.0f}"
    else:
        est = -math.log(2) * n
        shown = f">{-est:.0f}"
    print(
        f"  random search, estimated from its {n} {kind} samples: {k} within 95% of the best"
        f" (share {k / n:.3%}): median about {shown} trials"
    )
    return est


def main(argv=None) -> int:
    from pyvta.tuner.comparison import (
        LAYER_KINDS,
        add_cpu_comparison_arguments,
        add_search_arguments,
    )

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--task",
        choices=["synthetic", "gemm", *LAYER_KINDS],
        default="synthetic",
        help="ResNet-18 layers: "
        + "; ".join(f"{k.name}: {k.what} ({k.prefix}C1..)" for k in LAYER_KINDS.values()),
    )
    p.add_argument(
        "--layer", default="C6", help="ResNet-18 layer(s) for --task vta: C6, C5,C8 or C2-C12"
    )
    p.add_argument("--shape", default=None, help="M,N,K (default 256,256,256 / 512,512,512)")
    p.add_argument("--trials", type=int, default=None, help="default 256 synthetic, 64 gemm")
    p.add_argument("--batch", type=int, default=None, help="default 32 synthetic, 16 gemm")
    p.add_argument("--seeds", type=int, default=None, help="default 5 synthetic, 3 gemm")
    p.add_argument(
        "--tuners",
        default="xgb,random,ga",
        help="comma list of xgb, xgb-knob, xgb-curve, xgb-context, xgb+prior (vta), xgb-reg, random, ga",
    )
    p.add_argument(
        "--plot",
        default=None,
        help="PNG of the best-so-far curves (several layers: one PNG each, the layer appended);"
        " with --from-summaries, of each sitting's median trials to 95%",
    )
    p.add_argument(
        "--cache",
        default=None,
        help="tuning log of measurements to reuse and extend (e.g. benchmarks/vta_space_census.py's)",
    )
    p.add_argument(
        "--build-timeout",
        type=float,
        default=120.0,
        help="seconds one VTA or CPU candidate's build may take; one that outlasts it is a failed"
        " trial (kept as such in --cache). CPU: a few configs of the direct NCHWc space unroll"
        " into minutes of lowering. VTA: lowering time grows with the instruction count, so"
        " only tiny-tile configs far from the optimum take long (C6: 10-30 s for 1-9 M cycles,"
        " the optimum 0.46 M cycles lowers in 0.1 s)",
    )
    add_cpu_comparison_arguments(p)  # --repeats, --timer, ..., --judge-stat
    p.add_argument(
        "--cost-stat",
        choices=REPEAT_STATS,
        default=None,
        help="a config's cost from its repeats (min: steadier on a loaded machine; the default"
        " for --task cpu, median for the others)",
    )
    p.add_argument(
        "--grid-plot",
        action="store_true",
        help="with several layers: one PNG (--plot) with a panel per layer, costs / best",
    )
    add_search_arguments(p)  # --trend
    p.add_argument(
        "--summary",
        default=None,
        metavar="JSON",
        help="also keep each layer's figures in JSON (a list, one summary per layer), as"
        " --from-summaries reads them",
    )
    p.add_argument(
        "--from-summaries",
        nargs="+",
        default=None,
        metavar="JSON",
        help="measure nothing: the table of sittings kept with --summary (one or more per"
        " layer; a layer's several sittings combined by the geometric mean of their ratios)",
    )
    a = p.parse_args(argv)
    if a.from_summaries:
        print(summarize_sittings(a.from_summaries, a.plot))
        return 0

    kind = LAYER_KINDS.get(a.task)  # None: the synthetic or GEMM task
    if a.cost_stat is None:
        a.cost_stat = kind.cost_stat if kind else "median"
    gemm = a.task == "gemm"
    shape = tuple(
        int(v) for v in (a.shape or ("512,512,512" if gemm else "256,256,256")).split(",")
    )
    trials = a.trials or (256 if a.task == "synthetic" else 64)
    batch = a.batch or (32 if a.task == "synthetic" else 16)
    seeds = a.seeds or (5 if a.task == "synthetic" else 3)
    names = a.tuners.split(",")
    if kind is not None:
        from pyvta.tuner.cli_support import layer_names

        tasks = {name: kind.task(name) for name in layer_names(a.layer)}
        inner = kind.measurer(a, a.cost_stat)
    elif gemm:
        from pyvta.tuner.cpu import gemm_task
        from pyvta.tuner.cpu_measure import CpuBackend, cpu_target_info
        from pyvta.tuner.measure import LocalMeasurer

        tasks = {"gemm": gemm_task(*shape)}
        inner = LocalMeasurer(CpuBackend(min_repeat_ms=5.0), repeats=3)
        print(f"host: {cpu_target_info()}")
    else:
        tasks = {"synthetic": tiled_gemm_task(*shape)}
        inner = InProcessMeasurer(SyntheticBackend(), repeats=1)
    # a layer's build that timed out is kept (it would time out again)
    meas = CachedMeasurer(inner, a.cache, keep_timeouts=kind is not None)
    if a.cost_stat == "min":
        meas = MinOfRepeats(meas)
    rows = {}
    try:
        for label, task in tasks.items():
            plot = a.plot
            if a.grid_plot:
                plot = None
            elif plot and len(tasks) > 1:
                stem = Path(plot)
                plot = str(stem.with_name(f"{stem.stem}_{label}{stem.suffix}"))
            judge = None if a.judge_stat == a.cost_stat else a.judge_stat
            rows[label] = compare(
                task, meas, names, trials, batch, seeds, plot, a.trend, judge, a.confirm
            )
    finally:
        meas.close()
        if a.summary and rows:  # the layers that finished, also when one failed
            kept = [
                sitting_summary(label, tasks[label], row, trials, batch, seeds)
                for label, row in rows.items()
            ]
            Path(a.summary).write_text(json.dumps(kept, indent=1) + "\n")
            print(f"summary: {a.summary}")
    if a.plot and a.grid_plot and rows:
        from pyvta.tuner.plot import plot_curve_grid

        panels = {
            f"{label} ({len(tasks[label].space):,} points)": (r["curves"], r["best"])
            for label, r in rows.items()
        }
        title = f"{a.task}: best-so-far / best, median and quartiles of {seeds} seeds"
        print(f"curves: {plot_curve_grid(panels, a.plot, title)}")
    if len(rows) > 1 and ("random" in names or all("random (exact)" in r for r in rows.values())):
        print(f"\nmedian trials to 95% of the optimum, {seeds} seeds\n")
        sizes = {label: len(task.space) for label, task in tasks.items()}
        print(summary_table(rows, names, trials, sizes))
    return 0 if all(math.isfinite(r["best"]) for r in rows.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
