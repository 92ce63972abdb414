"""The tune() loop: progress, plot, early stopping, exhausted spaces, the CLI entry point."""

import argparse

import pytest

from pyvta.tuner.cli_support import add_tune_arguments, parse_workload, tune_command
from pyvta.tuner.log import read_records
from pyvta.tuner.measure import InProcessMeasurer
from pyvta.tuner.space import ChoiceKnob, ConfigSpace
from pyvta.tuner.synthetic import SyntheticBackend, tiled_gemm_task
from pyvta.tuner.task import Template
from pyvta.tuner.tune import tune


def test_tune_writes_log_and_plot(tmp_path, seed):
    task = tiled_gemm_task(64, 64, 64)
    png = tmp_path / "curve.png"
    res = tune(
        task,
        40,
        InProcessMeasurer(SyntheticBackend(noise=0.02)),
        tuner="xgb",
        batch_size=16,
        log=str(tmp_path / "l.jsonl"),
        plot=str(png),
        seed=seed,
    )
    assert png.exists() and png.read_bytes()[:4] == b"\x89PNG"
    assert len(res.history) == 40 and len(read_records(tmp_path / "l.jsonl", task)) == 40
    curve = res.best_curve
    assert all(a >= b for a, b in zip(curve, curve[1:], strict=False))
    assert res.best_config is not None and res.best_cost == curve[-1]


class _Const(SyntheticBackend):
    def run(self, task, config, artifact, repeats):
        return [1.0 + config["a"]] * repeats


def _small_space():
    return ConfigSpace([ChoiceKnob("a", [0, 1, 2]), ChoiceKnob("b", [0, 1])])


SMALL = Template("test.small", _small_space, lambda config: config, target="synthetic")


@pytest.mark.parametrize("name", ["random", "ga", "xgb", "xgb-reg"])
def test_small_space_is_exhausted_without_repeats(name, seed):
    task = SMALL.task()
    res = tune(
        task, 50, InProcessMeasurer(_Const()), tuner=name, batch_size=4, seed=seed, progress=False
    )
    idx = [i for _, i, _ in res.history]
    assert sorted(idx) == list(range(6))
    assert res.best_cost == 1.0


def test_early_stopping(seed):
    res = tune(
        SMALL.task(),
        50,
        InProcessMeasurer(_Const()),
        tuner="random",
        batch_size=1,
        seed=seed,
        progress=False,
        early_stopping=2,
    )
    assert len(res.history) < 6 or res.best_cost == 1.0


def test_parse_workload():
    assert parse_workload("gemm:64,32,16").args == (64, 32, 16)
    assert parse_workload("C6").args == (128, 28, 28, 128, 3, 1, 1)
    assert parse_workload("conv2d:16,14,14,32,3,1,1").name == "cpu.conv2d"
    with pytest.raises(ValueError, match="not understood"):
        parse_workload("gemm:1,2")


def test_a_prefixed_workload_is_its_familys_and_implies_its_target():
    from pyvta.tuner.cli_support import PREFIXED_WORKLOADS, workload_target

    assert parse_workload("vta:C12").name.startswith("vta.")
    assert parse_workload("nchwc:C7", "cuda-emulated").name == "cpu.conv2d_nchwc"
    assert [workload_target(w) for w in ("vta:C2", "nchwc:C3", "C3", "gemm:8,8,8")] == [
        "vta",
        "cpu",
        "cpu",
        "cpu",
    ]
    with pytest.raises(ValueError) as err:
        parse_workload("vtax:C2")
    for _, _, syntax in PREFIXED_WORKLOADS.values():
        assert syntax in str(err.value)


def test_tune_command_on_a_small_gemm(tmp_path, capsys):
    args = add_tune_arguments(argparse.ArgumentParser()).parse_args(
        [
            "gemm:32,32,32",
            "--trials",
            "4",
            "--batch",
            "4",
            "--repeats",
            "2",
            "--no-progress",
            "--log",
            str(tmp_path / "g.jsonl"),
            "--tuner",
            "random",
            "--final-check",
            "2",
        ]
    )
    assert tune_command(args) == 0
    out = capsys.readouterr().out
    print(out)
    recs = read_records(tmp_path / "g.jsonl")
    assert "best" in out and "final check: the 2 best" in out
    assert len({r.index for r in recs}) == 4 and len(recs) == 4 + 2 * 3  # 4 trials, 2 x 3 again
    args.resume = True
    args.trials = 6
    assert tune_command(args) == 0
    recs = read_records(tmp_path / "g.jsonl")
    assert len({r.index for r in recs}) == 6 and len(recs) == 10 + 2 + 2 * 3


def test_layer_names():
    from pyvta.tuner.cli_support import layer_names

    assert layer_names("C2-C4") == ["C2", "C3", "C4"] and layer_names("c8, C11") == ["C8", "C11"]
    with pytest.raises(ValueError, match="unknown layers.*C13"):
        layer_names("C12,C13")
    assert layer_names("C1-C3, c10-C12,C5") == ["C1", "C2", "C3", "C10", "C11", "C12", "C5"]
    with pytest.raises(ValueError, match="bad layer range 'C2-C4-C6'"):
        layer_names("C2-C4-C6")
    with pytest.raises(ValueError, match=r"unknown layers \[.C13.\]"):
        layer_names("C11-C13")
    with pytest.raises(ValueError, match="unknown layers"):
        layer_names(" , ")


