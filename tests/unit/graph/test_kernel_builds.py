"""The host's kernels built (``compiler.targets.cpu.builds``): who builds, what the workers
leave in the disk cache, and what this process does with a kernel no worker built."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest

from pyvta import workers
from pyvta.compiler.backend.llvm import entry
from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.onnx_import import import_onnx
from pyvta.compiler.graph.pipeline import options_for, run_pipeline
from pyvta.compiler.targets.cpu import builds
from pyvta.compiler.targets.cpu import kernels as cpu_kernels
from pyvta.compiler.targets.cpu.kernels import CpuKernels, graph_spec
from pyvta.runtime import cpu_kernels as runtime_kernels
from pyvta.runtime.compiled_model import CompiledModel, run_model

SEED = 5


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    """A small ResNet's layout plan, no kernel built (seed ``SEED``)."""
    print("model seed", SEED)
    path = tmp_path_factory.mktemp("zoo") / "resnet18_32.onnx"
    onnx.save(zoo.resnet(18, size=32, width=16, classes=10, seed=SEED), path)
    opts = dataclasses.replace(options_for("cpu"), cpu_build=False)
    return run_pipeline(import_onnx(path), opts)


def _specs(graph, threads):
    return [graph_spec(graph, n, threads) for n in runtime_kernels.compiled_nodes(graph)]


def _fresh_process(monkeypatch, cache):
    """An empty disk cache at ``cache`` and no kernel built in this process."""
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(cache))
    monkeypatch.setattr(builds, "_MODULES", {})
    monkeypatch.setattr(entry, "_CACHES", {})


def _run(graph, threads):
    """The plan's output on a fixed input (seed ``SEED``), its kernels built by ``CpuKernels``,
    and the nodes this process lowered to build them."""
    lowered = []
    real = cpu_kernels.node_schedule
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cpu_kernels, "node_schedule", lambda *a: lowered.append(a[0].name) or real(*a))
        backend = CpuKernels(graph, threads)
    x = zoo.sample_inputs(1, 32, seed=SEED)[0]
    (out,), _ = run_model(CompiledModel(graph, "cpu"), x, backends={"cpu": backend})
    return out, lowered


def test_who_builds(monkeypatch):
    """Workers for 4 or more missing kernels on 2 or more CPUs, capped by the environment; a
    bad value is refused by name (``pyvta.workers.workers_for``)."""
    least = builds.PARALLEL_MIN_KERNELS
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda _pid: {0, 1, 2})
    monkeypatch.delenv(workers.WORKERS_ENV, raising=False)
    assert workers.workers_for(least - 1, least) == 0
    assert workers.workers_for(least, least) == 3
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    assert workers.workers_for(10, least) == 2
    monkeypatch.setenv(workers.WORKERS_ENV, "1")
    assert workers.workers_for(10, least) == 0
    monkeypatch.setenv(workers.WORKERS_ENV, "two")
    with pytest.raises(ValueError, match="PYVTA_BUILD_WORKERS must be a whole number"):
        workers.workers_for(10, least)
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda _pid: {0})
    monkeypatch.delenv(workers.WORKERS_ENV)
    assert workers.workers_for(10, least) == 0


def test_kernels_built_in_workers_are_found_on_disk(plan, tmp_path, monkeypatch):
    """Two workers build every kernel into the disk cache (none in this process); building the
    network then lowers nothing here, and it computes what kernels built here compute, bit for
    bit."""
    _fresh_process(monkeypatch, tmp_path / "serial")
    monkeypatch.setenv(workers.WORKERS_ENV, "0")
    want, lowered = _run(plan, 2)
    specs = _specs(plan, 2)
    kernels = len({spec.what for spec in specs})  # equal layers share one
    assert len(lowered) == kernels >= builds.PARALLEL_MIN_KERNELS

    _fresh_process(monkeypatch, tmp_path / "workers")
    assert builds.build_missing(specs, workers=2) == 2
    assert builds._MODULES == {}  # nothing built in this process
    for spec in specs:
        assert entry.BACKEND.keeps(spec.func_key), spec.what
    assert builds.build_missing(specs, workers=2) == 0  # none missing now
    got, lowered = _run(plan, 2)
    assert lowered == []
    np.testing.assert_array_equal(got, want)


def test_a_kernel_no_worker_built_is_built_here(plan, tmp_path, monkeypatch):
    """Workers that time out on every kernel (killed) leave nothing on disk; this process builds
    each kernel itself and computes the same output."""
    _fresh_process(monkeypatch, tmp_path / "serial")
    monkeypatch.setenv(workers.WORKERS_ENV, "0")
    want, _ = _run(plan, 1)
    _fresh_process(monkeypatch, tmp_path / "timeouts")
    monkeypatch.delenv(workers.WORKERS_ENV)
    monkeypatch.setattr(builds, "BUILD_TIMEOUT_S", 0.0)
    specs = _specs(plan, 1)
    assert builds.build_missing(specs, workers=2) == 2
    assert not list((tmp_path / "timeouts").rglob("*.func"))
    got, lowered = _run(plan, 1)
    assert len(lowered) == len({spec.what for spec in specs})
    np.testing.assert_array_equal(got, want)


def test_calibration_builds_its_conv_gemms_before_it_runs(tmp_path, monkeypatch):
    """The GEMMs calibration's float convs run on (``calibrate.conv_gemms``, from
    ``runtime.cpu_ops.conv_gemm``) are the ones its runs ask for, so building them first on
    every core leaves none of them to build one at a time."""
    from pyvta.compiler.graph import calibrate
    from pyvta.compiler.targets import jit

    path = tmp_path / "resnet18_32.onnx"
    onnx.save(zoo.resnet(18, size=32, width=16, classes=10, seed=SEED), path)
    graph = import_onnx(path)
    asked, op = set(), [None]
    real_op, real_gemm = calibrate.run_cpu_op, jit.gemm_kernel

    def run_op(name, *a):
        op[0] = name
        return real_op(name, *a)

    monkeypatch.setattr(calibrate, "run_cpu_op", run_op)
    monkeypatch.setattr(jit, "gemm_kernel", lambda *s: asked.add((op[0], s)) or real_gemm(*s))
    monkeypatch.setattr(calibrate, "build_conv_gemms", lambda g: 0)  # asked, not built ahead
    calibrate.collect_ranges(graph, [{graph.inputs[0]: zoo.sample_inputs(1, 32, seed=SEED)[0]}])
    shapes = calibrate.conv_gemms(graph)
    assert len(shapes) >= builds.PARALLEL_MIN_KERNELS
    assert shapes == {s for name, s in asked if name == "conv2d"}
