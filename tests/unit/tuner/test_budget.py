"""``pyvta tune MODEL --budget``: the duration parser, the task scheduler (tasks with more to
gain get more trials, none starves) and resuming a killed run (nothing logged lost, nothing
measured twice, the time spent carried over)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pyvta.tuner.budget import (
    BudgetError,
    BudgetTask,
    expected_gain,
    parse_duration,
    sessions_path,
    tune_with_budget,
)
from pyvta.tuner.log import read_records
from pyvta.tuner.measure import InProcessMeasurer
from pyvta.tuner.plot import plot_latency
from pyvta.tuner.synthetic import SyntheticBackend, tiled_gemm_task

SEED = 3


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("20m", 1200), ("1h", 3600),
                                               ("1.5h", 5400), (" 2M ", 120)])  # fmt: skip
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["20", "m", "-5m", "0s", "5 min", "1h30m", "", "abc"])
def test_parse_duration_refuses_bad_values_naming_the_forms(text):
    with pytest.raises(BudgetError, match=r"s \(seconds\), m \(minutes\) or h \(hours\)"):
        parse_duration(text)


def test_expected_gain_prefers_the_weighted_improving_task():
    flat = [100.0] * 20
    falling = [100.0 - 2 * i for i in range(20)]
    assert expected_gain(falling, 1) > expected_gain(flat, 1)
    assert expected_gain(flat, 3) == pytest.approx(3 * expected_gain(flat, 1))
    assert expected_gain([], 1) == float("inf")  # never measured: first
    assert expected_gain([float("inf")] * 4, 1) == 0.0  # all failed: only eps slices


def test_scheduler_gives_more_trials_where_more_is_to_gain(tmp_path):
    """Three synthetic GEMMs: the big one weighted 4x should get most slices; every task gets
    more than its first slice (eps and the optimistic rate: no starvation)."""
    print(f"seed {SEED}")
    tasks = [
        BudgetTask(tiled_gemm_task(256, 256, 256), 4, name="big x4"),
        BudgetTask(tiled_gemm_task(64, 64, 64), 1, name="small"),
        BudgetTask(tiled_gemm_task(32, 64, 32), 1, name="tiny"),
    ]
    log = tmp_path / "syn.jsonl"
    with InProcessMeasurer(SyntheticBackend(), repeats=1) as m:
        run = tune_with_budget(tasks, 4.0, m, log=str(log), tuner="random", seed=SEED,
                               slice_trials=4, progress=None)  # fmt: skip
    counts = [len(t) for t in run.trials]
    print("trials per task", counts, "slices", len(run.picks))
    assert counts[0] > counts[1] and counts[0] > counts[2]
    assert min(counts) > 4
    assert len(read_records(log)) == sum(counts) == run.n_measured
    curve = run.latency_curve()
    assert all(b[1] <= a[1] for a, b in zip(curve, curve[1:], strict=False))  # never rises
    assert curve[-1][1] == pytest.approx(run.latency())
    # stops at the budget: spent it, and no chunk of trials began after it (only the one under
    # way may end after it); not a wall time after it, which a loaded host stretches (7.8 s,
    # two xdist workers on 2 cores)
    late = [t for ts in run.trials for t, _ in ts if t > 4.0]
    assert run.spent_s >= 4.0 and len(late) <= 2  # chunk_trials
    assert run.session_starts_s == [0.0]

    # the same log with a larger budget: continues (records read back, never re-measured)
    with InProcessMeasurer(SyntheticBackend(), repeats=1) as m:
        more = tune_with_budget(tasks, run.spent_s + 1.0, m, log=str(log), tuner="random",
                                seed=SEED, slice_trials=4, progress=None)  # fmt: skip
    assert more.n_resumed == sum(counts) and more.n_measured > 0
    assert more.session_starts_s == [0.0, pytest.approx(run.spent_s, abs=0.05)]
    keys = [(r.task_key, r.index) for r in read_records(log)]
    assert len(keys) == len(set(keys)) == sum(counts) + more.n_measured
    assert plot_latency(more, tmp_path / "l.png", unit="s") and (tmp_path / "l.png").stat().st_size


def _tune(onnx, log, budget):
    return [sys.executable, "-P", "-m", "pyvta.cli", "tune", str(onnx), "--target", "vta",
            "--budget", budget, "--batch", "4", "--first", "4", "--log", str(log),
            "--seed", str(SEED)]  # fmt: skip


def test_killed_run_resumes_losing_nothing(tmp_path):
    """A budgeted run of a small ResNet-18 on the VTA cycle model, killed (SIGKILL, its whole
    process group) once it has logged records, then run again with the same log: the killed
    run's records are all still there and read back, no config is measured twice, the time
    already spent counts against the budget and the latency curve continues after it."""
    from pyvta.compiler.graph.zoo import save_model

    print(f"seed {SEED}")
    onnx, log = tmp_path / "r18.onnx", tmp_path / "r18.jsonl"
    save_model("resnet18", str(onnx), size=32, classes=10, width=16, seed=SEED)
    first_budget_s = 120  # more than any host takes to log 60 records: the kill ends it
    proc = subprocess.Popen(_tune(onnx, log, f"{first_budget_s}s"), start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        deadline = time.time() + first_budget_s
        while time.time() < deadline and proc.poll() is None:
            if sessions_path(log).exists() and len(log.read_text().splitlines()) >= 60:
                break
            time.sleep(0.2)
        assert proc.poll() is None, f"the run ended before it was killed:\n{proc.stdout.read()}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    first = log.read_text()
    lines = [ln for ln in first.splitlines() if ln.strip()]
    spent = json.loads(sessions_path(log).read_text())["sessions"]
    killed_s = spent[0][1] - spent[0][0]
    assert len(spent) == 1 and killed_s < first_budget_s
    # the resumed run's budget: the killed session's time and 10 s more, however fast the host
    budget_s = int(killed_s) + 10

    out = subprocess.run(_tune(onnx, log, f"{budget_s}s"), capture_output=True, text=True,
                         timeout=180, check=True).stdout  # fmt: skip
    print(out[-1500:])
    after = log.read_text()
    assert after.startswith(first.rstrip("\n"))  # appended to, nothing lost
    recs = read_records(log)
    n_kept = len(read_records_text(first, tmp_path))
    assert n_kept >= 60 and f"resumed {n_kept} records" in out  # every logged record read back
    keys = [(r.task_key, r.space_sig, r.index) for r in recs]
    assert len(keys) == len(set(keys)), "a config was measured twice"
    assert len(recs) > len(lines)  # the resumed run measured more
    spans = json.loads(sessions_path(log).read_text())["sessions"]
    assert len(spans) == 2
    total = sum(b - a for a, b in spans)
    assert budget_s <= total < budget_s + 10  # the killed session's time counted
    assert (tmp_path / "r18.latency.png").stat().st_size > 0


def read_records_text(text, tmp_path):
    p = tmp_path / "copy.jsonl"
    p.write_text(text)
    return read_records(p)


def test_cli_refuses_a_bad_budget_and_an_operator(capsys):
    from pyvta.tuner.cli_support import main

    assert main(["model.onnx", "--budget", "20 minutes"]) == 2
    assert "s (seconds), m (minutes) or h (hours)" in capsys.readouterr().err
    assert main(["vta:C12", "--budget", "20m"]) == 2
    assert "--budget tunes a network" in capsys.readouterr().err


def test_budget_holds_within_a_slice(tmp_path):
    """A slice of 32 trials at 0.25 s each would run 8 s past a 1.5 s budget; measured two at a
    time, none started once the budget is spent, the run ends within one chunk of it, and the
    log holds exactly the trials kept."""
    log = tmp_path / "slow.jsonl"
    tasks = [BudgetTask(tiled_gemm_task(64, 64, 64), 1, name="slow")]
    with InProcessMeasurer(SyntheticBackend(delay_s=0.25), repeats=1) as m:
        run = tune_with_budget(tasks, 1.5, m, log=str(log), tuner="random", seed=SEED,
                               slice_trials=32, chunk_trials=2, progress=None)  # fmt: skip
    print("spent", run.spent_s, "measured", run.n_measured, "cut", run.n_cut)
    assert 1.5 <= run.spent_s < 1.5 + 2 * 0.25 + 0.4
    assert run.n_cut > 0 and run.n_measured == len(run.trials[0]) == len(read_records(log))


def test_a_build_that_would_overrun_the_budget_is_cut_and_not_logged(tmp_path):
    """A 6 s build with 2 s of budget left: the measurer's build timeout (30 s) is cut to the
    time left (its deadline), the candidate is dropped (not logged: a later session may measure
    it) and the run ends at the budget, not 6 s past it; the deadline is lifted after."""
    from pyvta.tuner.measure import LocalMeasurer

    log = tmp_path / "cut.jsonl"
    tasks = [BudgetTask(tiled_gemm_task(64, 64, 64), 1, name="slow build")]
    m = LocalMeasurer(SyntheticBackend(build_delay_s=6.0), repeats=1, n_build_workers=1)
    try:
        run = tune_with_budget(tasks, 2.0, m, log=str(log), tuner="random", seed=SEED,
                               slice_trials=4, chunk_trials=1, progress=None)  # fmt: skip
    finally:
        m.close()
    print("spent", run.spent_s, "measured", run.n_measured, "cut", run.n_cut)
    assert run.spent_s < 2.0 + 2.0
    assert run.n_measured == 0 and run.n_cut == 4
    assert not log.exists() or read_records(log) == []
    assert m.deadline is None  # the measurer as it was


def test_one_layers_templates_count_once_in_the_network():
    """Tasks of one group (a CPU layer's templates) add their best only, once, by the group's
    weight; a template behind its group's best gets its gain scaled down."""
    from pyvta.tuner.budget import BudgetRun, _gain, _State

    t = tiled_gemm_task(64, 64, 64)
    tasks = [BudgetTask(t, 2, group="L1"), BudgetTask(t, 2, group="L1"), BudgetTask(t, 1)]
    run = BudgetRun(tasks, [[(0.0, 5.0), (1.0, 4.0)], [(2.0, 3.0)], [(0.5, 10.0)]], 3.0, 10.0)
    assert run.latency() == 2 * 3.0 + 10.0
    assert run.latency_curve() == [(0.5, 2 * 5.0 + 10.0), (1.0, 2 * 4.0 + 10.0),
                                   (2.0, 2 * 3.0 + 10.0)]  # fmt: skip
    states = [_State(s, None, []) for s in tasks]
    for st, tr in zip(states, run.trials, strict=True):
        for ts, c in tr:
            st.note(ts, c)
    behind = expected_gain(states[0].curve, 2)
    assert _gain(states, 0, 16) == pytest.approx(behind * 3.0 / 4.0)
    assert _gain(states, 1, 16) == expected_gain(states[1].curve, 2)  # the group's lead


def _tune_cpu(onnx, log, budget):
    return [sys.executable, "-P", "-m", "pyvta.cli", "tune", str(onnx), "--target", "cpu",
            "--budget", budget, "--batch", "4", "--log", str(log), "--seed", str(SEED)]  # fmt: skip


@pytest.mark.slow
def test_cpu_network_budget_runs_and_continues(tmp_path):
    """``pyvta tune MODEL --target cpu --budget``: a small ResNet-18's conv layers (their
    templates grouped per layer), measured on this CPU for 20 s, then continued to 30 s: the
    records are read back and none measured twice, the sessions add up to the budget (within a
    few seconds: the budget holds within a slice), the latency curve is in ms."""
    from pyvta.compiler.graph.zoo import save_model

    onnx, log = tmp_path / "r18.onnx", tmp_path / "r18.jsonl"
    save_model("resnet18", str(onnx), size=32, classes=10, width=16, seed=SEED)
    first = subprocess.run(_tune_cpu(onnx, log, "20s"), capture_output=True, text=True,
                           timeout=180, check=True).stdout  # fmt: skip
    print(first[-1200:])
    n_first = len(read_records(log))
    assert n_first > 0 and " ms " in first and "distinct layers" in first
    out = subprocess.run(_tune_cpu(onnx, log, "30s"), capture_output=True, text=True,
                         timeout=180, check=True).stdout  # fmt: skip
    print(out[-1200:])
    assert f"resumed {n_first} records" in out
    recs = read_records(log)
    keys = [(r.task_key, r.space_sig, r.index) for r in recs]
    assert len(keys) == len(set(keys)) > n_first
    spans = json.loads(sessions_path(log).read_text())["sessions"]
    total = sum(b - a for a, b in spans)
    assert len(spans) == 2 and 30 <= total < 30 + 5
    assert (tmp_path / "r18.latency.png").stat().st_size > 0


def test_the_first_pass_measures_every_default_and_the_curve_starts_at_zero(tmp_path):
    """Every task's default (its first ``initial``) is measured alone before any slice, the
    untuned network's tasks first, largest weight x flops first; the latency curve starts at 0
    with the untuned network (weights x the untuned tasks' defaults, a group's other template
    not counted there) and never rises; resumed, the defaults are read back, not measured."""
    print(f"seed {SEED}")
    big, small = tiled_gemm_task(256, 256, 256), tiled_gemm_task(64, 64, 64)
    alt = tiled_gemm_task(128, 128, 128)
    d_big, d_small, d_alt = big.space.get(9), small.space.get(6), alt.space.get(10)  # valid
    tasks = [
        BudgetTask(small, 2, [d_small], "small x2", flops=2 * 64**3),
        BudgetTask(alt, 1, [d_alt], "big's other template", group="B", untuned=False,
                   flops=2 * 256**3),
        BudgetTask(big, 1, [d_big], "big", group="B", flops=2 * 256**3),
    ]  # fmt: skip
    log = tmp_path / "first.jsonl"
    with InProcessMeasurer(SyntheticBackend(), repeats=1) as m:
        run = tune_with_budget(tasks, 1.0, m, log=str(log), tuner="random", seed=SEED,
                               slice_trials=4, progress=None)  # fmt: skip
    recs = read_records(log)
    first = [(r.task_key, r.index) for r in recs[:3]]
    assert first == [(big.key, 9), (small.key, 6), (alt.key, 10)]  # untuned, by weight x flops
    costs = {(r.task_key, r.index): r.result.cost for r in recs}
    assert run.default_costs == [costs[(small.key, 6)], costs[(alt.key, 10)], costs[(big.key, 9)]]
    untuned = 2 * costs[(small.key, 6)] + costs[(big.key, 9)]
    curve = run.latency_curve()
    assert curve[0] == (0.0, pytest.approx(untuned))
    assert all(b[1] <= a[1] for a, b in zip(curve, curve[1:], strict=False))
    assert curve[-1][1] == pytest.approx(run.latency()) and run.latency() <= untuned
    later = sorted(t for tr in run.trials for t, _ in tr)[3:]  # the trials after the defaults
    assert run.first_pass_s is not None and 0 < run.first_pass_s <= later[0]
    assert run.baseline()[1] == 0  # nothing estimated

    with InProcessMeasurer(SyntheticBackend(), repeats=1) as m:
        more = tune_with_budget(tasks, run.spent_s + 0.5, m, log=str(log), tuner="random",
                                seed=SEED, slice_trials=4, progress=None)  # fmt: skip
    assert more.default_costs == run.default_costs
    assert more.latency_curve()[0] == curve[0]
    keys = [(r.task_key, r.index) for r in read_records(log)]
    assert len(keys) == len(set(keys))


def test_a_default_not_measured_is_estimated_by_its_flops():
    """A layer whose default was not measured counts its flops at the median seconds per flop
    of the measured defaults (so the curve still starts at 0); with no flops, no curve until
    it is measured."""
    from pyvta.tuner.budget import BudgetRun

    t = tiled_gemm_task(64, 64, 64)
    tasks = [BudgetTask(t, 1, flops=100.0), BudgetTask(t, 3, flops=300.0),
             BudgetTask(t, 2, flops=50.0)]  # fmt: skip
    trials = [[(1.0, 2.0)], [(2.0, 3.0)], []]
    run = BudgetRun(tasks, trials, 3.0, 10.0, default_costs=[2.0, 3.0, None])
    base, n_est = run.baseline()
    assert n_est == 1 and base[:2] == [2.0, 3.0]
    assert base[2] == pytest.approx(50.0 * 0.015)  # median of 2/100 and 3/300
    assert run.latency_curve()[0] == (0.0, pytest.approx(2.0 + 3 * 3.0 + 2 * 0.75))
    tasks[1].stand_in = True  # its default is only the nearest point: an estimate too
    base, n_est = BudgetRun(tasks, trials, 3.0, 10.0, default_costs=[2.0, 3.0, None]).baseline()
    assert n_est == 2 and base == [2.0, 3.0, pytest.approx(50.0 * 0.02)]  # rate of exact ones
    tasks[1].stand_in = False
    tasks[2].flops = 0.0
    assert BudgetRun(tasks, trials, 3.0, 10.0, default_costs=[2.0, 3.0, None]).latency_curve() == []
