"""``CpuBackend(cache="cold")``: each timed call after the caches were streamed through, as a
network runs a layer (its weights cold), and the network tuner measuring that way
(``tuner.cpu_network.network_measurer``)."""

import time

import pytest

from pyvta.tuner.measure import LocalMeasurer


def _gemm_config(task, fitting_tile):
    knobs = {"tile": fitting_tile(task, 4, 16), "bk": 4, "parallel": False, "panels_outer": False}
    return task.space.config({**knobs, "pack_b": True})


@pytest.mark.parametrize("min_repeat_ms, calls", [(4.0, 4), (50.0, 10)])
def test_cold_cache_evicts_before_each_timed_call(
    tmp_path, monkeypatch, min_repeat_ms, calls, fitting_tile
):
    """A fake thread clock advancing 1 ms a read: the first call (1 ms) sets ``calls`` calls a
    repeat (at most ``COLD_MAX_CALLS``), each one timed alone right after an eviction."""
    from pyvta.compiler.backend.llvm.module import Module
    from pyvta.tuner import cpu_measure
    from pyvta.tuner.cpu import gemm_task

    assert cpu_measure.COLD_MAX_CALLS == 10
    task = gemm_task(64, 64, 64)
    cfg = _gemm_config(task, fitting_tile)
    backend = cpu_measure.CpuBackend(
        str(tmp_path), min_repeat_ms=min_repeat_ms, timer="thread", cache="cold",
        evict_bytes=1 << 20,
    )  # fmt: skip
    backend.build(task, cfg)
    events = []
    ticks = iter(range(10**6))

    def clock():
        events.append("t")
        return next(ticks) * 1e-3

    monkeypatch.setattr(time, "thread_time", clock)
    monkeypatch.setattr(cpu_measure, "evict", lambda buf: events.append(f"e{buf.nbytes}"))
    bind = Module.bind

    def counted_bind(self, *arrays):  # "k": one call of the kernel
        call = bind(self, *arrays)
        return lambda: (events.append("k"), call())

    monkeypatch.setattr(Module, "bind", counted_bind)
    monkeypatch.setattr(Module, "__call__", lambda *a: pytest.fail("an untimed kernel call"))
    costs = backend.run(task, cfg, None, repeats=3)
    assert costs == pytest.approx([1e-3] * 3)  # one tick per call, alone
    # the estimate, then the repeats: each kernel call right after its eviction, between
    # the two clock reads (no warm-up call)
    assert "".join(events) == "e1048576tkt" * (1 + 3 * calls)


def test_cold_cache_measures_right_answers_and_says_how(tmp_path, fitting_tile):
    from pyvta.tuner.cpu import gemm_task
    from pyvta.tuner.cpu_measure import CpuBackend

    task = gemm_task(64, 64, 64)
    backend = CpuBackend(str(tmp_path), min_repeat_ms=1.0, cache="cold", evict_bytes=3 << 20)
    assert "after 3 MiB streamed through the caches" in backend.describe()
    with LocalMeasurer(backend, repeats=2) as m:  # checked against the reference
        (res,) = m.measure(task, [_gemm_config(task, fitting_tile)])
    assert res.ok and len(res.costs) == 2 and all(0 < c < 0.1 for c in res.costs), res.msg[-600:]


def test_cold_cache_refuses_unknown_states_and_empty_evictions():
    from pyvta.tuner.cpu_measure import CpuBackend

    with pytest.raises(ValueError, match=r"cache 'hot' is not one of \('warm', 'cold'\)"):
        CpuBackend("/tmp/unused", cache="hot")
    with pytest.raises(ValueError, match="evict_bytes must be >= 1"):
        CpuBackend("/tmp/unused", cache="cold", evict_bytes=0)


def test_network_layers_are_measured_cold_after_the_networks_weights(tmp_path):
    """The network tuner's measurer evicts the network's weights (at least 64 MiB): ResNet-18's
    conv weights, counted from its layers, are those of the ONNX model."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    from pyvta.compiler.graph import zoo
    from pyvta.tuner.cpu_measure import DEFAULT_EVICT_BYTES, network_evict_bytes
    from pyvta.tuner.cpu_network import cpu_network_layers, network_measurer

    path = zoo.save_model("resnet18", str(tmp_path / "r18.onnx"))
    model = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    conv_bytes = sum(
        inits[n.input[1]].astype(np.float32).nbytes for n in model.graph.node if n.op_type == "Conv"
    )
    layers = cpu_network_layers(path)
    weights = sum(layer.count * layer.workload.weight_bytes for layer in layers)
    assert weights == conv_bytes and 40 << 20 < weights < DEFAULT_EVICT_BYTES
    m = network_measurer(layers)
    try:
        assert (m.backend.cache, m.backend.evict_bytes) == ("cold", DEFAULT_EVICT_BYTES)
    finally:
        m.close()
    assert network_evict_bytes(200 << 20) == 200 << 20  # a larger network's own
