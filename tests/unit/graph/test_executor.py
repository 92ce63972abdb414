"""Executor: pluggable VTA backend, per-layer timing table, buffer release."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.onnx_import import import_onnx
from pyvta.compiler.graph.pipeline import options_for, run_pipeline
from pyvta.runtime.executor import Executor, plan_frees
from pyvta.runtime.ir import GraphError
from pyvta.runtime.vta_ops import GoldenVta


class CountingVta(GoldenVta):
    """A stand-in accelerator backend: golden arithmetic, counts calls, reports cycles."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.last_cycles = None

    def conv2d(self, x, w, bias, res, p):
        self.calls += 1
        self.last_cycles = 1000 + self.calls
        return super().conv2d(x, w, bias, res, p)


@pytest.fixture(scope="module")
def vta_graph():
    g = import_onnx(zoo.resnet(18, size=32, width=16, classes=10, seed=5))
    cal = [{"input": x} for x in zoo.sample_inputs(4, 32, seed=6)]
    return run_pipeline(g, options_for("vta", cal, vta_partition="legacy"))


def test_pluggable_backend_and_timing_table(vta_graph):
    backend = CountingVta()
    x = zoo.sample_inputs(1, 32, seed=9)[0]
    (out,), table = Executor(vta_graph, backend).run({"input": x})
    (ref,), _ = Executor(vta_graph).run({"input": x})
    np.testing.assert_array_equal(out, ref)
    vta_rows = [r for r in table.rows if r.target == "vta"]
    assert backend.calls == len(vta_rows) == 19
    assert vta_rows[-1].cycles == 1019
    assert {r.target for r in table.rows} == {"cpu", "vta"}
    text = table.format()
    print(text)
    assert "vta_conv2d" in text and "share" in text and "device time" in text
    row = vta_rows[-1]
    assert row.device_ms(100.0) == pytest.approx(row.cycles / 1e5)  # cycles at 100 MHz
    cpu_row = next(r for r in table.rows if r.target == "cpu")
    assert cpu_row.device_ms(100.0) == cpu_row.ms
    assert table.total_ms == pytest.approx(sum(table.by_target_ms().values()))


def test_buffers_are_freed_after_last_use(vta_graph):
    frees = plan_frees(vta_graph)
    freed = [name for names in frees for name in names]
    assert len(freed) == len(set(freed))
    assert not set(freed) & (set(vta_graph.outputs) | set(vta_graph.constants))
    x = zoo.sample_inputs(1, 32, seed=9)[0]
    _, table = Executor(vta_graph).run({"input": x})
    produced = sum(
        np.prod(v.shape) * np.dtype(v.dtype).itemsize
        for v in (vta_graph.values[n.outputs[0]] for n in vta_graph.nodes)
    )
    assert 0 < table.peak_live_bytes < produced  # strictly less than keeping everything


def test_input_shape_mismatch_is_reported(vta_graph):
    with pytest.raises(GraphError, match="expected"):
        Executor(vta_graph).run({"input": np.zeros((1, 3, 16, 16), np.float32)})


class GcProbeVta(GoldenVta):
    """Records whether the cyclic collector was on at each accelerator node; fails on the 3rd."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.seen: list[bool] = []
        self.fail_at = fail_at

    def conv2d(self, x, w, bias, res, p):
        self.seen.append(gc.isenabled())
        if len(self.seen) == self.fail_at:
            raise RuntimeError("probe failure")
        return super().conv2d(x, w, bias, res, p)


def test_collector_paused_during_inference_and_restored(vta_graph):
    x = zoo.sample_inputs(1, 32, seed=9)[0]
    assert gc.isenabled()
    probe = GcProbeVta()
    Executor(vta_graph, probe).run({"input": x})
    assert probe.seen and not any(probe.seen)
    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="probe failure"):
        Executor(vta_graph, GcProbeVta(fail_at=3)).run({"input": x})
    assert gc.isenabled()  # restored after a failing node too
    gc.disable()
    try:  # a caller that had it off keeps it off
        Executor(vta_graph, GcProbeVta()).run({"input": x})
        assert not gc.isenabled()
    finally:
        gc.enable()
