"""``CpuBackend(timer="thread")``: one-threaded kernels timed by the calling thread's CPU time
(steady on a shared machine; ``benchmarks/cpu_timer_noise.py`` measures how steady), the min of
repeats (``MinOfRepeats``), and the ResNet-18 layers as the CPU network runs them
(``nchwc:C1``..)."""

import time

import pytest

from pyvta.tuner.measure import CachedMeasurer, InProcessMeasurer, LocalMeasurer, MinOfRepeats
from pyvta.tuner.synthetic import SyntheticBackend, tiled_gemm_task


def _gemm_config(task, fitting_tile, parallel: bool):
    knobs = {
        "tile": fitting_tile(task, 4, 16),
        "bk": 4,
        "parallel": parallel,
        "panels_outer": False,
    }
    return task.space.config({**knobs, "pack_b": True})


def test_thread_timer_builds_one_thread_and_measures_right_answers(tmp_path, fitting_tile):
    from pyvta.tuner.cpu import gemm_task
    from pyvta.tuner.cpu_measure import CpuBackend

    task = gemm_task(64, 64, 64)
    backend = CpuBackend(str(tmp_path), min_repeat_ms=2.0, timer="thread")
    assert backend.num_threads == 1 and "thread" in backend.describe()
    mod, _ = backend._module(task, _gemm_config(task, fitting_tile, parallel=True))
    assert mod.target.num_threads == 1  # the parallel loop runs in the calling thread
    cfgs = [_gemm_config(task, fitting_tile, p) for p in (True, False)]
    with LocalMeasurer(backend, repeats=3) as m:  # checked against the reference (check=True)
        res = m.measure(task, cfgs)
    print([(c.to_dict(), r.costs) for c, r in zip(cfgs, res, strict=True)])
    assert all(r.ok and len(r.costs) == 3 for r in res), [r.msg[-600:] for r in res]
    assert all(0 < c < 0.1 for r in res for c in r.costs)


def test_thread_timer_reads_the_thread_clock(tmp_path, monkeypatch, fitting_tile):
    """The kernel's time comes from ``time.thread_time`` (a fake one here that advances 1 ms a
    read): 1 ms for the first call sets 4 calls a repeat of 4 ms, so each repeat is 1 / 4 ms."""
    from pyvta.tuner.cpu import gemm_task
    from pyvta.tuner.cpu_measure import CpuBackend

    task = gemm_task(64, 64, 64)
    cfg = _gemm_config(task, fitting_tile, parallel=False)
    backend = CpuBackend(str(tmp_path), min_repeat_ms=4.0, timer="thread")
    backend.build(task, cfg)
    ticks = iter(range(10**6))
    monkeypatch.setattr(time, "thread_time", lambda: next(ticks) * 1e-3)
    costs = backend.run(task, cfg, None, repeats=3)
    assert costs == pytest.approx([0.25e-3] * 3)


def test_thread_timer_refuses_more_threads_and_unknown_timers():
    from pyvta.tuner.cpu_measure import CpuBackend

    with pytest.raises(ValueError, match="num_threads must be 1"):
        CpuBackend("/tmp/unused", num_threads=2, timer="thread")
    with pytest.raises(ValueError, match="not one of"):
        CpuBackend("/tmp/unused", timer="cycles")


def test_min_of_repeats_reports_the_fastest_repeat_and_keeps_every_one(tmp_path):
    task = tiled_gemm_task(64, 64, 64)
    noisy = InProcessMeasurer(SyntheticBackend(noise=0.2), repeats=5)
    cached = CachedMeasurer(noisy, str(tmp_path / "log.jsonl"))
    meas = MinOfRepeats(cached)
    cfgs = [task.space.get(i) for i in range(12)]
    out = meas.measure(task, cfgs)
    full = [cached.cache[(task.key, c.index)] for c in cfgs]
    ok = [r.ok for r in full]
    assert sum(ok) >= 2 and all(len(r.costs) == 5 for r in full if r.ok)
    assert all(min(r.costs) < r.cost for r in full if r.ok)  # the median is not the min
    want = [min(r.costs) if r.ok else r.cost for r in full]
    assert [r.cost for r in out] == want
    assert meas.costs(task) == {c.index: w for c, w in zip(cfgs, want, strict=True)}
    assert meas.n_measured == 12 and meas.cache is cached.cache
    meas.close()


