"""Cost models compared offline, on the measurements a sitting kept (a pool replay).

A sitting of ``benchmarks/tune_search.py`` (``--cache LOG``) measures a few thousand configs of
one layer; ``benchmarks/results/`` keeps them. Here each search picks only among those configs
(the pool), each pick costing what the sitting measured for it, so a model variant is compared
with random picking in seconds and over many seeds, instead of an hour of measuring per layer:

- ``random``: the pool in a random order;
- a model (``tune_search.make_search``'s names: ``xgb``, ``xgb-knob``, ``xgb-context``,
  ``xgb-reg``, ...; ``@key=value`` after one changes its model: ``rounds`` (boosting
  rounds), ``trend`` (the linear trend's weight) or an XGBoost parameter, e.g.
  ``xgb@rounds=200@max_depth=6``): the first batch random, then each batch
  the unpicked configs the model (fitted on every pick so far, as ``ModelTuner`` fits it)
  scores highest, ``--eps`` of it at random.

Each pick's cost is what the search saw (the fastest of its repeats, as ``tune_search``'s CPU
task); a run is judged by the median of the repeats, and reaches 95% at the first trial whose
best is within 95% of the pool's best. Beside each model's median trials to 95% (and each seed's),
the geometric mean over its runs of their best at 16, 32, 64 and 128 trials over the pool's best
(less spread between seeds). The pool holds what the sitting's tuners picked (many near
the best: the model's and GA's picks), so random picking from it is much faster than from the
space: the figures rank models, they are not the sitting's trials to 95%, which only a sitting
measures. No searching of the space (SA), no points the space refuses.

``--pool random`` keeps only the configs the sitting's random search drew (its runs replayed
on the logged costs, ``--sitting SEEDS,TRIALS,BATCH``: the kept sittings' 5,128,8): a uniform
sample of the space, its bad configs included, so a model's steering away from them shows. On
C2's and C6's 640 such configs random / model came out near the sittings' own ratio (2.49x and
2.74x at 40 seeds; the sittings, every layer by the rule: 2.68x), where the whole pool gives
1.23x and 1.76x.

    .venv/bin/python benchmarks/model_replay.py benchmarks/results/zen5/C2_ga.jsonl.gz \\
        --models xgb,xgb-reg,xgb@max_depth=6 --seeds 40 --trials 128 --batch 8
"""

from __future__ import annotations

import argparse
import gzip
import math
import shutil
import tempfile
import time
from pathlib import Path
from statistics import geometric_mean

import numpy as np

from pyvta.tuner.measure import result_stat
from pyvta.tuner.tune import trials_to_reach

QUALITY = 0.95  # a run reaches the pool's best at this share of its speed
SLOWDOWN_AT = (16, 32, 64, 128)  # trials at which the runs' best so far is printed


def _slowdown(curves, k: int, best: float) -> float:
    """Geometric mean over the runs of their best at trial ``k`` over the pool's best (1: every
    run has found it; less spread between seeds than trials to 95%)."""
    return float(np.exp(np.mean([np.log(c[min(k, len(c)) - 1] / best) for c in curves])))


def pools(log: str, templates: dict | None = None, random_of=None) -> list[tuple]:
    """``(task, indices, seen, judged)`` per task of ``log`` (JSON lines, or gzipped as
    ``benchmarks/results`` keeps them; of ``templates``, default the tuner's,
    ``tuner.task.known_templates``): each
    config's first record, the fastest of its repeats (what the search saw; ``inf`` if it
    failed) and their median (what it is judged by). ``random_of=(seeds, trials, batch)``:
    only the configs the sitting's random search drew (:func:`random_draws`), a uniform
    sample of the space."""
    if str(log).endswith(".gz"):
        with tempfile.TemporaryDirectory() as tmp:
            plain = Path(tmp) / Path(log).stem
            with gzip.open(log, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst)
            return pools(str(plain), templates, random_of)
    from pyvta.tuner.log import read_records, tasks_in_log
    from pyvta.tuner.task import known_templates

    out = []
    for task in tasks_in_log(log, templates or known_templates()):
        first = {}
        for r in read_records(log, task):
            first.setdefault(r.index, r.result)
        if random_of is not None:
            drawn = random_draws(task, first, *random_of)
            first = {i: first[i] for i in dict.fromkeys(drawn)}
        idx = np.fromiter(first, np.int64, len(first))
        seen = np.array([result_stat(m, "min") for m in first.values()])
        judged = np.array([result_stat(m, "median") for m in first.values()])
        out.append((task, idx, seen, judged))
    return out


