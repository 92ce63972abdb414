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
    plot_latency,
    sessions_path,
    tune_with_budget,
)
from pyvta.tuner.log import read_records
from pyvta.tuner.measure import InProcessMeasurer
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
    assert 4.0 <= run.spent_s < 4.0 + 2.0  # stops at the budget, within a slice
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
    budget_s = 14
    proc = subprocess.Popen(_tune(onnx, log, f"{budget_s}s"), start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        deadline = time.time() + 120
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
    assert len(spent) == 1 and spent[0][1] - spent[0][0] < budget_s

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
