"""Cost models: the XGB rank model learns a synthetic ranking, transfer learning helps on a
synthetic family, and model fit + search for a 64-candidate batch is fast."""

import time

import numpy as np

from pyvta.tuner.measure import InProcessMeasurer
from pyvta.tuner.model import XGBCostModel, global_model
from pyvta.tuner.search import SimulatedAnnealing
from pyvta.tuner.synthetic import SyntheticBackend, gemm_model_cost, tiled_gemm_task
from pyvta.tuner.tune import tune
from pyvta.tuner.tuners import ModelTuner


def _costs(task, idx):
    out = []
    for i in idx:
        c = task.space.get(int(i))
        ok = c["tile_i"][2] * c["tile_j"][2] <= 256
        out.append(gemm_model_cost(c, *task.args) if ok else float("inf"))
    return np.array(out)


def _spearman(a, b):
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def test_rank_model_learns_a_synthetic_ranking(rng):
    task = tiled_gemm_task(256, 256, 256)
    idx = np.array(task.space.sample_unique(rng, 900))
    cost = _costs(task, idx)
    ok = np.isfinite(cost)
    train, test = idx[:500], idx[500:][ok[500:]]
    got = {}
    for loss in ("rank", "reg"):
        m = XGBCostModel(loss, seed=1)
        m.fit(task, train, cost[:500])
        pred = m.predict(task, test)
        rho = _spearman(pred, -cost[500:][ok[500:]])
        top = set(test[np.argsort(-pred)[:20]])
        best = set(test[np.argsort(cost[500:][ok[500:]])[:40]])
        got[loss] = (round(rho, 3), len(top & best))
    print("spearman, top-20 predicted within true top-40:", got)
    assert got["rank"][0] > 0.7
    assert got["rank"][1] >= 8


def test_transfer_learning_helps_on_a_synthetic_family(seed):
    rng = np.random.default_rng(seed)
    others = [
        tiled_gemm_task(m, n, k) for m, n, k in [(128, 256, 256), (256, 128, 512), (512, 256, 128)]
    ]
    data = []
    for t in others:
        idx = t.space.sample_unique(rng, 400)
        data.append((t, idx, list(_costs(t, idx))))
    base = global_model(data, "rank", seed=seed)
    target = tiled_gemm_task(256, 256, 256)
    meas = InProcessMeasurer(SyntheticBackend(), repeats=1)
    res = {"local": [], "transfer": []}
    for s in range(3):
        res["local"].append(
            tune(target, 48, meas, "xgb", batch_size=16, seed=seed + s, progress=False).best_curve
        )
        res["transfer"].append(
            tune(
                target, 48, meas, "xgb", batch_size=16, seed=seed + s, progress=False, base=base
            ).best_curve
        )
    ref = min(min(c[-1] for c in v) for v in res.values())
    mean = {k: np.mean(np.array(v) / ref, axis=0) for k, v in res.items()}
    print({k: [round(float(v[i]), 3) for i in (15, 31, 47)] for k, v in mean.items()})
    assert mean["transfer"][15] < mean["local"][15]  # first batch already guided
    assert mean["transfer"].mean() < mean["local"].mean()


def test_fit_and_search_for_a_batch_of_64_is_fast(rng):
    task = tiled_gemm_task(256, 256, 256)
    idx = task.space.sample_unique(rng, 512)
    tuner = ModelTuner(task, seed=0, sa=SimulatedAnnealing(seed=0))
    from pyvta.tuner.measure import MeasureResult

    t0 = time.perf_counter()
    tuner.update(
        idx,
        [
            MeasureResult(costs=(c,)) if np.isfinite(c) else MeasureResult(error="invalid")
            for c in _costs(task, idx)
        ],
    )
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    batch = tuner.next_batch(64)
    t_search = time.perf_counter() - t0
    print(
        f"fit on 512 measurements: {t_fit:.2f} s; SA (128 chains, {tuner.sa.last_steps} "
        f"steps) + pick 64: {t_search:.2f} s"
    )
    assert len(batch) == len(set(batch)) == 64 and not set(batch) & set(idx)
    assert t_fit + t_search < 20  # loose: 2 shared cores; the benchmark reports the timing


def test_linear_trend_ranks_past_the_best_point_measured(rng):
    """Features that track ln(cost) (plus noise and a distractor); trained only on the worse
    half of the points, the trees alone are flat over the better half (no split lies beyond
    the data), the trend ranks it."""
    from pyvta.tuner.features import Featurizer
    from pyvta.tuner.model import LinearTrend

    task = tiled_gemm_task(256, 256, 256)
    idx = np.array(task.space.sample_unique(rng, 1500))
    cost = _costs(task, idx)
    idx, cost = idx[np.isfinite(cost)], cost[np.isfinite(cost)]
    noise = rng.normal(0, 0.05, size=(idx.size, 2)) + [0, 1]
    table = {int(i): [np.log(c) + n[0], n[1]] for i, c, n in zip(idx, cost, noise, strict=True)}

    class Tracking(Featurizer):
        name = "tracking"

        def __call__(self, task, indices):
            return np.array([table[int(i)] for i in indices], np.float32)

    worse = cost >= np.median(cost)
    got = {}
    for trend in (0.0, 3.0):
        m = XGBCostModel("rank", Tracking(), seed=1, trend=trend)
        m.fit(task, idx[worse][:200], cost[worse][:200])
        pred = m.predict(task, idx[~worse])
        got[trend] = 0.0 if np.ptp(pred) == 0 else _spearman(-pred, cost[~worse])
    print(f"spearman on the unseen better half: trees {got[0.0]:.2f}, trees+trend {got[3.0]:.2f}")
    assert got[3.0] > 0.8 and got[3.0] > got[0.0] + 0.3
    t = LinearTrend()
    t.fit(np.ones((3, 2)), np.array([1.0, np.inf, 2.0]), np.zeros(3))
    assert np.all(t.predict(np.ones((2, 2))) == 0)  # constant features: no trend


def test_the_trend_weight_is_the_templates():
    """The CPU templates rank with the trees alone (on ResNet-18's CPU layers a trend fitted on
    the first 8 points sent the next batch to poor extremes); the VTA templates keep ``TREND``;
    an explicit ``trend`` wins."""
    from pyvta.tuner.cli_support import parse_workload
    from pyvta.tuner.tuners import TREND, default_trend, make_tuner

    cpu, vta = parse_workload("nchwc:C2"), parse_workload("vta:C2")
    assert (default_trend(cpu), default_trend(vta)) == (0.0, TREND) and TREND > 0
    assert make_tuner("xgb", cpu, 0, 8).model.trend_weight == 0.0
    assert make_tuner("xgb", vta, 0, 8).model.trend_weight == TREND
    assert make_tuner("xgb", cpu, 0, 8, trend=2.0).model.trend_weight == 2.0