class _PoolMeasurer:
    """What the sitting measured for each config (its first record); a config it never
    measured is an error: the replay measures nothing."""

    how = ""

    def __init__(self, results: dict):
        self.results = results

    def measure(self, task, configs, callback=None):
        missing = [c.index for c in configs if c.index not in self.results]
        if missing:
            raise SystemExit(
                f"--pool random: the log has no record of config {missing[0]} of {task.key}, which"
                " the sitting's random search drew: other --sitting-seeds/-trials/-batch?"
            )
        out = [self.results[c.index] for c in configs]
        for k, r in enumerate(out):
            if callback is not None:
                callback(k, r)
        return out


def random_draws(task, results: dict, seeds: int, trials: int, batch: int) -> list[int]:
    """The configs ``tune_search.py``'s random search drew on ``task`` in a sitting of
    ``seeds`` seeds, ``trials`` trials and batches of ``batch`` (its runs again, on the costs the
    sitting measured, ``results``: random search's draws do not depend on them)."""
    from tune_search import run_one

    drawn = []
    for seed in range(seeds):
        res, _ = run_one("random", task, seed, trials, batch, _PoolMeasurer(results))
        drawn += [i for _, i, _ in res.history]
    return drawn


class PoolFeatures:
    """A featurizer's rows of a pool's configs, computed once for every run on the pool (the
    context features of a space of 10^9 points are computed per call)."""

    def __init__(self, inner, task, idx: np.ndarray):
        self.inner, self.name = inner, inner.name
        self.rows = inner(task, idx)
        self.at = {int(i): k for k, i in enumerate(idx)}

    def __call__(self, task, indices) -> np.ndarray:
        return self.rows[[self.at[int(i)] for i in np.asarray(indices).reshape(-1)]]


_POOL_FEATURES: dict[tuple[str, str], PoolFeatures] = {}  # (task, featurizer) -> its rows


def make_model(name: str, task, seed: int, batch: int, trend: float, idx: np.ndarray):
    """The cost model ``name`` (see the module docstring) would search with, its features of
    the pool ``idx`` computed once."""
    from tune_search import make_search

    base, *settings = name.split("@")
    pairs = [s.partition("=") for s in settings]
    for key, eq, value in pairs:
        if not eq:
            raise SystemExit(f"{name}: @{key} (allowed: @KEY=VALUE)")
        if key == "trend":
            trend = float(value)
    model = make_search(base, task, seed, batch, trend)[0].model
    if pairs and not hasattr(model, "params"):
        raise SystemExit(f"{name}: only an XGBoost model takes @KEY=VALUE")
    key = (task.key, model.featurizer.name)
    if key not in _POOL_FEATURES:
        _POOL_FEATURES[key] = PoolFeatures(model.featurizer, task, idx)
    model.featurizer = _POOL_FEATURES[key]
    for key, _, value in pairs:
        if key == "rounds":
            model.num_rounds = int(value)
        elif key != "trend":
            model.params[key] = float(value) if "." in value else int(value)
    return model


def replay(task, idx, seen, name, seed: int, trials: int, batch: int, eps: float, trend: float):
    """Positions in the pool of run ``seed`` of ``name``'s picks, in order (see the module
    docstring)."""
    rng = np.random.default_rng(seed)
    n = min(trials, idx.size)
    if name == "random":
        return rng.permutation(idx.size)[:n]
    model = make_model(name, task, seed, batch, trend, idx)
    picked: list[int] = list(rng.choice(idx.size, min(batch, n), replace=False))
    left = np.setdiff1d(np.arange(idx.size), picked)
    while len(picked) < n:
        model.fit(task, idx[picked], seen[picked])
        k = min(batch, n - len(picked))
        n_rand = int(round(eps * k))
        score = np.asarray(model.predict(task, idx[left]), np.float64)
        top = left[np.argsort(-score, kind="stable")[: k - n_rand]]
        rest = np.setdiff1d(left, top)
        extra = rng.choice(rest, min(n_rand, rest.size), replace=False)
        picked += [*top, *extra]
        left = np.setdiff1d(left, picked)
    return np.asarray(picked)


