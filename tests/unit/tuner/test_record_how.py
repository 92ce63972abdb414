"""Tuning records say how their cost was measured (``Record.how``, a measurer's ``how``: its
backend's ``describe()``), and runs resume, reuse and rank only the records measured as they
measure: one thread's CPU time does not compare with two threads' wall time, nor a warm cache
with a cold one."""

import json

import pytest

from pyvta.tuner.log import TuningLog, make_record, read_records
from pyvta.tuner.measure import CachedMeasurer, InProcessMeasurer, MeasureResult, MinOfRepeats
from pyvta.tuner.synthetic import SyntheticBackend, tiled_gemm_task
from pyvta.tuner.tune import tune


class Described(SyntheticBackend):
    def __init__(self, how: str):
        super().__init__()
        self.how, self.runs = how, 0

    def describe(self) -> str:
        return self.how

    def run(self, task, config, artifact, repeats):
        self.runs += 1
        return super().run(task, config, artifact, repeats)


def _write(log, task, rows):
    with TuningLog(str(log)) as w:
        for index, cost, how in rows:
            w.append(make_record(task, task.space.get(index), MeasureResult((cost,)), how))


def test_records_say_how_and_reads_leave_out_the_others(tmp_path):
    task = tiled_gemm_task(64, 64, 64)
    log = tmp_path / "l.jsonl"
    _write(log, task, [(1, 3.0, ""), (2, 1.0, "warm"), (3, 0.5, "cold"), (4, 0.7, "cold")])
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert ["how" in d for d in lines] == [False, True, True, True]  # "" is not written
    assert [r.how for r in read_records(log, task)] == ["", "warm", "cold", "cold"]
    with pytest.warns(UserWarning, match=r"left out 2 records of .* measured otherwise \(cold\)"):
        got = read_records(log, task, how="warm")
    assert [r.index for r in got] == [1, 2]  # a record naming no "how" is read as comparable
    with pytest.warns(UserWarning, match=r"left out 1 records .*\(warm\), not as this run"):
        assert [r.index for r in read_records(log, how="cold")] == [1, 3, 4]
    bad = dict(lines[1], how=5)
    log.write_text(json.dumps(bad) + "\n")
    with pytest.warns(UserWarning, match="field 'how' must be a string"):
        assert read_records(log, task) == []


def test_tune_logs_its_how_and_resumes_only_records_measured_so(tmp_path, seed):
    task = tiled_gemm_task(64, 64, 64)
    log = str(tmp_path / "l.jsonl")
    first = tune(task, 6, InProcessMeasurer(Described("A"), 1), "random", 3, log, seed=seed,
                 progress=False)  # fmt: skip
    assert first.n_resumed == 0
    assert {r.how for r in read_records(log, task)} == {"A"}
    with pytest.warns(UserWarning, match=r"left out 6 records .*\(A\), not as this run .*\(B\)"):
        other = tune(task, 8, InProcessMeasurer(Described("B"), 1), "random", 4, log,
                     resume=True, seed=seed, progress=False)  # fmt: skip
    assert other.n_resumed == 0 and len(other.history) == 8
    with pytest.warns(UserWarning, match=r"left out 8 records .*\(B\)"):
        same = tune(task, 8, InProcessMeasurer(Described("A"), 1), "random", 2, log,
                    resume=True, seed=seed, progress=False)  # fmt: skip
    assert same.n_resumed == 6 and len(same.history) == 8
    assert sorted(r.how for r in read_records(log, task)) == ["A"] * 8 + ["B"] * 8


def test_cached_measurer_reuses_only_records_measured_as_its_inner_measures(tmp_path):
    task = tiled_gemm_task(64, 64, 64)
    log = str(tmp_path / "cache.jsonl")
    cfgs = [task.space.get(i) for i in (3, 5, 8)]
    with CachedMeasurer(InProcessMeasurer(Described("cold"), 1), log) as m:
        n_ok = sum(r.ok for r in m.measure(task, cfgs))
    assert n_ok >= 1
    backend = Described("warm")
    m = MinOfRepeats(CachedMeasurer(InProcessMeasurer(backend, 1), log))
    with m, pytest.warns(UserWarning, match="measured otherwise"):
        assert m.how == "warm"
        m.measure(task, cfgs)
    assert backend.runs == n_ok  # measured again: the log's costs were measured cold
    backend = Described("cold")
    m = CachedMeasurer(InProcessMeasurer(backend, 1), log)
    with m, pytest.warns(UserWarning, match=r"left out \d+ records .*\(warm\)"):
        m.measure(task, cfgs)
    assert backend.runs == 0
