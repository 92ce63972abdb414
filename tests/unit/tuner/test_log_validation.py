"""Tuning-log records are validated before they are trusted: a record with a negative or
non-finite cost, an index outside the space, a config that is not its index's, or a broken
schema is skipped with a warning naming its line; never reported as best, never a crash
(``--resume`` included). ``--trials``/``--batch`` must be positive."""

import json
import warnings

import pytest

from pyvta.cli import main
from pyvta.tuner.log import TuningLog, apply_best, make_record, read_records
from pyvta.tuner.measure import InProcessMeasurer, MeasureResult
from pyvta.tuner.synthetic import SyntheticBackend, tiled_gemm_task
from pyvta.tuner.tune import TuneError, tune

TASK = tiled_gemm_task(64, 64, 64)


def _good_log(path):
    with TuningLog(path) as w:
        for i, cost in [(3, 2.0), (5, 1.0)]:
            w.append(make_record(TASK, TASK.space.get(i), MeasureResult(costs=(cost,))))
    return json.loads(path.read_text().splitlines()[0])


def _append(path, **changes):
    base = json.loads(path.read_text().splitlines()[0])
    base.update(changes)
    with open(path, "a") as f:
        f.write(json.dumps(base) + "\n")


BAD_RECORDS = {
    "negative cost": {"costs": [-100.0]},
    "zero cost": {"costs": [0.0]},
    "infinite cost": {"costs": [1e400]},  # json writes Infinity
    "string cost": {"costs": ["0.1"]},
    "index out of range": {"index": 10**9},
    "negative index": {"index": -1},
    "float index": {"index": 3.0},
    "config not its index's": {"index": 7},  # keeps index 3's config
    "config not a dict": {"config": [1, 2]},
    "task not a string": {"task": 5},
    "error not a string": {"error": 3},
    "build_s not a number": {"build_s": "x"},
}


@pytest.mark.parametrize("kind", sorted(BAD_RECORDS))
def test_a_bad_record_is_skipped_with_its_line_and_never_best(tmp_path, kind):
    log = tmp_path / "l.jsonl"
    _good_log(log)
    _append(log, **BAD_RECORDS[kind])
    with pytest.warns(UserWarning, match=r"l\.jsonl:3: skipped"):
        recs = read_records(log, TASK)
    assert sorted(r.index for r in recs) == [3, 5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert apply_best(log, TASK) == TASK.space.get(5)


def test_resume_with_an_out_of_range_index_skips_it(tmp_path):
    log = tmp_path / "l.jsonl"
    _good_log(log)
    _append(log, index=len(TASK.space) + 5, costs=[1e-9])
    m = InProcessMeasurer(SyntheticBackend(), repeats=1)
    with pytest.warns(UserWarning, match="outside the space"):
        res = tune(
            TASK, 6, m, tuner="random", batch_size=2, log=str(log), resume=True, progress=False
        )
    assert res.n_resumed == 2 and res.best_cost > 1e-9


@pytest.mark.parametrize("kw", [{"n_trials": -5}, {"n_trials": 0}, {"batch_size": 0}])
def test_tune_refuses_non_positive_trials_and_batch(kw):
    args = {"n_trials": 4, "batch_size": 2, **kw}
    with pytest.raises(TuneError, match="must be a positive integer"):
        tune(
            TASK,
            args["n_trials"],
            None,
            tuner="random",
            batch_size=args["batch_size"],
            progress=False,
        )


@pytest.mark.parametrize(
    "flag, says",
    [
        (["--trials", "-5"], "argument --trials: invalid int (a finite number >= 0)"),  # parsing
        (["--batch", "0"], "must be >= 1"),
    ],
)
def test_cli_refuses_non_positive_trials_and_batch(flag, says, capsys):
    try:
        rc = main(["tune", "gemm:64,64,64", *flag, "--no-progress"])
    except SystemExit as e:  # refused while parsing
        rc = e.code
    assert rc == 2
    assert says in capsys.readouterr().err


def test_cli_log_that_is_a_directory_or_the_model_is_refused_before_tuning(tmp_path, capsys):
    assert main(["tune", "gemm:64,64,64", "--log", str(tmp_path), "--no-progress"]) == 2
    assert "is a directory" in capsys.readouterr().err
    model = tmp_path / "m.onnx"
    model.write_bytes(b"x")
    assert main(["tune", str(model), "--log", str(model), "--no-progress"]) == 2
    assert "would destroy the input" in capsys.readouterr().err
    assert model.read_bytes() == b"x"


def test_tasks_in_log_skips_keys_it_cannot_rebuild(tmp_path):
    from pyvta.tuner.log import tasks_in_log

    log = tmp_path / "l.jsonl"
    _good_log(log)
    name = TASK.key.split("[")[0]
    for key in (f'{name}["a", 1, 2]@x', f"{name}[1e999]@x", f"{name}[{{}}]@x", f"{name}[1]@x"):
        _append(log, task=key)
    with pytest.warns(UserWarning, match="not rebuildable"):
        tasks = tasks_in_log(log, {TASK.name: TASK.template})
    assert [t.key for t in tasks] == [TASK.key]


def test_a_file_that_is_not_a_log_is_never_appended_to(tmp_path, capsys):
    from pyvta.tuner.log import LogError

    model = tmp_path / "model.onnx"
    model.write_bytes(b"\x08\x07binary model")
    with pytest.raises(LogError, match="is not a tuning log"):
        TuningLog(model)
    assert main(["tune", "gemm:64,64,64", "--log", str(model), "--no-progress"]) == 2
    assert "is not a tuning log" in capsys.readouterr().err
    assert model.read_bytes() == b"\x08\x07binary model"
