"""Every tuner skips the points its space's cheap check refuses (``ConfigSpace.problem``, no
lowering): on the direct NCHWc space ~90% of uniform points are refused, and a tuner that spent
trials on them would be compared with the others on a handicap. The model learns the refused
points it picked as failed ones."""

import numpy as np
import pytest

from pyvta.tuner.measure import Backend, InProcessMeasurer
from pyvta.tuner.tune import tune
from pyvta.tuner.tuners import make_tuner


class KnobCost(Backend):
    """Seconds from a config's knob features (no kernel built): a bowl around a fixed point."""

    def build(self, task, config):
        return None

    def run(self, task, config, artifact, repeats):
        f = task.space.knob_features(task.space.to_choices([config.index]))[0].astype(float)
        centre = np.linspace(0.5, 2.5, f.size)
        return [1e-3 * (1.0 + 0.2 * float(np.sum((f - centre) ** 2)))] * repeats


@pytest.mark.parametrize("name", ["random", "ga", "xgb"])
def test_tuners_propose_only_points_the_space_accepts(name, seed):
    from pyvta.tuner.cli_support import parse_workload

    task = parse_workload("nchwc:C9")
    space = task.space
    sample = space.sample(np.random.default_rng(seed), 200)
    refused = sum(space.problem(space.get(int(i))) is not None for i in sample)
    assert refused > 100  # most uniform points: what a tuner must not spend trials on
    tuner = make_tuner(name, task, seed, 8)
    res = tune(task, 40, InProcessMeasurer(KnobCost(), 1), tuner=tuner, batch_size=8,
               seed=seed, progress=False)  # fmt: skip
    assert len(res.history) == 40 and res.n_errors == 0
    assert not tuner.refused & tuner.visited  # (random draws come valid: ``sample_unique``)
    assert all(space.problem(space.get(i)) is None for _, i, _ in res.history)
    if name == "xgb":
        assert tuner.model.trained