def compare(pool, names, seeds: int, trials: int, batch: int, eps: float, trend: float) -> dict:
    """Print and return each model's median trials to 95% on one pool (a miss: ``trials +
    1``)."""
    task, idx, seen, judged = pool
    best = float(np.min(judged[np.isfinite(judged)]))
    near = int(np.sum(judged <= best / QUALITY))
    print(
        f"\n{task.key}: {idx.size} configs measured, best {best * 1e3:.4g} ms (median of its"
        f" repeats), {near} within {QUALITY:.0%} of it ({near / idx.size:.1%})"
    )
    medians = {}
    for name in names:
        t0 = time.perf_counter()
        hits, curves = [], []
        for seed in range(seeds):
            order = replay(task, idx, seen, name, seed, trials, batch, eps, trend)
            curves.append(np.minimum.accumulate(judged[order]))
            hits.append(trials_to_reach(curves[-1], best / QUALITY))
        runs = [h if h is not None else trials + 1 for h in hits]
        medians[name] = float(np.median(runs))
        shown = ", ".join(str(h) if h is not None else f">{trials}" for h in hits)
        at = [k for k in SLOWDOWN_AT if k <= trials]
        slow = "  ".join(f"{k}: {_slowdown(curves, k, best):.3f}" for k in at)
        print(
            f"  {name:16s} median {medians[name]:6.1f}  [{shown}]  best / pool's best at {slow}"
            f"  ({time.perf_counter() - t0:.0f} s)"
        )
    return medians


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", help="tuning logs (JSON lines) of sittings")
    ap.add_argument("--models", default="xgb,xgb-knob,xgb-reg", help="comma-separated")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--trials", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--eps", type=float, default=0.05, help="share of a batch picked at random")
    ap.add_argument(
        "--trend", type=float, default=0.0, help="the models' linear-trend weight (the kept"
        " sittings' --trend 0; @trend=W per model)"
    )  # fmt: skip
    ap.add_argument(
        "--pool", choices=("all", "random"), default="all",
        help="all: every config the sitting measured; random: only those its random search"
        " drew (a uniform sample of the space, its bad configs included)",
    )  # fmt: skip
    ap.add_argument(
        "--sitting", default="5,128,8", metavar="SEEDS,TRIALS,BATCH",
        help="with --pool random: the sitting's seeds, trials and batch (default: the kept"
        " sittings')",
    )  # fmt: skip
    a = ap.parse_args()
    random_of = None
    if a.pool == "random":
        try:
            random_of = tuple(int(v) for v in a.sitting.split(","))
        except ValueError:
            random_of = ()
        if len(random_of) != 3 or min(random_of) < 1:
            raise SystemExit(f"--sitting {a.sitting!r}: SEEDS,TRIALS,BATCH, three counts >= 1")
    names = [m.strip() for m in a.models.split(",") if m.strip()]
    if "random" in names:
        raise SystemExit("--models: random is always run (the baseline)")
    names = ["random", *names]
    print(
        f"pool replay: {a.seeds} seeds (0..{a.seeds - 1}), {a.trials} trials, batch {a.batch},"
        f" eps {a.eps:g}, trend {a.trend:g}; a run reaches {QUALITY:.0%} of the best of the pool"
        + ("" if random_of is None else f" (the configs random search drew: {a.sitting})")
    )
    ratios: dict[str, list[float]] = {n: [] for n in names[1:]}
    for log in a.logs:
        for pool in pools(log, random_of=random_of):
            med = compare(pool, names, a.seeds, a.trials, a.batch, a.eps, a.trend)
            for n in names[1:]:
                ratios[n].append(med["random"] / med[n])
                print(f"  random / {n}: {ratios[n][-1]:.2f}x")
    if any(len(r) > 1 for r in ratios.values()):
        print()
        for n, r in ratios.items():
            ok = [v for v in r if math.isfinite(v) and v > 0]
            print(f"geomean random / {n} over {len(ok)} pools: {geometric_mean(ok):.2f}x")


if __name__ == "__main__":
    main()
