"""A network's kernels built in worker processes (``compiler.targets.cpu.parallel_build``):
who builds, what the workers leave in the disk cache, and what this process does with a kernel
no worker built."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest

from pyvta.compiler.backend.llvm import entry
from pyvta.compiler.graph import zoo
from pyvta.compiler.graph.onnx_import import import_onnx
from pyvta.compiler.graph.pipeline import options_for, run_pipeline
from pyvta.compiler.targets.cpu import kernels as cpu_kernels
from pyvta.compiler.targets.cpu import parallel_build
from pyvta.compiler.targets.cpu.kernels import CpuKernels, module_keys
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


def _jobs(graph):
    return [
        (n, *runtime_kernels.kernel_shapes(graph, n)) for n in runtime_kernels.compiled_nodes(graph)
    ]


def _kernels(jobs, threads) -> int:
    """The distinct kernels of ``jobs`` (equal layers share one)."""
    return len({module_keys(n, shapes, threads, None, images)[0] for n, shapes, images in jobs})


def _fresh_process(monkeypatch, cache):
    """An empty disk cache at ``cache`` and no kernel built in this process."""
    monkeypatch.setenv("PYVTA_CACHE_DIR", str(cache))
    monkeypatch.setattr(cpu_kernels, "_MODULES", {})
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
    bad value is refused by name."""
    monkeypatch.setattr(parallel_build.os, "sched_getaffinity", lambda _pid: {0, 1, 2})
    monkeypatch.delenv(parallel_build.WORKERS_ENV, raising=False)
    assert parallel_build.build_workers(3) == 0
    assert parallel_build.build_workers(4) == 3
    monkeypatch.setenv(parallel_build.WORKERS_ENV, "2")
    assert parallel_build.build_workers(10) == 2
    monkeypatch.setenv(parallel_build.WORKERS_ENV, "1")
    assert parallel_build.build_workers(10) == 0
    monkeypatch.setenv(parallel_build.WORKERS_ENV, "two")
    with pytest.raises(ValueError, match="PYVTA_BUILD_WORKERS must be a whole number"):
        parallel_build.build_workers(10)
    monkeypatch.setattr(parallel_build.os, "sched_getaffinity", lambda _pid: {0})
    monkeypatch.delenv(parallel_build.WORKERS_ENV)
    assert parallel_build.build_workers(10) == 0


def test_kernels_built_in_workers_are_found_on_disk(plan, tmp_path, monkeypatch):
    """Two workers build every kernel into the disk cache (none in this process); building the
    network then lowers nothing here, and it computes what kernels built here compute, bit for
    bit."""
    _fresh_process(monkeypatch, tmp_path / "serial")
    monkeypatch.setenv(parallel_build.WORKERS_ENV, "0")
    want, lowered = _run(plan, 2)
    jobs = _jobs(plan)
    assert len(lowered) == _kernels(jobs, 2) >= parallel_build.PARALLEL_MIN_KERNELS

    _fresh_process(monkeypatch, tmp_path / "workers")
    assert parallel_build.build_missing(jobs, 2, None, workers=2) == 2
    assert cpu_kernels._MODULES == {}  # nothing built in this process
    for node, shapes, images in jobs:
        _, fkey = module_keys(node, shapes, 2, None, images)
        assert entry.BACKEND.keeps(fkey), node.name
    assert parallel_build.build_missing(jobs, 2, None, workers=2) == 0  # none missing now
    got, lowered = _run(plan, 2)
    assert lowered == []
    np.testing.assert_array_equal(got, want)


def test_a_kernel_no_worker_built_is_built_here(plan, tmp_path, monkeypatch):
    """Workers that time out on every kernel (killed) leave nothing on disk; this process builds
    each kernel itself and computes the same output."""
    _fresh_process(monkeypatch, tmp_path / "serial")
    monkeypatch.setenv(parallel_build.WORKERS_ENV, "0")
    want, _ = _run(plan, 1)
    _fresh_process(monkeypatch, tmp_path / "timeouts")
    monkeypatch.delenv(parallel_build.WORKERS_ENV)
    monkeypatch.setattr(parallel_build, "BUILD_TIMEOUT_S", 0.0)
    jobs = _jobs(plan)
    assert parallel_build.build_missing(jobs, 1, None, workers=2) == 2
    assert not list((tmp_path / "timeouts").rglob("*.func"))
    got, lowered = _run(plan, 1)
    assert len(lowered) == _kernels(jobs, 1)
    np.testing.assert_array_equal(got, want)