def test_tune_command_features_option(capsys):
    parser = add_tune_arguments(argparse.ArgumentParser())
    base = ["--trials", "2", "--batch", "2", "--no-progress"]
    # context features need a template that has them: the CPU GEMM has not
    assert tune_command(parser.parse_args(["gemm:32,32,32", "--features", "context", *base])) == 2
    assert "has no context_fn; the context features need one" in capsys.readouterr().err
    # nor loop IR features one whose loops the tuner cannot lower: the NCHWc conv's (its rows
    # would all be zeros, a model of nothing)
    args = parser.parse_args(["nchwc:C5", "--features", "curve", *base])
    assert tune_command(args) == 2
    err = capsys.readouterr().err
    assert "'cpu.conv2d_nchwc' has no lower_fn; the curve features need one" in err
    assert "cpu.gemm" in err  # a template that has one
    with pytest.raises(SystemExit):
        parser.parse_args(["gemm:32,32,32", "--features", "bogus"])


def test_initial_configs_are_measured_first(seed):
    task = tiled_gemm_task(64, 64, 64)
    start = [task.space.get(5), 9]
    res = tune(
        task,
        10,
        InProcessMeasurer(SyntheticBackend()),
        tuner="random",
        batch_size=4,
        seed=seed,
        progress=False,
        initial=start,
    )
    idx = [i for _, i, _ in res.history]
    assert idx[:2] == [5, 9] and len(set(idx)) == 10


def test_trials_to_reach():
    from pyvta.tuner.tune import trials_to_reach

    curve = [9.0, 7.0, 7.0, 4.0]
    assert trials_to_reach(curve, 7.0) == 2 and trials_to_reach(curve, 5.0) == 4
    assert trials_to_reach(curve, 3.9) is None


def test_equal_quality_is_the_references_median_best_and_counts_misses():
    from pyvta.tuner.tune import equal_quality

    curves = {
        "random": [[9.0, 8.0, 6.0, 5.0], [9.0, 9.0, 7.0, 7.0], [8.0, 8.0, 8.0, 6.0]],
        "model": [[6.0, 4.0, 4.0, 3.0], [9.0, 9.0, 9.0, 9.0], [7.0, 6.0, 5.0, 5.0]],
    }
    eq = equal_quality(curves, "random", 4)
    assert eq.level == 6.0  # the median of random's last bests 5, 7, 6
    assert eq.hits == {"random": [3, None, 4], "model": [1, None, 2]}
    assert eq.median == {"random": 4.0, "model": 2.0}  # a miss counts as 5
    assert eq.ratio("model") == 2.0
    short = equal_quality(curves, "random", 2)  # the budget cuts the curves
    assert short.level == 8.0 and short.hits == {"random": [2, None, 1], "model": [1, None, 1]}


class _LuckyOnce(SyntheticBackend):
    """Config a=0 costs 1.0 but measures 0.5 the first time; a=1 is a steady 0.8; a=2: 3.0."""

    def __init__(self):
        super().__init__()
        self.calls = {}

    def run(self, task, config, artifact, repeats):
        n = self.calls[config.index] = self.calls.get(config.index, 0) + 1
        cost = {0: 0.5 if n == 1 else 1.0, 1: 0.8, 2: 3.0}[config["a"]]
        return [cost] * repeats


@pytest.mark.parametrize("check", [0, 3])
def test_final_check_picks_the_steady_config_over_the_lucky_one(check, tmp_path, seed):
    task = SMALL.task()
    log = tmp_path / "l.jsonl"
    args = dict(tuner="random", batch_size=6, seed=seed, progress=False, log=str(log))
    res = tune(task, 6, InProcessMeasurer(_LuckyOnce()), final_check=check, **args)
    assert len(res.history) == 6  # the re-measurements are not trials
    if check == 0:
        assert task.space.get(res.best_index)["a"] == 0 and res.best_cost == 0.5
        assert len(read_records(log, task)) == 6
        return
    assert task.space.get(res.best_index)["a"] == 1 and res.best_cost == 0.8
    assert len(res.rechecked) == 3 and all(len(v) == 4 for v in res.rechecked.values())
    assert len(read_records(log, task)) == 6 + 3 * 3  # logged, so apply_best agrees
    from pyvta.tuner.log import apply_best

    assert apply_best(log, task)["a"] == 1


class _UnluckyDefault(SyntheticBackend):
    """a=1 (the default) is a steady 0.8 but measures 5.0 the first time; a=0: 1.0; a=2: 3.0."""

    def __init__(self):
        super().__init__()
        self.calls = {}

    def run(self, task, config, artifact, repeats):
        n = self.calls[config.index] = self.calls.get(config.index, 0) + 1
        cost = {0: 1.0, 1: 5.0 if n == 1 else 0.8, 2: 3.0}[config["a"]]
        return [cost] * repeats


def test_final_check_always_remeasures_the_initial_config(seed):
    task = SMALL.task()
    default = next(c for c in map(task.space.get, range(task.space.size)) if c["a"] == 1)
    args = dict(tuner="random", batch_size=6, seed=seed, progress=False, initial=[default])
    res = tune(task, 6, InProcessMeasurer(_UnluckyDefault()), final_check=2, **args)
    assert default.index in res.rechecked  # not among the 2 best first measurements, kept anyway
    assert res.best_index == default.index and res.best_cost == 0.8
