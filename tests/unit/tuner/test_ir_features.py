"""Loop-IR features: fixed-length curve features for every workload, loop features, strides."""

import numpy as np
import pytest

from pyvta.tuner import irfeatures
from pyvta.tuner.cpu import conv2d_task, gemm_task
from pyvta.tuner.features import make_featurizer
from pyvta.tuner.space import BoolKnob, ConfigSpace
from pyvta.tuner.task import InvalidConfig, Template


def test_curve_features_have_one_length_across_workloads(rng):
    tasks = [gemm_task(64, 64, 64), gemm_task(96, 128, 32), conv2d_task(16, 14, 14, 32, 3, 1, 1)]
    f = make_featurizer("curve")
    rows = []
    for t in tasks:
        x = f(t, t.space.sample_unique(rng, 4))
        assert x.shape == (4, irfeatures.CURVE_LEN) and np.isfinite(x).all()
        rows.append(x)
    assert not np.allclose(rows[0][0], rows[2][0])  # GEMM and conv2d look different
    loop = make_featurizer("loop+knob")
    t = tasks[0]
    x = loop(t, [0, 1, 2])
    assert x.shape == (3, irfeatures.LOOP_LEN + t.space.knob_feature_width)


def test_features_follow_the_knobs(fitting_tile):
    t = gemm_task(64, 64, 64)
    bm, bn = fitting_tile(t, 4, 16)  # (4, 16); (4, 8) with SSE
    a = t.space.config(
        {
            "tile": (bm, bn),
            "bk": 4,
            "parallel": False,
            "panels_outer": False,
            "pack_b": True,
        }
    )
    b = t.space.config(
        {
            "tile": fitting_tile(t, 2, 32),
            "bk": 4,
            "parallel": True,
            "panels_outer": False,
            "pack_b": True,
        }
    )
    f = make_featurizer("curve")
    fa, fb = f(t, [a.index, b.index])
    assert not np.allclose(fa, fb)
    stmts, _ = irfeatures.collect(t.lower(a))
    main = stmts[0]  # the accumulation C.local += A * B.packed
    assert main.trips == 64 * 64 * 64
    kinds = [k for _, _, k in main.loops]
    assert kinds[0] == "vectorized" and main.loops[0][1] == bn
    store = [acc for acc in main.accesses if acc.is_store][0]
    assert store.local and store.strides[0] == 1  # C.local is unit-stride along j.c
    levels = store.levels(main.loops)
    assert levels[0][2] == bn and levels[1][2] == bm * bn  # touches 16 then 4 x 16 elements


def _no_fit(config, *args):
    raise InvalidConfig("tile does not fit the buffer")


@pytest.mark.parametrize("kind", ["curve", "loop+knob"])
def test_a_template_without_loops_is_refused_by_name(kind):
    t = Template("test.noloops", lambda: ConfigSpace([BoolKnob("a")]), _no_fit)
    with pytest.raises(ValueError, match=r"'test\.noloops' has no lower_fn.*cpu\.gemm"):
        make_featurizer(kind)(t.task(), [0, 1])


@pytest.mark.parametrize("kind", ["curve", "loop"])
def test_invalid_points_featurize_to_zeros(kind):
    t = Template("test.nofit", lambda: ConfigSpace([BoolKnob("a")]), _no_fit, lower_fn=_no_fit)
    x = make_featurizer(kind)(t.task(), [0, 1])
    assert x.shape[0] == 2 and not x.any()


class _KnobCost:
    """A fake CPU measurement: fastest at bm=8, bn=64, bk=4, parallel."""

    def build(self, task, config):
        return None

    def run(self, task, config, artifact, repeats):
        import math

        bm, bn = config["tile"]
        c = abs(bm - 8) + abs(math.log2(bn) - 6) + abs(config["bk"] - 4) / 4
        return [1.0 + c + (0 if config["parallel"] else 2)] * repeats


def test_curve_features_drive_the_tuner(seed):
    from pyvta.tuner.measure import InProcessMeasurer
    from pyvta.tuner.search import SimulatedAnnealing
    from pyvta.tuner.tune import tune

    t = gemm_task(128, 128, 128)
    sa = SimulatedAnnealing(n_chains=16, n_steps=20, early_stop=10, seed=seed)
    res = tune(
        t,
        48,
        InProcessMeasurer(_KnobCost(), repeats=1),
        tuner="xgb",
        batch_size=16,
        seed=seed,
        progress=False,
        features="curve",
        sa=sa,
    )
    rand = tune(
        t,
        48,
        InProcessMeasurer(_KnobCost(), repeats=1),
        tuner="random",
        batch_size=16,
        seed=seed,
        progress=False,
    )
    print(f"curve-feature XGB best {res.best_cost:.3f}, random best {rand.best_cost:.3f}")
    assert res.best_cost <= rand.best_cost
