"""The VTA conv2d template as a tuning task, measured by the cycle model."""

import math

import pytest

pytest.importorskip("compiler.backend.vta.conv2d")

from tuner.measure import InProcessMeasurer  # noqa: E402
from tuner.tune import tune  # noqa: E402
from tuner.vta import VtaCycleBackend, default_vta_config, vta_conv2d_task  # noqa: E402


def test_vta_conv2d_tunes_on_the_cycle_model(seed):
    task = vta_conv2d_task(14, 14, 32, 32, 3, 1, 1)
    assert task.cost_unit == "cycles" and task.space.size > 1
    default = default_vta_config(task)
    m = InProcessMeasurer(VtaCycleBackend(), repeats=1)
    base = m.measure(task, [default])[0]
    assert base.ok and base.cost > 0
    res = tune(task, 12, m, tuner="xgb", batch_size=6, seed=seed, progress=False)
    print(
        f"default {default.to_dict()}: {base.cost:.0f} cycles; best of 12: {res.best_cost:.0f}"
        f" ({res.n_errors} invalid)"
    )
    assert math.isfinite(res.best_cost)
    assert task.space.config(res.best_config.to_dict()) == res.best_config