def test_nchwc_layers_are_the_resnet18_network_convs(tmp_path):
    """``nchwc:Cn`` is the workload the CPU network runs for that layer (channel blocks from
    the layout plan): every conv of the zoo ResNet-18 is one of C1..C12 (C3, 1x1 stride 1 at
    56 x 56, is not in ResNet-18)."""
    from pyvta.compiler.graph import zoo
    from pyvta.tuner.cli_support import RESNET18, parse_workload, resnet18_nchwc_workload
    from pyvta.tuner.cpu import CONV2D_NCHWC, nchwc_conv_tasks
    from pyvta.tuner.cpu_network import cpu_network_layers

    path = zoo.save_model("resnet18", str(tmp_path / "r18.onnx"))
    net = {layer.workload.key for layer in cpu_network_layers(path)}  # the tuning log's names
    ours = {resnet18_nchwc_workload(n).key: n for n in RESNET18}
    assert net <= set(ours), net - set(ours)
    assert {ours[k] for k in net} == set(RESNET18) - {"C3"}
    c1 = resnet18_nchwc_workload("C1")
    assert (c1.c, c1.ib) == (3, 3)  # the image, read as one block
    task = parse_workload("nchwc:C7")
    assert task.template is CONV2D_NCHWC
    assert task.key == nchwc_conv_tasks(resnet18_nchwc_workload("C7"))[0].key
    with pytest.raises(ValueError, match="ResNet-18 has"):
        resnet18_nchwc_workload("C13")


def test_timer_noise_benchmark_times_configs_alone_and_two_at_a_time(tmp_path, capsys):
    """``benchmarks/cpu_timer_noise.py --pairs --from-log``: the fastest configs of a tuning log
    timed alone and two at a time (2 run workers), each config's ratio printed (the log's
    configs: seed 0's first valid points, given made-up costs)."""
    import importlib.util
    import re
    from pathlib import Path

    import numpy as np

    from pyvta.tuner.cli_support import parse_workload
    from pyvta.tuner.log import TuningLog, make_record
    from pyvta.tuner.measure import MeasureResult

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "cpu_timer_noise.py"
    spec = importlib.util.spec_from_file_location("cpu_timer_noise", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    task = parse_workload("nchwc:C11")
    points = task.space.sample_unique(np.random.default_rng(0), 400)
    valid = [task.space.get(i) for i in points if task.space.problem(task.space.get(i)) is None]
    with TuningLog(tmp_path / "c11.jsonl") as log:
        for n, cfg in enumerate(valid[:4]):
            log.append(make_record(task, cfg, MeasureResult(costs=(1.0 + n, 9.0, 1.0 + n))))
    argv = ["--layer", "C11", "--configs", "2", "--passes", "2", "--repeats", "2",
            "--min-repeat-ms", "1", "--pairs", "--from-log", str(tmp_path / "c11.jsonl")]  # fmt: skip
    assert bench.main(argv) == 0
    text = capsys.readouterr().out
    print(text)
    assert f"configs: the fastest of 4 in {tmp_path / 'c11.jsonl'}" in text
    table = text[text.index("timer ") :].splitlines()[1:5]  # the rows under the header
    rows = {line[:9].strip() for line in table}
    assert rows == {"wall", "thread", "thread x1", "thread x2"}
    m = re.search(r"\(min of its repeats\) two at a time / one at a time: median ([\d.]+) \(min ([\d.]+),"
                  r" max ([\d.]+)\)", text)  # fmt: skip
    assert m and "(median of its repeats) two at a time / one at a time: median" in text, text
    low, high = float(m.group(2)), float(m.group(3))
    assert 0.2 < low <= float(m.group(1)) <= high < 5.0  # the same kernels: within a few times
