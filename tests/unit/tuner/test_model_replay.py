"""``benchmarks/model_replay.py``: a sitting's tuning log read back as a pool (each config's
first record; the search's cost the fastest of its repeats, the judge's their median), runs
that pick each config of the pool at most once, and a model that can learn the pool's costs
reaching 95% of its best in fewer picks than random picking (seeds 0..7, printed)."""

import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from pyvta.tuner.measure import CachedMeasurer, InProcessMeasurer
from pyvta.tuner.synthetic import SyntheticBackend, tiled_gemm_task
from pyvta.tuner.tune import tune

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "model_replay.py"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH.parent))  # it imports tune_search, as when run
    spec = importlib.util.spec_from_file_location("model_replay", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def sitting(tmp_path):
    """A log of 160 random configs of a synthetic GEMM, 3 noisy repeats each, and one config
    measured again later (a second record, which the pool leaves out)."""
    log = tmp_path / "sitting.jsonl"
    task = tiled_gemm_task(256, 256, 256)
    meas = CachedMeasurer(InProcessMeasurer(SyntheticBackend(noise=0.05), repeats=3), str(log))
    tune(task, 160, meas, tuner="random", batch_size=16, seed=3, progress=False)
    first = json.loads(log.read_text().splitlines()[0])
    again = dict(first, costs=[9.0, 9.0, 9.0], cost=9.0)
    with open(log, "a") as f:
        f.write(json.dumps(again) + "\n")
    return task, log, first


def test_the_pool_is_each_configs_first_record(bench, sitting):
    task, log, first = sitting
    [(t, idx, seen, judged)] = bench.pools(str(log))
    assert t.key == task.key
    assert idx.size == len(set(idx.tolist())) == 160
    k = idx.tolist().index(first["index"])
    assert seen[k] == pytest.approx(min(first["costs"]))  # not the later record's 9.0
    assert judged[k] == pytest.approx(float(np.median(first["costs"])))
    assert np.all(seen <= judged)
    gz = log.with_suffix(".jsonl.gz")  # as benchmarks/results keeps a sitting's log
    gz.write_bytes(gzip.compress(log.read_bytes()))
    [(_, idx_gz, seen_gz, judged_gz)] = bench.pools(str(gz))
    assert idx_gz.tolist() == idx.tolist() and np.array_equal(judged_gz, judged)
    assert np.array_equal(seen_gz, seen)


@pytest.mark.parametrize("name", ["random", "xgb"])
def test_a_run_picks_each_config_at_most_once(bench, sitting, name):
    task, idx, seen, _ = bench.pools(str(sitting[1]))[0]
    order = bench.replay(task, idx, seen, name, 0, 40, 8, 0.25, 0.0)
    assert len(order) == 40 == len(set(order.tolist()))
    assert order.min() >= 0 and order.max() < idx.size
    again = bench.replay(task, idx, seen, name, 0, 40, 8, 0.25, 0.0)
    assert again.tolist() == order.tolist()  # a seed is one run


def test_a_model_that_learns_the_pool_needs_fewer_picks(bench, sitting, capsys):
    pool = bench.pools(str(sitting[1]))[0]
    medians = bench.compare(pool, ["random", "xgb"], 8, 64, 8, 0.05, 0.0)
    print(capsys.readouterr().out)
    print(medians)
    assert medians["xgb"] < medians["random"]


def test_a_setting_names_what_is_allowed(bench, sitting):
    task, idx, *_ = bench.pools(str(sitting[1]))[0]
    with pytest.raises(SystemExit, match="allowed: @KEY=VALUE"):
        bench.make_model("xgb@rounds", task, 0, 8, 0.0, idx)
    model = bench.make_model("xgb@rounds=20@max_depth=3", task, 0, 8, 0.0, idx)
    assert (model.num_rounds, model.params["max_depth"]) == (20, 3)


def test_the_random_pool_is_what_the_sittings_random_search_drew(bench, tmp_path):
    """``--pool random``: of a sitting's log, only the configs its random search drew (its runs
    replayed on the logged costs, nothing measured), not those another tuner added; a sitting
    of other seeds or trials than said is refused by name (a draw without a record)."""
    from tune_search import run_one

    task = tiled_gemm_task(256, 256, 256)
    log = tmp_path / "sitting.jsonl"
    meas = CachedMeasurer(InProcessMeasurer(SyntheticBackend(noise=0.05), repeats=3), str(log))
    drawn = set()
    for seed in range(2):  # as tune_search runs them: seeds outermost, each tuner in turn
        drawn.update(i for _, i, _ in run_one("random", task, seed, 24, 8, meas)[0].history)
        run_one("xgb", task, seed, 24, 8, meas)
    [(_, every, _, _)] = bench.pools(str(log))
    [(_, idx, seen, judged)] = bench.pools(str(log), random_of=(2, 24, 8))
    print(f"{every.size} configs in the log, {idx.size} drawn by random search")
    assert set(idx.tolist()) == drawn and every.size > idx.size
    assert seen.size == judged.size == idx.size
    with pytest.raises(SystemExit, match="no record of config"):
        bench.pools(str(log), random_of=(3, 24, 8))  # a seed the sitting did not run
