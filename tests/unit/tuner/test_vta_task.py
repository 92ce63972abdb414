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


def test_prior_is_the_backends_analytic_ranking():
    from compiler.backend.vta.default import estimate_cycles
    from isa import HwConfig
    from tuner.vta import conv_config, task_layer

    task = vta_conv2d_task(14, 14, 32, 32, 3, 1, 1)
    first = task.prior(5)
    assert len(first) == 5 and len({c.index for c in first}) == 5
    wl, ep = task_layer(task)
    est = [estimate_cycles(wl, ep, conv_config(c), HwConfig()) for c in first]
    print("analytic estimates of the prior:", [round(e) for e in est])
    assert est == sorted(est)  # best first
    assert task.prior(0) == []


def test_tune_command_measures_the_prior_first(tmp_path, capsys):
    import argparse

    from tuner.cli_support import add_tune_arguments, parse_workload, tune_command
    from tuner.log import read_records

    parser = add_tune_arguments(argparse.ArgumentParser())
    log = tmp_path / "v.jsonl"
    common = ["--trials", "6", "--batch", "3", "--no-progress", "--tuner", "random"]
    args = parser.parse_args(["vta:C12", *common, "--first", "4", "--log", str(log)])
    assert tune_command(args) == 0
    task = parse_workload("vta:C12")
    want = [c.index for c in task.prior(4)]
    got = [r.index for r in read_records(log)]
    assert sorted(got[:4]) == sorted(want) and len(set(got)) == 6  # log: completion order
    assert "analytic estimate" in capsys.readouterr().out
    assert tune_command(parser.parse_args(["vta:C12", *common, "--first", "-1"])) == 2
