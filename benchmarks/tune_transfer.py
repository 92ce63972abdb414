"""Transfer learning: a global cost model trained on the tuning logs of ResNet-18 layers
C2-C6 (``--task vta``: the VTA conv2d template on the cycle model) or C1-C6 (``--task cpu``: the
CPU network's direct NCHWc conv template, ``nchwc:C1``.., measured) guides tuning of C7-C9,
compared with XGB from scratch and random search (AutoTVM paper, Fig. 10: 2x-10x fewer trials
to a given speed).

    .venv/bin/python benchmarks/tune_transfer.py                         # 3 seeds, 200 trials
    .venv/bin/python benchmarks/tune_transfer.py --source-log out/src.jsonl --cache out/tgt.jsonl
    .venv/bin/python benchmarks/tune_transfer.py --features knob,curve --seeds 5
    .venv/bin/python benchmarks/tune_transfer.py --task cpu --source-log out/cpu.jsonl \
        --cache out/cpu.jsonl --extra-logs tuner/pretuned/resnet18_224_cpu.jsonl
    .venv/bin/python benchmarks/tune_transfer.py --task cpu --sources none \
        --cache out/cpu.jsonl --extra-logs tuner/pretuned/mobilenet_224_cpu.jsonl

On the CPU a config's cost is the min of ``--repeats`` one-threaded runs timed by the thread's
CPU time (``tuner.cpu_measure.CpuBackend(timer="thread")``: steady on a shared machine), as
``benchmarks/tune_search.py --task cpu`` measures, so the two can share one ``--cache`` (its
C1-C6 records are then the source, its C7-C9 ones are reused: the scratch and random runs of
the same seeds, trials, batch, features and ``--trend`` are its ``xgb`` and ``random`` runs,
config for config), as measured then, not now: on a host that drifts, measure every method in
one sitting (a fresh ``--cache``; the judge's controls warn when the host drifted: Zen 1 C8
from a search's cache of the day before, controls 0.83x, the transfer runs measured in a faster
hour). ``--extra-logs``: more logs (other networks') whose records of the same template join the
source data, but for the targets' own (a network's log may hold them); with ``--sources none`` they are the only source (transfer from another network
alone).

1. Source: C2-C6 are tuned with XGB (``--source-trials`` each, ``--source-seed``) into
   ``--source-log``; a log that already holds them is reused (an unfinished one is resumed).
2. Targets (``--targets``, default C7,C8,C9), for each seed and each feature kind of
   ``--features``: ``scratch[f]`` (XGB-rank + SA, first batch random), ``transfer[f]`` (the same
   with the global model on the source log as ``base``), and ``random``. ``--trials`` each; pure
   search (the backend's analytic default is NOT measured first).
3. Per layer "best" is the best cost found by any method and seed. Printed: median over seeds
   of the trials to reach 95% (also 99%, 100%) of it; a run that never does counts as
   ``trials + 1`` (the median then says ``never`` if most runs missed, and ratios with such a
   median are lower bounds, marked ``>``). Ratios scratch/transfer and random/transfer.
4. How hard the target is: the share of the space within 95% (99%) of the best, estimated from
   the random-search samples (uniform, unbiased; invalid points count, since random search
   spends trials on them too) and from all distinct points measured (biased towards good ones).

Each distinct config of a target is measured once per benchmark run (the cycle model is
deterministic) and shared by all methods and seeds; ``--cache`` keeps these measurements in a
JSON-lines tuning log across runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path
from statistics import geometric_mean

import numpy as np

from pyvta.tuner.cli_support import layer_names
from pyvta.tuner.comparison import (
    LAYER_KINDS,
    add_cpu_comparison_arguments,
    add_search_arguments,
    confirmed_judge,
    run_seed,
)
from pyvta.tuner.log import read_records, training_data
from pyvta.tuner.measure import CachedMeasurer, Measurer, MinOfRepeats, repeat_stat
from pyvta.tuner.tune import equal_quality, judged_curve, trials_to_reach, tune

FRACS = (0.95, 0.99, 1.0)


def _load() -> str:
    """The machine's 1 / 5 / 15-minute load averages (it may be shared)."""
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def _median_hits(hits: list[int | None], n_trials: int) -> tuple[float, bool]:
    """Median over seeds with misses as ``n_trials + 1``; and whether it is only a lower bound
    (the median itself is a miss)."""
    vals = [h if h is not None else n_trials + 1 for h in hits]
    med = float(np.median(vals))
    return med, med > n_trials


