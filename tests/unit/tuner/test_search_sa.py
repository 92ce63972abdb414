"""Search: parallel SA finds the optimum of a synthetic function faster than random search;
model-guided tuning beats random search (GA runs through the same interface)."""

import numpy as np

from pyvta.tuner.measure import InProcessMeasurer
from pyvta.tuner.search import SimulatedAnnealing
from pyvta.tuner.space import ChoiceKnob, ConfigSpace
from pyvta.tuner.synthetic import SyntheticBackend, tiled_gemm_task
from pyvta.tuner.task import Template
from pyvta.tuner.tune import tune


def _bowl_space(*_):
    return ConfigSpace([ChoiceKnob(f"k{j}", list(range(10)), log_scale=False) for j in range(6)])


def _bowl_inst(config, *_):
    return config


BOWL = Template("synthetic.bowl", _bowl_space, _bowl_inst, target="synthetic")
TARGET = np.array([7, 2, 9, 4, 0, 5])


def bowl_score(space, idx):
    """Higher is better; unique maximum 0 at TARGET, with a coupling between k0 and k1."""
    ch = space.to_choices(idx)
    d = ch - TARGET
    return -(np.abs(d).sum(axis=1) + 0.5 * np.abs(d[:, 0] - d[:, 1]))


def test_sa_finds_optimum_faster_than_random(seed):
    task = BOWL.task()
    opt = int(task.space.to_index([TARGET])[0])
    evals = {"n": 0}

    def score(idx):
        evals["n"] += len(idx)
        return bowl_score(task.space, idx)

    sa = SimulatedAnnealing(n_chains=128, n_steps=500, early_stop=60, seed=seed)
    assert task.space.size > sa.exhaustive_below  # 1e6 points: the chains do the search
    top = sa.find_maximums(task, score, 8)
    print(f"SA: {evals['n']} evaluations, {sa.last_steps} steps, top {top[:3]} (optimum {opt})")
    assert top[0] == opt
    rng = np.random.default_rng(seed)
    rand = task.space.sample(rng, evals["n"])
    print(f"random with the same {evals['n']} evaluations hits the optimum: {opt in set(rand)}")
    # 1e6 points: random search needs ~1e6 evaluations on average, SA needed far fewer
    assert evals["n"] < task.space.size // 10
    exclude = set(top)
    again = sa.find_maximums(task, score, 8, exclude)
    assert not set(again) & exclude and len(again) == 8


def test_sa_crosses_ruled_out_points(seed):
    """A score of -inf rules a point out (``ModelTuner``'s skip_unfit: points that do not fit);
    where most of a large space is ruled out, the chains still move through it and find the
    optimum (with -inf in the first scores the temperature was NaN and no chain ever moved)."""
    task = BOWL.task()
    opt = int(task.space.to_index([TARGET])[0])

    def score(idx):
        s = bowl_score(task.space, idx)
        ch = task.space.to_choices(idx)
        return np.where((ch[:, 2] % 3 != 0) | (ch[:, 4] % 2 == 1), -np.inf, s)  # 5/6 out

    sa = SimulatedAnnealing(n_chains=128, n_steps=500, early_stop=60, seed=seed)
    top = sa.find_maximums(task, score, 8)
    assert top[0] == opt, (top[:3], opt)
    assert np.isfinite(score(np.array(top))).all()


def test_small_spaces_are_scored_whole(seed):
    small = ConfigSpace([ChoiceKnob(f"k{j}", list(range(10)), log_scale=False) for j in range(3)])
    task = Template("synthetic.small", lambda: small, _bowl_inst, target="synthetic").task()
    calls = []

    def score(idx):
        calls.append(len(idx))
        return -np.abs(small.to_choices(idx) - TARGET[:3]).sum(axis=1)

    sa = SimulatedAnnealing(seed=seed)  # 1,000 points: below exhaustive_below
    exclude = {int(small.to_index([TARGET[:3]])[0])}
    top = sa.find_maximums(task, score, 5, exclude)
    every = -np.abs(small.to_choices(np.arange(small.size)) - TARGET[:3]).sum(axis=1)
    every[list(exclude)] = -99
    assert calls == [small.size - 1] and sa.last_steps == 0
    assert sorted(every[top]) == sorted(np.sort(every)[-5:])  # the exact top 5, optimum excluded


def test_xgb_sa_beats_random_and_ga_on_synthetic_gemm(seed):
    task = tiled_gemm_task(256, 256, 256)
    m = InProcessMeasurer(SyntheticBackend(), repeats=1)
    best = {}
    for name in ("xgb", "random", "ga"):
        best[name] = [
            tune(task, 128, m, tuner=name, batch_size=32, seed=seed + s, progress=False).best_cost
            for s in range(2)
        ]
    ref = min(min(v) for v in best.values())
    print({k: [round(c / ref, 3) for c in v] for k, v in best.items()})
    assert np.mean(best["xgb"]) < np.mean(best["random"])  # GA is printed, compared in benchmarks


def test_random_hit_trials_is_exact_for_sampling_without_replacement():
    from math import comb

    from pyvta.tuner.tuners import random_hit_trials

    n, k = 720, 9
    mean, median = random_hit_trials(n, k)
    assert mean == (n + 1) / (k + 1)
    # P(no hit in t draws) = C(n - k, t) / C(n, t): the median is where it first drops to 1/2
    miss = [comb(n - k, t) / comb(n, t) for t in range(n)]
    assert miss[median] <= 0.5 < miss[median - 1]
    assert random_hit_trials(10, 10) == (1.0, 1) and random_hit_trials(5, 0)[1] == 6
