"""``benchmarks/tune_search.py``: seed ``s`` of one layer draws a different stream from seed
``s`` of another layer (the seeds of a multi-layer campaign are independent samples), and the
same layer and seed draw the same stream on every run (a rerun replays from the cache). The
two tasks here have spaces of the same shape (tile sizes of 256 and 512 swapped) and differ
only in their key: with one seed per run (the old protocol) every tuner drew the same indices
on both."""

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyvta.tuner import search_summary as summ
from pyvta.tuner.measure import InProcessMeasurer
from pyvta.tuner.synthetic import SyntheticBackend, tiled_gemm_task

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "tune_search.py"


def _bench():
    spec = importlib.util.spec_from_file_location("tune_search", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("tuner", ["random", "ga", "xgb"])
def test_layers_draw_independent_streams(tuner, seed):
    bench = _bench()
    a, b = tiled_gemm_task(256, 512, 256), tiled_gemm_task(512, 256, 256)
    assert len(a.space) == len(b.space) and a.key != b.key
    meas = InProcessMeasurer(SyntheticBackend(), repeats=1)
    s = seed % 7

    def drawn(task):
        res, derived = bench.run_one(tuner, task, s, trials=12, batch=6, meas=meas)
        return [i for _, i, _ in res.history], derived

    (pts_a, seed_a), (pts_b, seed_b) = drawn(a), drawn(b)
    print(f"{tuner} seed {s}: run seeds {seed_a} ({a.key}), {seed_b} ({b.key})")
    # the knobs after the two swapped tile sizes have the same options on both layers; one
    # stream for both layers drew the same values of them (the same config shape) point by point
    assert [k.name for k in a.space.knobs][2:] == [k.name for k in b.space.knobs][2:]
    shape_a = a.space.to_choices(pts_a[:6])[:, 2:]
    shape_b = b.space.to_choices(pts_b[:6])[:, 2:]
    print(shape_a.tolist(), shape_b.tolist())
    assert (shape_a != shape_b).any(axis=1).sum() >= 3
    assert seed_a != seed_b
    # the same layer and seed: the same run seed and the same points, in order
    again, seed_again = drawn(a)
    assert (again, seed_again) == (pts_a, seed_a)
    # another seed on the same layer: another stream
    other = bench.run_one(tuner, a, s + 1, trials=12, batch=6, meas=meas)[0]
    assert [i for _, i, _ in other.history][:6] != pts_a[:6]


def test_run_seed_is_stable_across_processes():
    """The derivation does not depend on the process (no salted ``hash``): two interpreters
    with different ``PYTHONHASHSEED`` derive the same run seeds."""
    code = (
        "from pyvta.tuner.comparison import run_seed;"
        "from pyvta.tuner.synthetic import tiled_gemm_task as t;"
        "print([run_seed(s, t(256, 512, 256)) for s in range(3)])"
    )
    outs = [
        subprocess.run(
            [sys.executable, "-P", "-c", code],
            env={**os.environ, "PYTHONHASHSEED": h},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for h in ("1", "2")
    ]
    print(outs)
    assert outs[0] == outs[1]
    assert len(set(ast.literal_eval(outs[0]))) == 3


class _LuckyRepeat(SyntheticBackend):
    """The model's cost three times, but one config's second repeat takes half of it: one
    repeat taken in a moment the host ran faster."""

    def __init__(self, lucky: int):
        super().__init__()
        self.lucky = lucky

    def run(self, task, config, artifact, repeats):
        costs = super().run(task, config, artifact, repeats)
        if config.index == self.lucky:
            costs[1] *= 0.5
        return costs


def test_the_summary_judges_configs_by_the_median_of_their_repeats():
    """The search sees each config's fastest repeat (``MinOfRepeats``); the summary's best
    and trials to 95% go by the median of the repeats, so one lucky repeat is not the best
    every run is measured against."""
    bench = _bench()
    task = tiled_gemm_task(256, 256, 256)
    # compare's seed 0: its run's points, the best of them made lucky
    plain = bench.run_one("random", task, 0, trials=16, batch=8, meas=_min_meas(None))[0]
    lucky = sorted(plain.history, key=lambda h: h[2])[0][1]
    print(f"lucky config {lucky}")
    rows = {}
    for stat in (None, "median"):
        meas = _min_meas(lucky)
        rows[stat] = bench.compare(task, meas, ["random"], 16, 8, 1, judge_stat=stat)
    medians = {i: r.cost for (_, i), r in meas.cache.items()}
    print({k: v["best"] for k, v in rows.items()})
    assert rows[None]["best"] == pytest.approx(0.5 * medians[lucky])
    assert rows["median"]["best"] == pytest.approx(min(medians.values()))
    assert rows["median"]["curves"]["random"][0][-1] == pytest.approx(medians[lucky])


class _LuckySitting(SyntheticBackend):
    """The model's cost, but one config's first measurement (every repeat) takes half of it:
    measured in a fast spell of the host; later measurements take the model's cost."""

    def __init__(self, lucky: int):
        super().__init__()
        self.lucky, self.runs = lucky, 0

    def run(self, task, config, artifact, repeats):
        costs = super().run(task, config, artifact, repeats)
        if config.index == self.lucky:
            self.runs += 1
            if self.runs == 1:
                costs = [0.5 * c for c in costs]
        return costs


def test_confirm_judges_the_best_configs_by_measuring_them_again(capsys):
    """``--confirm K``: a config that was fast only the first time it was measured (every
    repeat) is not the best the runs are judged against once the K best are measured again;
    without it, it is."""
    bench = _bench()
    task = tiled_gemm_task(256, 256, 256)
    plain = bench.run_one("random", task, 0, trials=16, batch=8, meas=_min_meas(None))[0]
    lucky = sorted(plain.history, key=lambda h: h[2])[0][1]
    print(f"lucky config {lucky}")
    rows, metas = {}, {}
    for k in (0, 2):
        metas[k] = _min_meas(lucky, _LuckySitting)
        rows[k] = bench.compare(
            task, metas[k], ["random"], 16, 8, 1, judge_stat="median", confirm=k
        )
    plain_backend = SyntheticBackend()
    true = {i: plain_backend.run(task, task.space.get(i), None, 1)[0] for _, i in metas[2].cache}
    out = capsys.readouterr().out
    print(out, {k: v["best"] for k, v in rows.items()})
    assert rows[0]["best"] == pytest.approx(0.5 * true[lucky])
    assert rows[2]["best"] == pytest.approx(min(true.values()))
    assert metas[2].inner.backend.runs == 1 + 3  # its one measurement, then 3 more
    assert f"config {lucky}: first {0.5 * true[lucky]:.6g}" in out
    # 2 other configs measured again as controls: the host did not drift, the lucky one was
    assert "controls: 2 other configs of the runs (seed 0) measured again: again / first" \
        " median 1.000, 1.000 to 1.000" in out  # fmt: skip


def _min_meas(lucky, lucky_backend=None):
    from pyvta.tuner.measure import CachedMeasurer, MinOfRepeats

    lucky_backend = lucky_backend or _LuckyRepeat
    backend = SyntheticBackend() if lucky is None else lucky_backend(lucky)
    return MinOfRepeats(CachedMeasurer(InProcessMeasurer(backend, repeats=3)))


class _NowSlower:
    """A measurer whose configs in ``slower`` take 10 s now; the others what they took first."""

    how = "stub"

    def __init__(self, first: dict, slower: set):
        self.first, self.slower, self.asked = first, slower, []

    def measure(self, task, configs, callback=None):
        from pyvta.tuner.measure import MeasureResult

        self.asked += [c.index for c in configs]
        return [MeasureResult(costs=(10.0 if c.index in self.slower else self.first[c.index],))
                for c in configs]  # fmt: skip


def test_confirm_goes_on_while_the_best_is_one_not_confirmed():
    """``confirm_best``: the 2 best grow slower when measured again, so the best is then the
    third, not yet confirmed: it and the fourth are measured next, and there it stops."""
    from pyvta.tuner.comparison import confirm_best

    task = tiled_gemm_task(256, 256, 256)
    first = {i: float(n) for n, i in enumerate([11, 22, 33, 44, 55, 66], start=1)}
    history = [(t, i, c) for t, (i, c) in enumerate(first.items())]
    stub = _NowSlower(first, {11, 22})
    seen = confirm_best(task, stub, [history], first.get, k=2, rounds=3)
    print(seen)
    assert seen == {11: [1.0, 10, 10, 10], 22: [2.0, 10, 10, 10], 33: [3.0] * 4, 44: [4.0] * 4}
    assert stub.asked == [11, 22] * 3 + [33, 44] * 3


def test_the_judge_says_when_the_best_is_not_confirmed(capsys):
    """Every config but the last grows slower when measured again: after ``CONFIRM_PASSES``
    passes of 1 the best is still one measured once, and the judge says so."""
    from pyvta.tuner.comparison import CONFIRM_PASSES, confirmed_judge

    task = tiled_gemm_task(256, 256, 256)
    first = {i: float(n) for n, i in enumerate([11, 22, 33, 44, 55, 66], start=1)}
    history = [(t, i, c) for t, (i, c) in enumerate(first.items())]
    stub = _NowSlower(first, {11, 22, 33, 44, 55})

    class Cached:  # the measurer under a cache (``MinOfRepeats.inner``)
        inner = stub

    judge = confirmed_judge(task, Cached(), {"xgb": [history]}, first.get, "median", 1)
    out = capsys.readouterr().out
    print(out)
    assert CONFIRM_PASSES == 4
    assert "the best, config 55 (5 s), is NOT confirmed: the 4 confirmed all ran slower" in out
    assert judge(55) == 5.0 and judge(11) == 10.0  # the median of 1, 10, 10, 10
    assert "WARNING" not in out  # the control ran as first measured
    capsys.readouterr()  # the output printed above
    Cached.inner = _NowSlower(first, {11, 22})  # the third is the best, and it is confirmed
    confirmed_judge(task, Cached(), {"xgb": [history]}, first.get, "median", 1)
    assert "NOT confirmed" not in capsys.readouterr().out


def test_the_judge_warns_when_the_controls_drifted(capsys):
    """Every config runs 0.8x its first cost now (the runs came from a ``--cache`` of another
    sitting): the controls say so, and the judge warns that the runs are not comparable."""
    from pyvta.tuner.comparison import confirmed_judge

    task = tiled_gemm_task(256, 256, 256)
    first = {i: float(n) for n, i in enumerate([11, 22, 33, 44], start=1)}
    history = [(t, i, c) for t, (i, c) in enumerate(first.items())]

    class Cached:  # the measurer under a cache: every config 0.8x its first cost
        inner = _NowSlower({i: 0.8 * c for i, c in first.items()}, set())

    confirmed_judge(task, Cached(), {"xgb": [history]}, first.get, "median", 2)
    out = capsys.readouterr().out
    print(out)
    assert "controls: 2 other configs of the runs (seed 0) measured again: again / first median" \
        " 0.800" in out  # fmt: skip
    assert "WARNING: the host runs faster now than when the runs measured (controls 0.800x)" in out


def test_a_kept_summary_reads_back_as_compare_returned_it(capsys, tmp_path):
    """``--summary`` keeps a layer's figures in JSON and ``--from-summaries`` sums up layers
    measured in separate sittings from them: the medians, each run's trials, random's
    estimates and the equal-quality ratio it reads must be the run's."""
    import json

    bench = _bench()
    task = tiled_gemm_task(64, 64, 64)  # random reaches 95% in 48 trials, the model not
    row = bench.compare(task, _min_meas(None), ["xgb", "random"], 48, 8, 3)
    kept = summ.sitting_summary("C7", task, row, 48, 8, 3)
    path = tmp_path / "run.json"
    path.write_text(json.dumps([kept]))  # as main writes it: a list, one summary per layer
    (read,) = summ.load_summaries([str(path)])
    assert read["points"] == len(task.space) and read["trials"] == 48
    assert row["random"] <= 48 < row["xgb"]  # one median that hit, one that missed
    assert read["hits"] == {n: row["hits"][n] for n in ("xgb", "random")}
    assert None in read["hits"]["xgb"]  # a run that missed: null
    back = summ.row_of(read)
    for name in ("xgb", "random", "random (sampled)", "random (valid)"):
        assert back[name] == row[name], name
    assert back["at"]["xgb"] == row["at"]["xgb"]
    eq = row["at random's level"]
    assert back["equal"]["xgb"] == eq["random"] / eq["xgb"]
    capsys.readouterr()
    table = summ.summarize_sittings([str(path)], plot=str(tmp_path / "trials.png"))
    assert table.startswith("| layer | points | random | xgb |") and "| C7 |" in table
    assert table.endswith(f"plot: {tmp_path / 'trials.png'}")
    assert (tmp_path / "trials.png").read_bytes()[:4] == b"\x89PNG"


def _sitting(layer: str, xgb: int, random: int, **extra) -> dict:
    return {"v": 1, "layer": layer, "points": 1000, "trials": 128, "medians": {"xgb": xgb,
            "random": random}} | extra  # fmt: skip


def test_a_layers_sittings_combine_by_the_geometric_mean_of_their_ratios(tmp_path):
    """The rule: every sitting of a layer counts, its ratios combined by their geometric mean,
    then the layers'; a sitting where both missed has no ratio, a bound counts as its value."""
    import json
    from statistics import geometric_mean

    sittings = [
        _sitting("C2", 10, 40),  # 4x
        _sitting("C10", 20, 129),  # random missed: >= 6.45x, counted as 6.45
        _sitting("C2", 20, 20),  # 1x
        _sitting("C12", 129, 129),  # both missed: no ratio
    ]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(sittings))
    text = summ.summarize_sittings([str(path)])
    print(text)
    assert text.index("| C2 #1 |") < text.index("| C2 #2 |") < text.index("| C10 |")
    rule = next(ln for ln in text.splitlines() if ln.startswith("random / xgb median"))
    assert "C2 2.00x (4.00x, 1.00x)" in rule and "C10 6.45x" in rule and "none for C12" in rule
    assert rule.endswith(f"geomean over 2 layers {geometric_mean([2.0, 129 / 20]):.2f}x")
    path.write_text(json.dumps([_sitting("C2", 10, 40, trials=64), _sitting("C3", 10, 40)]))
    with pytest.raises(SystemExit, match="different trial counts"):
        summ.summarize_sittings([str(path)])
    path.write_text(json.dumps({"layer": "C2"}))
    with pytest.raises(SystemExit, match="not a summary of this benchmark"):
        summ.summarize_sittings([str(path)])


def test_the_kept_zen5_sittings_give_the_rules_figure():
    """The figure docs/measurements.md gives for the model against random search on Zen 5
    (C1-C12, every sitting counted) is the one the kept summaries give."""
    kept = BENCH.parent / "results" / "zen5"
    paths = [kept / "search_sittings_transcribed.json", *sorted(kept.glob("C*_ga.summary.json"))]
    text = summ.summarize_sittings([str(p) for p in paths])
    rule = next(ln for ln in text.splitlines() if ln.startswith("random / xgb median"))
    assert rule.endswith("geomean over 12 layers 2.68x"), rule


def test_the_trials_plot_draws_a_missed_median_to_the_cap_hatched():
    from pyvta.tuner.plot import trials_figure

    medians = {"C1": {"xgb": 17, "random": 129}, "C2": {"xgb": 18, "random": 30}}
    ax = trials_figure(medians, 128, estimates={"C1": -444.0, "C2": 37.0}).axes[0]
    drawn = sorted((round(b.get_height()), b.get_hatch()) for b in ax.patches)
    assert drawn == [(17, None), (18, None), (30, None), (128, "//")], drawn
    assert [t.get_text() for t in ax.texts] == [">128"]
    marks = {c.get_label(): c.get_offsets().tolist() for c in ax.collections}
    assert marks == {
        "random, estimated from its samples": [[1.0, 37.0]],
        "random, estimated from its samples, at least": [[0.0, 444.0]],
    }


def test_main_keeps_each_layers_summary(tmp_path, capsys):
    """``--summary JSON``: what a run prints, kept per layer for ``--from-summaries``."""
    bench = _bench()
    out = tmp_path / "sitting.json"
    argv = ["--task", "synthetic", "--shape", "64,64,64", "--trials", "16", "--batch", "8"]
    assert bench.main([*argv, "--seeds", "2", "--tuners", "xgb,random", "--summary", str(out)]) == 0
    assert f"summary: {out}" in capsys.readouterr().out
    (kept,) = summ.load_summaries([str(out)])
    assert kept["layer"] == "synthetic" and kept["seeds"] == 2 and kept["trials"] == 16
    assert sorted(kept["hits"]) == ["random", "xgb"] and all(
        len(h) == 2 for h in kept["hits"].values()
    )
    assert bench.main(["--from-summaries", str(out)]) == 0
    assert "| synthetic | " in capsys.readouterr().out
