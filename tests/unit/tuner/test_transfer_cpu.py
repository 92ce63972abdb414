"""``benchmarks/tune_transfer.py --task cpu``: the CPU path of the transfer experiment (source
layers of the direct NCHWc template tuned into a log, other logs joined, a global model, the
target tuned from scratch, with the model and at random) end to end, on a cost that is the
same function of the knobs for every layer (so what the global model learns on the sources
holds on the target) instead of measured kernels (``benchmarks/tune_transfer.py`` measures)."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from pyvta.tuner.measure import Backend, CachedMeasurer, InProcessMeasurer, MinOfRepeats
from pyvta.tuner.tune import tune

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "tune_transfer.py"


class KnobCost(Backend):
    """Seconds from a config's knob features alone (a bowl around a fixed point: every layer
    has the same best knobs); two repeats, the second slower (``MinOfRepeats`` takes the first)."""

    def build(self, task, config):
        return None

    def run(self, task, config, artifact, repeats):
        f = task.space.knob_features(task.space.to_choices([config.index]))[0].astype(float)
        centre = np.linspace(0.5, 2.5, f.size)
        c = 1e-3 * (1.0 + 0.2 * float(np.sum((f - centre) ** 2)))
        return [c, 1.3 * c][:repeats]


def _bench():
    spec = importlib.util.spec_from_file_location("tune_transfer", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cpu_transfer_end_to_end(tmp_path, monkeypatch, capsys, seed):
    from pyvta.tuner.cli_support import parse_workload
    from pyvta.tuner.tune import equal_quality

    bench = _bench()
    raw = InProcessMeasurer(KnobCost(), repeats=2)

    def measurers(a):
        assert a.task == "cpu"
        return raw, MinOfRepeats(CachedMeasurer(raw, a.cache))

    monkeypatch.setattr(bench, "_measurers", measurers)
    other = tmp_path / "other_net.jsonl"  # another network's log: C10 stands in for it
    tune(parse_workload("nchwc:C10"), 10, raw, "random", 5, log=str(other), seed=seed,
         progress=False)  # fmt: skip
    out_json = tmp_path / "t.json"
    argv = ["--task", "cpu", "--sources", "C11,C12", "--targets", "C9", "--trials", "16",
            "--batch", "8", "--seeds", "3", "--source-trials", "48",
            "--source-log", str(tmp_path / "src.jsonl"), "--cache", str(tmp_path / "tgt.jsonl"),
            "--extra-logs", str(other), "--plot", str(tmp_path / "t.png"),
            "--json", str(out_json), "--confirm", "4"]  # fmt: skip
    assert bench.main(argv) == 0
    text = capsys.readouterr().out
    print(text)
    assert "CPU direct NCHWc conv; sources C11,C12 -> targets C9" in text
    assert "10 records of 1 tasks of cpu.conv2d_nchwc" in text  # the other log joined
    # --confirm 4: the 4 best measured again, each the median of its 2 repeats (1 and 1.3)
    assert "confirmed: 4 best configs measured 3 more times" in text
    assert "again / first over the confirmed: median 1.000" in text
    assert "source: 106 records of 3 layers" in text  # 48 + 48 tuned, 10 from the other log
    for method in ("scratch[knob]", "transfer[knob]", "random"):
        assert f"C9    {method}" in text
    assert (tmp_path / "t.png").stat().st_size > 0
    curves = json.loads(out_json.read_text())["C9"]["curves"]
    for ref in ("scratch[knob]", "random"):  # the speed-up at equal quality, as printed
        eq = equal_quality(curves, ref, 16)
        assert f"({ref}): {ref} " in text and f"-> {eq.ratio('transfer[knob]'):.2f}x" in text
        assert f"geometric mean, {ref} / transfer[knob] at {ref}'s level" in text
    first = {m: [c[7] for c in runs] for m, runs in curves.items()}  # best of the first batch
    print(first)
    # the global model's first batches (nothing of C9 measured yet) beat random first batches
    assert np.mean(first["transfer[knob]"]) < 0.9 * np.mean(first["random"])


def test_transfer_from_another_network_alone(tmp_path, monkeypatch, capsys, seed):
    """``--sources none``: the other network's log is the global model's only source; without
    ``--extra-logs`` there is nothing to learn from, and with a log that holds no record of the
    template the run says so."""
    from pyvta.tuner.cli_support import parse_workload

    bench = _bench()
    raw = InProcessMeasurer(KnobCost(), repeats=2)
    monkeypatch.setattr(bench, "_measurers", lambda a: (raw, CachedMeasurer(raw, a.cache)))
    other = tmp_path / "other_net.jsonl"
    tune(parse_workload("nchwc:C10"), 12, raw, "random", 6, log=str(other), seed=seed,
         progress=False)  # fmt: skip
    # a whole network's log holds the target layer too: its records must not train the model
    tune(parse_workload("nchwc:C9"), 4, raw, "random", 4, log=str(other), seed=seed,
         progress=False)  # fmt: skip
    argv = ["--task", "cpu", "--sources", "none", "--targets", "C9", "--trials", "8",
            "--batch", "4", "--seeds", "1", "--cache", str(tmp_path / "tgt.jsonl"),
            "--plot", ""]  # fmt: skip
    with pytest.raises(SystemExit):
        bench.main(argv)
    assert "--sources none needs --extra-logs" in capsys.readouterr().err
    assert bench.main([*argv, "--extra-logs", str(other)]) == 0
    text = capsys.readouterr().out
    assert "sources none -> targets C9" in text and "source: 12 records of 1 layers" in text
    assert "12 records of 1 tasks of cpu.conv2d_nchwc" in text  # C10's; C9's 4 left out
    assert "C9    transfer[knob]" in text
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert bench.main([*argv, "--extra-logs", str(empty)]) == 2
    assert "no source records" in capsys.readouterr().err


def _search_bench():
    path = BENCH.with_name("tune_search.py")
    spec = importlib.util.spec_from_file_location("tune_search", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _recording(module, monkeypatch, runs: list, keep):
    """Wrap ``module.tune``: append each run's measured indices to ``runs`` where
    ``keep(task, kw)``."""
    inner = module.tune

    def recorded(task, *args, **kw):
        res = inner(task, *args, **kw)
        if keep(task, kw):
            runs.append([i for _, i, _ in res.history])
        return res

    monkeypatch.setattr(module, "tune", recorded)


def test_scratch_runs_are_the_search_benchmarks_model_runs(tmp_path, monkeypatch):
    """With the same seeds, trials, batch, features and ``--trend``, the transfer benchmark's
    ``scratch`` runs are ``tune_search.py``'s ``xgb`` runs, config for config: a shared
    ``--cache`` then measures only the transfer runs again. ``--trend 3`` is not the
    template's own weight (0), so the transfer benchmark must pass it on."""
    import pyvta.tuner.comparison as comparison
    from pyvta.tuner.cli_support import parse_workload

    raw = InProcessMeasurer(KnobCost(), repeats=2)
    monkeypatch.setattr(comparison, "cpu_comparison_measurer", lambda a, cost="min": raw)
    target = parse_workload("nchwc:C9").key
    common = ["--task", "cpu", "--trials", "16", "--batch", "8", "--seeds", "2", "--trend", "3",
              "--cache", str(tmp_path / "c.jsonl")]  # fmt: skip
    print("seeds 0 and 1 of both benchmarks")
    search = _search_bench()
    searched: list = []
    _recording(search, monkeypatch, searched, lambda task, kw: True)
    assert search.main([*common, "--layer", "C9", "--tuners", "xgb"]) == 0

    bench = _bench()  # its own measurers of --task cpu (LAYER_KINDS["cpu"]): raw's, cached
    scratch: list = []
    _recording(bench, monkeypatch, scratch,
               lambda task, kw: task.key == target and "base" not in kw)  # fmt: skip
    argv = [*common, "--sources", "C12", "--targets", "C9", "--source-trials", "8",
            "--source-log", str(tmp_path / "src.jsonl"), "--no-random",
            "--plot", ""]  # fmt: skip
    assert bench.main(argv) == 0
    assert len(searched) == len(scratch) == 2
    assert all(len(run) == 16 for run in scratch)
    assert scratch == searched
