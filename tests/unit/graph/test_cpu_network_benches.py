"""The CPU network benchmarks run end to end on a small network (MobileNet at 32 x 32, one
round or two): ``cpu_network.py`` (pyvta against onnxruntime, the control, the per-layer table
from onnxruntime's profile), ``cpu_headroom.py`` (its bounds: each conv layer brought up to the
FMA peak, or to its memory floor) and ``cpu_layers_alone.py`` (each conv layer in the network
beside its kernel alone), and ``cpu_grouped.py`` (grouped convs, untuned beside what they ran
before, on two cases and a small ResNeXt). The bounds' arithmetic is checked with the peak and
the bandwidth replaced by values whose bound is known: an endless peak leaves only the other
nodes, a peak of nothing leaves every layer as measured."""

from __future__ import annotations

import argparse
import importlib
import re

import pytest

from pyvta.compiler.graph import zoo

SIZE = 32


@pytest.fixture(scope="module")
def mobilenet(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("benches") / f"mobilenet_{SIZE}.onnx"
    return zoo.save_model("mobilenet", str(path), size=SIZE, seed=0)


@pytest.fixture
def benches(monkeypatch, request):
    """The benchmark modules, importable by name as when run (``cpu_layers_alone`` imports
    ``cpu_headroom``)."""
    monkeypatch.syspath_prepend(str(request.config.rootpath / "benchmarks"))
    return lambda name: importlib.import_module(name)


def _args(**kw) -> argparse.Namespace:
    return argparse.Namespace(size=SIZE, rounds=2, threads=1, peak_seconds=0.01, **kw)


def test_headroom_bounds_follow_the_peak_and_the_memory_floor(mobilenet, benches, monkeypatch):
    hr = benches("cpu_headroom")
    monkeypatch.setattr(hr, "BANDWIDTH_BUFFER_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(hr, "last_level_cache_bytes", lambda: None)
    monkeypatch.setattr(hr, "read_bandwidth_gbs", lambda buffer, threads: 1e6)

    def at_peak(gflops):
        monkeypatch.setattr(hr, "peak_gflops", lambda threads, seconds, n: [gflops])
        return hr.headroom(mobilenet, None, _args())

    endless = at_peak(1e15)  # every conv layer would take no time
    assert endless["conv_ms"] > 0 and endless["other_ms"] > 0
    total = endless["conv_ms"] + endless["other_ms"]
    assert endless["bound"] == pytest.approx(total / endless["other_ms"], rel=1e-6)
    assert endless["floor_bound"] == pytest.approx(endless["bound"], rel=1e-6)  # no floor
    assert at_peak(1e-9)["bound"] == pytest.approx(1.0, abs=1e-9)  # every layer above it
    # weights outgrow the cache, read at almost nothing a second: each layer's floor is its
    # weights, above what it measured, so nothing is left by the floor
    monkeypatch.setattr(hr, "last_level_cache_bytes", lambda: 1)
    monkeypatch.setattr(hr, "read_bandwidth_gbs", lambda buffer, threads: 1e-12)
    slow_memory = at_peak(1e15)
    assert slow_memory["floor_bound"] == pytest.approx(1.0, abs=1e-9)
    assert slow_memory["bound"] > 1.0


def test_each_conv_layer_in_the_network_beside_its_kernel_alone(mobilenet, benches, capsys):
    alone = benches("cpu_layers_alone")
    hr = benches("cpu_headroom")
    got = alone.compare(mobilenet, None, _args(alone_runs=2))
    out = capsys.readouterr().out
    keys = {wl.key for wl in hr.compiled_convs(mobilenet, None)[1].values()}
    rows = [ln for ln in out.splitlines() if ln.strip().startswith("conv2d_nchwc")]
    assert len(rows) == len(keys)  # one row per conv workload
    assert got["network_ms"] > 0 and got["alone_ms"] > 0 and got["cold_ms"] > 0
    total = re.search(r"conv layers: ([\d.]+) ms in the network, ([\d.]+) ms alone", out)
    assert float(total[1]) == pytest.approx(got["network_ms"], abs=0.006)
    assert float(total[2]) == pytest.approx(got["alone_ms"], abs=0.006)
    cold = re.search(r"([\d.]+) ms alone cold", out)
    assert float(cold[1]) == pytest.approx(got["cold_ms"], abs=0.006)


def test_the_network_benchmark_with_its_control_and_per_layer_table(benches, capsys):
    net = benches("cpu_network")
    ratios = net.bench_model("mobilenet", SIZE, 2, 1, None, 0, per_layer=True, control=True)
    assert set(ratios) == {"default", "default again"} and all(r > 0 for r in ratios.values())
    out = capsys.readouterr().out
    assert re.search(r"mobilenet default again vs default: [\d.]+x \(medians\)", out)
    assert out.count("relative error") == 2  # each compiled network checked against onnxruntime
    # the per-layer table sets pyvta's nodes beside onnxruntime's of the same kind
    assert "per layer, pyvta default against onnxruntime" in out
    conv = re.search(r"total cpu_conv2d\s+pyvta\s+([\d.]+) ms\s+onnxruntime\s+([\d.]+) ms", out)
    assert conv and float(conv[1]) > 0 and float(conv[2]) > 0, out  # its Conv nodes matched


def test_grouped_bench_runs_untuned_beside_what_grouped_layers_ran_before(benches, capsys):
    """``cpu_grouped.py`` on two cases and a small ResNeXt: a row each, onnxruntime and the
    untuned network timed; groups narrower than the block (ResNeXt-50's stage 1, the small
    ResNeXt's stages 2 and 3) run beside the direct template; groups of a block, where the
    host has 32 registers, beside the dense rule's tiles (two blocks a tile, of rows), else the
    row says every schedule is the one it ran before."""
    from pyvta.compiler.backend.llvm import CpuTarget

    cg = benches("cpu_grouped")
    cases = "group width 16 at 28,resnext50 stage 1"
    args = ["--rounds", "2", "--threads", "1", "--cases", cases]
    assert cg.main([*args, "--network", "resnext26", "--size", str(SIZE)]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("  ")]
    assert len(rows) == 3 and all("onnxruntime" in r and "untuned" in r for r in rows)
    wide = CpuTarget.host().vector_registers >= 32
    assert ("dense rule " in rows[0]) == wide and "direct " not in rows[0]
    assert ("the one it ran before" in rows[0]) == (not wide)
    assert "untuned / direct" in rows[1] and "dense rule" not in rows[1]
    assert "untuned / direct" in rows[2] and re.search(r"layers changed: \d+ direct\)", rows[2])
    with pytest.raises(SystemExit):
        cg.main(["--cases", "no such case"])


def test_the_network_benchmark_sets_two_logs_choices_side_by_side(
    mobilenet, benches, tmp_path, capsys
):
    """``cpu_network.py --tuning-log A --also-log B --control``: both logs' choices compiled,
    checked against onnxruntime and timed in the same rounds, each against the default and the
    default built again."""
    from pyvta.tuner.cpu_network import cpu_network_layers, tune_cpu_network
    from pyvta.tuner.measure import Backend, InProcessMeasurer

    class ByIndex(Backend):  # builds nothing; each seed's random draws log other bests
        def build(self, task, config):
            return None

        def run(self, task, config, artifact, repeats):
            return [1e-3 * (1 + 1e-6 * config.index)] * repeats

    layers = cpu_network_layers(mobilenet)
    logs = [str(tmp_path / f"log{seed}.jsonl") for seed in (0, 1)]
    for seed, log in enumerate(logs):
        measurer = InProcessMeasurer(ByIndex(), repeats=1)
        tune_cpu_network(layers, 2, log=log, tuner="random", seed=seed, measurer=measurer,
                         progress=False, final_check=0)  # fmt: skip
    net = benches("cpu_network")
    ratios = net.bench_model("mobilenet", SIZE, 2, 1, logs[0], 0, control=True, also=logs[1:])
    assert set(ratios) == {"default", "default again", "tuned", "tuned 2"}
    out = capsys.readouterr().out
    assert out.count("relative error") == 4
    for key in ("tuned", "tuned 2"):
        for base in ("default", "default again"):
            assert re.search(rf"mobilenet {key} vs {base}: [\d.]+x \(medians\)", out), (key, base)