def _fmt_med(med: float, censored: bool) -> str:
    if censored:
        return "never"
    return f"{med:.0f}" if med == int(med) else f"{med:.1f}"


KINDS = {n: k for n, k in LAYER_KINDS.items() if k.sources}  # --task


def _task(a, name: str):
    return KINDS[a.task].task(name)


def _measurers(a) -> tuple[Measurer, Measurer]:
    """``(raw, cached)``: the task's measurer, and the one shared by every target run."""
    kind = KINDS[a.task]
    raw = kind.measurer(a)
    cached = CachedMeasurer(raw, a.cache, keep_timeouts=True)
    return raw, MinOfRepeats(cached) if kind.cost_stat == "min" else cached


def _judge(a, meas: Measurer, task):
    """``index -> cost`` by which the table judges a CPU config (``--judge-stat`` of its
    repeats, ``tuner.measure.repeat_stat``), or None: the costs the search saw."""
    if not isinstance(meas, MinOfRepeats) or a.judge_stat == "min":  # judged as it was seen
        return None
    return repeat_stat(meas, task, a.judge_stat)


def _extra_data(logs: list[str], template, exclude: set) -> list:
    """Training data from other logs (other networks'): their tasks of ``template`` not in
    ``exclude`` (task keys)."""
    from pyvta.tuner.log import tasks_in_log

    out = []
    for log in logs:
        tasks = tasks_in_log(log, {template.name: template})
        data = [d for d in training_data(log, tasks) if d[0].key not in exclude]
        n = sum(len(d[1]) for d in data)
        print(f"  extra source {log}: {n} records of {len(data)} tasks of {template.name}")
        out += data
    return out


def _source_names(a) -> list[str]:
    """The source layers: ``--sources none`` leaves ``--extra-logs`` (other networks') alone."""
    return [] if a.sources.strip().lower() == "none" else layer_names(a.sources)


def _source(a, raw: Measurer) -> list:
    """Tune (or reuse) the source layers into ``a.source_log``; the training data."""
    names = _source_names(a)
    tasks = [_task(a, n) for n in names]
    for n, t in zip(names, tasks, strict=True):
        have = len({r.index for r in read_records(a.source_log, t)})
        if have >= a.source_trials:
            print(f"  source {n}: {have} records in {a.source_log} (reused)")
            continue
        t0 = time.perf_counter()
        derived = run_seed(a.source_seed, t)  # each source layer its own stream
        res = tune(
            t,
            a.source_trials,
            raw,
            tuner="xgb",
            batch_size=a.batch,
            seed=derived,
            log=a.source_log,
            resume=True,
            progress=False,
        )
        print(
            f"  source {n}: tuned xgb seed {a.source_seed} (run seed {derived}),"
            f" {len(res.history)} trials "
            f"({res.n_resumed} resumed), best {res.best_cost:.4g} {t.cost_unit}, "
            f"{time.perf_counter() - t0:.0f} s",
            flush=True,
        )
    data = training_data(a.source_log, tasks) if tasks else []
    if a.extra_logs:
        targets = [_task(a, n) for n in layer_names(a.targets)]
        # the sources' records are in already; a target's own records never train its model
        # (a whole network's log, ResNet-18's, holds C7-C9 too)
        own = {t.key for t in tasks + targets}
        data += _extra_data(a.extra_logs.split(","), targets[0].template, own)
    return data


