"""Tuning log: crash safety (kill a run, resume: nothing lost, nothing repeated), bad lines
skipped with a warning, apply_best."""

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pyvta.tuner.log import TuningLog, apply_best, make_record, read_records
from pyvta.tuner.measure import InProcessMeasurer, MeasureResult
from pyvta.tuner.synthetic import SyntheticBackend, tiled_gemm_task
from pyvta.tuner.tune import tune

ROOT = Path(__file__).resolve().parents[3]
N_TRIALS = 40

SCRIPT = textwrap.dedent(
    """
    import sys
    from pyvta.tuner.measure import InProcessMeasurer
    from pyvta.tuner.synthetic import SyntheticBackend, tiled_gemm_task
    from pyvta.tuner.tune import tune

    task = tiled_gemm_task(64, 64, 64)
    m = InProcessMeasurer(SyntheticBackend(delay_s=0.05), repeats=1)
    tune(task, {n}, m, tuner="random", batch_size=8, log=sys.argv[1], seed={seed},
         progress=False)
    """
)


def _lines(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def test_kill_and_resume_loses_and_repeats_nothing(tmp_path, seed):
    log = tmp_path / "run.jsonl"
    script = tmp_path / "run.py"
    script.write_text(SCRIPT.format(n=N_TRIALS, seed=seed))
    proc = subprocess.Popen([sys.executable, str(script), str(log)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if log.exists() and len(log.read_text().splitlines()) >= 12:
                break
            assert proc.poll() is None, "tuning run ended before it could be killed"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = _lines(log)
    assert 12 <= len(before) < N_TRIALS, len(before)
    print(f"killed after {len(before)} records")
    with open(log, "a") as f:
        f.write('{"v": 1, "task": "cut short')  # a line torn by the kill

    task = tiled_gemm_task(64, 64, 64)
    counter = InProcessMeasurer(SyntheticBackend(), repeats=1)
    measured = []
    orig = counter.measure

    def counting(task, configs, callback=None):
        measured.extend(c.index for c in configs)
        return orig(task, configs, callback)

    counter.measure = counting
    with pytest.warns(UserWarning, match="skipped line"):
        res = tune(
            task,
            N_TRIALS,
            counter,
            tuner="random",
            batch_size=8,
            log=str(log),
            resume=True,
            seed=seed + 1,
            progress=False,
        )
    assert res.n_resumed == len(before)
    assert len(measured) == N_TRIALS - len(before)  # only the missing trials were measured
    with pytest.warns(UserWarning):
        recs = read_records(log, task)
    idx = [r.index for r in recs]
    assert len(idx) == N_TRIALS and len(set(idx)) == N_TRIALS  # nothing lost, nothing twice
    assert [r.index for r in recs[: len(before)]] == [d["index"] for d in before]
    assert not set(measured) & {d["index"] for d in before}


def test_bad_lines_are_skipped_and_best_applied(tmp_path):
    task = tiled_gemm_task(64, 64, 64)
    other = tiled_gemm_task(32, 64, 64)
    log = tmp_path / "mixed.jsonl"
    with TuningLog(log) as w:
        for i, cost in [(3, 2.0), (5, 1.0), (9, 1.5)]:
            w.append(make_record(task, task.space.get(i), MeasureResult(costs=(cost,))))
        w.append(make_record(task, task.space.get(7), MeasureResult(error="build", msg="x")))
        w.append(make_record(other, other.space.get(1), MeasureResult(costs=(0.1,))))
    with open(log, "a") as f:
        f.write("not json at all\n")
        f.write('{"v": 99, "task": "from the future"}\n')
        f.write('{"something": "foreign"}\n')
    with pytest.warns(UserWarning, match="skipped line") as rec:
        recs = read_records(log, task)
    assert len(rec) == 3
    assert sorted(r.index for r in recs) == [3, 5, 7, 9]
    with pytest.warns(UserWarning):
        best = apply_best(log, task)
    assert best.index == 5 and best == task.space.get(5)
    assert apply_best(tmp_path / "missing.jsonl", task) is None


def test_invalid_points_are_logged_and_never_retried(tmp_path, seed):
    task = tiled_gemm_task(64, 64, 64)
    log = tmp_path / "inv.jsonl"
    m = InProcessMeasurer(SyntheticBackend(), repeats=1)
    res = tune(task, 200, m, tuner="random", batch_size=50, log=str(log), seed=seed, progress=False)
    recs = read_records(log, task)
    invalid = {r.index for r in recs if r.result.error == "invalid"}
    assert invalid and res.n_errors == len(invalid)
    assert len({r.index for r in recs}) == len(recs) == 200
    res2 = tune(
        task,
        260,
        m,
        tuner="xgb",
        batch_size=30,
        log=str(log),
        resume=True,
        seed=seed,
        progress=False,
    )
    recs2 = read_records(log, task)
    assert res2.n_resumed == 200 and len(recs2) == 260
    assert len({r.index for r in recs2}) == 260


def test_tasks_in_log_rebuild_other_workloads(tmp_path):
    from pyvta.tuner.log import tasks_in_log, training_data
    from pyvta.tuner.synthetic import TILED_GEMM

    a, b = tiled_gemm_task(64, 64, 64), tiled_gemm_task(32, 64, 64)
    log = tmp_path / "two.jsonl"
    with TuningLog(log) as w:
        for t in (a, b):
            for i in (1, 2):
                w.append(make_record(t, t.space.get(i), MeasureResult(costs=(float(i),))))
    others = tasks_in_log(log, {TILED_GEMM.name: TILED_GEMM}, exclude=a)
    assert [t.key for t in others] == [b.key]
    data = training_data(log, others)
    assert data[0][1] == [1, 2] and data[0][2] == [1.0, 2.0]


def test_write_best_keeps_the_best_valid_record_per_task(tmp_path):
    from pyvta.tuner.log import write_best

    a, b = tiled_gemm_task(64, 64, 64), tiled_gemm_task(32, 64, 64)
    src, dst = tmp_path / "all.jsonl", tmp_path / "best.jsonl"
    with TuningLog(src) as log:
        for task, costs in ((a, (3.0, 1.0, 2.0)), (b, (5.0, 4.0))):
            for i, c in enumerate(costs):
                log.append(make_record(task, task.space.get(i), MeasureResult((c,))))
        log.append(make_record(a, a.space.get(7), MeasureResult((), error="crash")))
    assert write_best(src, dst) == 2
    best = read_records(dst)
    assert [(r.task_key, r.result.cost) for r in best] == [(a.key, 1.0), (b.key, 4.0)]
    assert apply_best(dst, a) == apply_best(src, a) == a.space.get(1)


def test_best_record_judges_a_config_by_the_median_of_its_records(tmp_path):
    """A config measured once in a lucky moment (0.5, then 1.0 twice) loses to a steady 0.8."""
    task = tiled_gemm_task(64, 64, 64)
    log = tmp_path / "l.jsonl"
    with TuningLog(log) as w:
        for i, c in ((1, 0.5), (2, 0.8), (1, 1.0), (1, 1.0), (3, 0.9)):
            w.append(make_record(task, task.space.get(i), MeasureResult((c,))))
    assert apply_best(log, task) == task.space.get(2)
    with TuningLog(log) as w:  # measured again and again: a median of 0.6 now wins
        for c in (0.6, 0.6, 0.6):
            w.append(make_record(task, task.space.get(1), MeasureResult((c,))))
    assert apply_best(log, task) == task.space.get(1)
