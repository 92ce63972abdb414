"""CachedMeasurer: each (task, config) measured once; a log carries the measurements across
runs, and failed runs (not invalid points) are measured again."""

from pyvta.tuner.log import TuningLog, make_record
from pyvta.tuner.measure import CachedMeasurer, InProcessMeasurer, MeasureResult
from pyvta.tuner.synthetic import SyntheticBackend, tiled_gemm_task


class _Counting(InProcessMeasurer):
    def __init__(self):
        super().__init__(SyntheticBackend(), repeats=1)
        self.seen = []

    def measure(self, task, configs, callback=None):
        self.seen += [c.index for c in configs]
        return super().measure(task, configs, callback)


def test_measures_each_config_once_and_resumes_from_the_log(tmp_path):
    task = tiled_gemm_task(64, 64, 64)
    cfgs = [task.space.get(i) for i in (3, 5, 3, 7)]
    log = tmp_path / "cache.jsonl"
    inner = _Counting()
    with CachedMeasurer(inner, str(log)) as m:
        first = m.measure(task, cfgs)
        again = m.measure(task, cfgs[:2])
    assert inner.seen == [3, 5, 7] and m.n_measured == 3
    assert [r.cost for r in again] == [r.cost for r in first[:2]]
    # a crashed record in the log is measured again; an invalid one is reused
    with TuningLog(str(log)) as w:
        w.append(make_record(task, task.space.get(9), MeasureResult(error="crash", msg="boom")))
        w.append(make_record(task, task.space.get(11), MeasureResult(error="invalid", msg="no")))
    inner2 = _Counting()
    with CachedMeasurer(inner2, str(log)) as m2:
        got = m2.measure(task, [task.space.get(i) for i in (3, 5, 7, 9, 11)])
        assert set(m2.costs(task)) == {3, 5, 7, 9, 11}
    assert inner2.seen == [9]
    assert got[0].cost == first[0].cost and got[4].error == "invalid"


def test_keep_timeouts_reuses_a_build_timeout_from_the_log(tmp_path):
    task = tiled_gemm_task(64, 64, 64)
    log = tmp_path / "cache.jsonl"
    with TuningLog(str(log)) as w:
        w.append(make_record(task, task.space.get(4), MeasureResult(error="build_timeout")))
    for keep, want in ((False, [4]), (True, [])):
        inner = _Counting()
        with CachedMeasurer(inner, str(log), keep_timeouts=keep) as m:
            got = m.measure(task, [task.space.get(4)])
        assert inner.seen == want
        if keep:
            assert got[0].error == "build_timeout" and got[0].cost == float("inf")