def _plot(path: str, layers: dict, n_trials: int, unit: str = "cycles") -> None:
    from matplotlib.figure import Figure  # Agg canvas; no pyplot global state

    names = list(layers)
    fig = Figure(figsize=(5 * len(names), 4), dpi=100)
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    for ax, name in zip(axes, names, strict=True):
        info = layers[name]
        best = info["best"]
        for method, curves in info["curves"].items():
            arr = np.array([c + [c[-1]] * (n_trials - len(c)) for c in curves]) / best
            arr[~np.isfinite(arr)] = np.nan
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-invalid start: NaN
                med = np.nanmedian(arr, axis=0)
            x = np.arange(1, arr.shape[1] + 1)
            ax.plot(x, med, label=f"{method} (median of {len(curves)})")
        ax.axhline(1 / 0.95, color="grey", ls="--", lw=0.8, label="95% of best")
        ax.set_yscale("log")
        ax.set_xscale("log")
        ax.set_xlabel("trials")
        ax.set_ylabel(f"best-so-far {unit} / best")
        ax.set_title(f"{name}: best {best:.4g} {unit}")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


def _equal_quality_table(layers: dict, feats: list[str], n: int) -> None:
    """The speed-up at equal quality (``tuner.tune.equal_quality``), defined where 95% of the
    best is out of the budget's reach: per layer, the trials transfer needs to reach what
    scratch (and random search) reach in ``n``, against their own to the same level."""
    print(
        f"\nat equal quality: median trials to the reference's median best at trial {n}"
        f" (a miss counts as {n + 1}), and reference / transfer"
    )
    logs: dict = {}
    for name, info in layers.items():
        for f in feats:
            tr = f"transfer[{f}]"
            for ref in (f"scratch[{f}]", "random"):
                if ref not in info["curves"]:
                    continue
                eq = equal_quality(info["curves"], ref, n)
                shown = {m: f">{n}" if eq.median[m] > n else f"{eq.median[m]:g}" for m in (ref, tr)}
                print(
                    f"  {name:5s} level {eq.level / info['best']:.3f} of the best ({ref}):"
                    f" {ref} {shown[ref]} {eq.hits[ref]}, {tr} {shown[tr]} {eq.hits[tr]}"
                    f"  -> {eq.ratio(tr):.2f}x"
                )
                logs.setdefault((ref, tr), []).append(eq.ratio(tr))
    for (ref, tr), rs in logs.items():
        g = geometric_mean(rs)
        print(
            f"  geometric mean, {ref} / {tr} at {ref}'s level: {g:.2f}x (per layer {np.round(rs, 2)})"
        )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", choices=sorted(KINDS), default="vta")
    p.add_argument(
        "--sources",
        default=None,
        help="layers whose logs train the global model (default "
        + ", ".join(f"{k.sources} {k.name}" for k in KINDS.values())
        + "; none: --extra-logs alone, other networks' logs)",
    )
    p.add_argument("--targets", default="C7,C8,C9")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per target and method")
    p.add_argument("--trials", type=int, default=200, help="trials per target run")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--source-log", default="out/transfer_source.jsonl", dest="source_log")
    p.add_argument("--source-trials", type=int, default=200, dest="source_trials")
    p.add_argument("--source-seed", type=int, default=0, dest="source_seed")
    p.add_argument(
        "--features",
        default="knob",
        help="comma list of knob,curve,curve+knob,context,context+knob (XGB features)",
    )
    p.add_argument("--no-random", action="store_true", dest="no_random")
    p.add_argument(
        "--build-timeout",
        type=float,
        default=300.0,
        help="seconds one candidate's lowering may take (a failed trial after that; kept as"
        " such in --cache): tiny-tile configs far from the optimum lower for 10-30 s",
    )
    p.add_argument("--cache", default=None, help="JSON-lines log of target measurements to reuse")
    p.add_argument(
        "--extra-logs",
        default=None,
        dest="extra_logs",
        help="comma list of more tuning logs (other networks') for the global model",
    )
    add_cpu_comparison_arguments(p)  # --repeats, --timer, ..., --judge-stat
    add_search_arguments(p)  # --trend
    p.add_argument("--plot", default="out/tune_transfer.png", help="PNG of median curves")
    p.add_argument("--json", default=None, help="write curves and the table here")
    a = p.parse_args(argv)
    a.sources = a.sources or KINDS[a.task].sources
    if not _source_names(a) and not a.extra_logs:
        p.error("--sources none needs --extra-logs: the global model has nothing else to learn")

    from pyvta.tuner.features import make_featurizer
    from pyvta.tuner.model import global_model

    t_all = time.perf_counter()
    feats = [f.strip() for f in a.features.split(",") if f.strip()]
    seeds = list(range(a.seeds))
    targets = layer_names(a.targets)
    what = KINDS[a.task].what
    print(
        f"{what}; sources {a.sources} -> targets {','.join(targets)}; "
        f"{a.trials} trials, batch {a.batch}, seeds {seeds}, features {feats}; "
        f"load average {_load()}"
    )
    raw, meas = _measurers(a)
    layers: dict = {}
    try:
        t0 = time.perf_counter()
        data = _source(a, raw)
        target_keys = {_task(a, n).key for n in targets}
        data = [d for d in data if d[0].key not in target_keys]  # never train on a target
        n_rec = sum(len(d[1]) for d in data)
        src_s = time.perf_counter() - t0
        print(f"source: {n_rec} records of {len(data)} layers ({src_s:.0f} s)")
        if not data:
            print("no source records of the targets' template to train on", file=sys.stderr)
            return 2
        # one featurizer per kind, shared by every model (IR features are cached per point)
        featurizers = {f: make_featurizer(f) for f in feats}
        bases = {}
        for f in feats:
            t0 = time.perf_counter()
            for seed in seeds:
                bases[(f, seed)] = global_model(data, featurizer=featurizers[f], seed=seed)
            print(f"global models [{f}]: {time.perf_counter() - t0:.1f} s")

        methods = []
        for f in feats:
            methods += [(f"scratch[{f}]", f, False), (f"transfer[{f}]", f, True)]
        if not a.no_random:
            methods.append(("random", None, False))
        for name in targets:
            task = _task(a, name)
            print(f"\n{name} {task.key}: {task.space}; load average {_load()}", flush=True)
            histories: dict[str, list] = {m: [] for m, _, _ in methods}
            judge = _judge(a, meas, task)
            random_pts: list[int] = []
            for seed in seeds:
                derived = run_seed(seed, task)  # seed s draws its own stream on each target
                print(f"  seed {seed}: run seed {derived}")
                for m, f, transfer in methods:
                    t0 = time.perf_counter()
                    kw = {}
                    if f is not None:
                        kw["featurizer"] = featurizers[f]
                        if a.trend is not None:
                            kw["trend"] = a.trend
                        if transfer:
                            kw["base"] = bases[(f, seed)]
                    res = tune(
                        task,
                        a.trials,
                        meas,
                        tuner="random" if f is None else "xgb",
                        batch_size=a.batch,
                        seed=derived,
                        progress=False,
                        **kw,
                    )
                    histories[m].append(res.history)
                    if f is None:
                        random_pts += [i for _, i, _ in res.history]
                    print(
                        f"  seed {seed} {m:18s} best {res.best_cost:10.4g} "
                        f"({res.n_errors} invalid, {time.perf_counter() - t0:5.0f} s; "
                        f"measured so far {meas.n_measured})",
                        flush=True,
                    )
            if a.confirm:
                stat = a.judge_stat if judge is not None else None
                judge = confirmed_judge(task, meas, histories, judge, stat, a.confirm)
            curves = {m: [judged_curve(h, judge) for h in runs] for m, runs in histories.items()}
            costs = meas.costs(task)
            if judge is not None:
                costs = {i: judge(i) for i in costs}
            best = min(min(c[-1] for c in runs) for runs in curves.values())
            layers[name] = {
                "best": best,
                "curves": curves,
                "space": task.space.size,
                "unit": task.cost_unit,
                "measured": costs,
                "random_pts": random_pts,
            }
    finally:
        meas.close()

    # ---- the table
    n = a.trials
    print(
        f"\ntrials to reach X% of the best (median over {len(seeds)} seeds; a run that never "
        f"reaches it counts as {n + 1}; 'never' = the median run missed)"
    )
    print(
        f"{'layer':5s} {'method':18s} {'to95%':>6s} {'to99%':>6s} {'to100%':>6s}"
        f"  {'final/best (median)':>19s}  per-seed to95%"
    )
    summary = {}
    for name, info in layers.items():
        best = info["best"]
        meds = {}
        for m, runs in info["curves"].items():
            row = []
            for frac in FRACS:
                hits = [trials_to_reach(c, best / frac) for c in runs]
                meds[(m, frac)] = (_median_hits(hits, n), hits)
                row.append(_fmt_med(*meds[(m, frac)][0]))
            final = float(np.median([c[-1] / best for c in runs]))
            per = [h if h is not None else "never" for h in meds[(m, 0.95)][1]]
            print(f"{name:5s} {m:18s} {row[0]:>6s} {row[1]:>6s} {row[2]:>6s}  {final:19.4f}  {per}")
        summary[name] = meds
    print(
        "\nratios of median trials (to95% / to99% / to100%); '>' = lower bound (the other "
        "method's median missed), '?' = undefined (transfer's median missed)"
    )
    ratio_log = {}
    for name, meds in summary.items():
        for f in feats:
            tr = f"transfer[{f}]"
            for other in (f"scratch[{f}]", "random"):
                if (other, 0.95) not in meds:
                    continue
                parts = []
                for frac in FRACS:
                    (mo, co), _ = meds[(other, frac)]
                    (mt, ct), _ = meds[(tr, frac)]
                    r = mo / mt
                    mark = ">" if co and not ct else ("?" if ct else "")
                    parts.append(f"{mark}{r:.2f}x")
                    ratio_log.setdefault((f, other.split("[")[0], frac), []).append(r)
                print(f"  {name:5s} {other:14s} / {tr:16s}: {' / '.join(parts)}")
    if len(summary) > 1:
        print("  geometric mean over layers:")
        for (f, other, frac), rs in sorted(ratio_log.items()):
            if frac == 0.95:
                g = geometric_mean(rs)
                print(f"    {other}/transfer[{f}] to95%: {g:.2f}x  (per layer {np.round(rs, 2)})")

    _equal_quality_table(layers, feats, n)

    print("\nhow hard is 95% of best? share of the space within X% of the per-layer best")
    print(
        f"{'layer':5s} {'space':>6s} {'best':>9s}  {'random sample: n, in95%, in99%':>32s}"
        f"  {'all measured: n, valid, in95%, in99%':>38s}  1/share95 (random)"
    )
    for name, info in layers.items():
        best, costs = info["best"], info["measured"]
        rc = np.array([costs[i] for i in info["random_pts"]], dtype=np.float64)
        allc = np.array(list(costs.values()), dtype=np.float64)
        r95, r99 = (float(np.mean(rc <= best / f)) if rc.size else math.nan for f in (0.95, 0.99))
        a95, a99 = (int(np.sum(allc <= best / f)) for f in (0.95, 0.99))
        valid = int(np.sum(np.isfinite(allc)))
        inv = f"{1 / r95:.0f}" if r95 > 0 else "inf"
        print(
            f"{name:5s} {info['space']:6d} {best:9.4g}  "
            f"{f'{rc.size}, {r95:.2%}, {r99:.2%}':>32s}  "
            f"{f'{allc.size}, {valid}, {a95} ({a95 / allc.size:.1%}), {a99}':>38s}  {inv}"
        )
    wall = time.perf_counter() - t_all
    print(
        f"\ndistinct target configs: {len(meas.cache)} ({meas.n_measured} measured in this run, "
        f"the rest from --cache); wall {wall:.0f} s ({wall / 60:.1f} min); load average {_load()}"
    )
    if a.plot:
        Path(a.plot).parent.mkdir(parents=True, exist_ok=True)
        _plot(a.plot, layers, n, next(iter(layers.values()))["unit"] if layers else "cycles")
        print(f"curves: {a.plot}")
    if a.json:
        out = {
            name: {
                "best": info["best"],
                "space": info["space"],
                "curves": info["curves"],
            }
            for name, info in layers.items()
        }
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out, default=float))
        print(f"json: {a.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
