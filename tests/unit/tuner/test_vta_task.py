"""The VTA conv2d template as a tuning task, measured by the cycle model."""

import math

from pyvta.tuner.measure import InProcessMeasurer
from pyvta.tuner.tune import tune
from pyvta.tuner.vta import VtaCycleBackend, default_vta_config, vta_conv2d_task


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


def test_prior_is_the_backends_candidate_list_then_its_analytic_ranking():
    from pyvta.compiler.backend.vta.default import (
        candidate_configs,
        estimate_cycles,
        ranked_configs,
    )
    from pyvta.isa import HwConfig
    from pyvta.tuner.vta import conv_config, task_layer

    task = vta_conv2d_task(14, 14, 32, 32, 3, 1, 1)
    wl, ep = task_layer(task)
    ranked = ranked_configs(wl, ep, HwConfig())
    cands = [c for _, c in candidate_configs(ranked, 6)]
    first = [conv_config(c) for c in task.prior(6)]
    assert first == cands[:6] and len(set(first)) == 6
    # best estimate first; then the largest tile of the same thread count
    v = first[0].vthreads
    assert v == max(c.vthreads for _, c in ranked)  # more threads first
    assert first[0] == next(c for _, c in ranked if c.vthreads == v)  # ranked: best first
    area = [c.tile_h * c.tile_w * c.tile_co for c in first]
    assert area[1] == max(c.tile_h * c.tile_w * c.tile_co for _, c in ranked if c.vthreads == v)
    many = [conv_config(c) for c in task.prior(60)]
    assert many == [c for _, c in candidate_configs(ranked, 60)][:60]
    every = [conv_config(c) for c in task.prior(len(ranked))]  # candidates, then the rest
    assert len(every) == len(ranked) and set(every) == {c for _, c in ranked}
    assert estimate_cycles(wl, ep, first[0], HwConfig()) == ranked[0][0]
    assert task.prior(0) == []


def test_tune_command_measures_the_prior_first(tmp_path, capsys):
    import argparse

    from pyvta.tuner.cli_support import add_tune_arguments, parse_workload, tune_command
    from pyvta.tuner.log import read_records

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
