"""The VTA conv2d template's ``lower_fn``: loop IR of its TE schedule, for IR (curve) features."""

import numpy as np
import pytest

from pyvta.compiler.backend.vta.te_template import config_from_steps, conv2d_schedule
from pyvta.tuner import irfeatures
from pyvta.tuner.features import make_featurizer
from pyvta.tuner.task import InvalidConfig
from pyvta.tuner.vta import conv_config, default_vta_config, task_layer, vta_conv2d_task


def _valid(task, n):
    return [i for i in range(task.space.size) if _fits(task, i)][:n]


def test_lower_follows_the_config():
    task = vta_conv2d_task(14, 14, 32, 64, 3, 1, 1)
    cfg = default_vta_config(task)
    func = task.lower(cfg)
    text = str(func)
    assert "vta.gemm" in text and "local.acc_buffer" in text and "local.inp_buffer" in text
    # the lowered schedule encodes exactly this config (the backend's typed contract)
    wl, _ = task_layer(task)
    from pyvta.isa import HwConfig

    sch, _ = conv2d_schedule(wl, conv_config(cfg), HwConfig())
    assert config_from_steps(sch.steps) == conv_config(cfg)


def test_curve_features_differ_between_configs_and_invalid_points_raise():
    task = vta_conv2d_task(14, 14, 32, 64, 3, 1, 1)
    idx = _valid(task, 40)
    feats = make_featurizer("curve")(task, idx)
    assert feats.shape == (len(idx), irfeatures.CURVE_LEN)
    assert np.isfinite(feats).all()
    assert len({r.tobytes() for r in feats}) > len(idx) // 4  # not one constant row
    big = vta_conv2d_task(14, 14, 256, 256, 3, 1, 1)  # some tiles overflow the buffers
    bad = next(i for i in range(big.space.size) if not _fits(big, i))
    with pytest.raises(InvalidConfig):
        big.lower(big.space.get(bad))


def _fits(task, i):
    try:
        task.instantiate(task.space.get(i))
    except InvalidConfig:
        return False
    return True
