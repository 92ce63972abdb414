"""A network's kernels built on every core this process may use.

From an empty cache, building a network's kernels is most of its first run (ResNet-18: about
5.4 s of 7, one kernel after another on one core). ``build_missing`` builds the kernels that
neither this process nor the disk cache holds in worker processes (``pyvta.workers``, one per
CPU), the largest first; each leaves its kernels in the disk cache, where ``node_module`` then
finds them. A kernel a worker did not build (an error, a crash, a timeout) is left to
``node_module``, which builds it in this process and so raises any error where it belongs: the
workers save time and never decide a result.
"""

from __future__ import annotations

import multiprocessing as mp
import os

from pyvta.compiler.targets.cpu.kernels import built_here, module_keys, node_module, node_workload

PARALLEL_MIN_KERNELS = 4
"""Missing kernels below which they are built in this process: a worker takes about 0.3 s to
start, as long as a few small kernels take to build."""

WORKERS_ENV = "PYVTA_BUILD_WORKERS"
"""Environment variable: the most worker processes ``build_missing`` starts (default: one per
CPU this process may run on; 0 or 1 builds every kernel in this process)."""

BUILD_TIMEOUT_S = 600.0
"""A worker's time for one kernel before it is killed (and the kernel left to this process)."""


def build_workers(missing: int) -> int:
    """Worker processes for ``missing`` kernels: 0 (build here) below ``PARALLEL_MIN_KERNELS``,
    on one CPU, inside a daemonic process (which may not start any) or where ``WORKERS_ENV``
    says at most 1."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    most = os.environ.get(WORKERS_ENV, "").strip()
    if most:
        try:
            cpus = min(cpus or 1, int(most))
        except ValueError:
            raise ValueError(f"${WORKERS_ENV} must be a whole number, got {most!r}") from None
    n = min(cpus or 1, missing)
    if missing < PARALLEL_MIN_KERNELS or n < 2 or mp.current_process().daemon:
        return 0
    return n


def build_missing(jobs, threads: int, features: str | None, workers: int | None = None) -> int:
    """Build in worker processes, into the disk cache, the kernels of ``jobs`` (``(node,
    in_shapes, images)`` as ``node_module`` takes them, for ``threads`` and ``features``) that
    neither this process nor the disk cache holds. ``workers``: how many (default
    ``build_workers``'s rule). Returns the workers started (0: none; the kernels are then built
    by ``node_module`` here, as before)."""
    from pyvta.compiler.backend.llvm.entry import BACKEND
    from pyvta.workers import WorkerPool

    missing = {}
    for node, shapes, images in jobs:
        key, fkey = module_keys(node, shapes, threads, features, images)
        if not built_here(key) and not BACKEND.keeps(fkey):
            missing.setdefault(fkey, (node, shapes, images))
    n = build_workers(len(missing)) if workers is None else min(workers, len(missing))
    if n < 1:
        return 0
    order = sorted(missing.values(), key=_build_cost, reverse=True)  # the longest first
    work = [(_build, (node, shapes, threads, features, images)) for node, shapes, images in order]
    with WorkerPool(n, max_jobs=None) as pool:
        for _ in pool.map(work, BUILD_TIMEOUT_S):
            pass  # what failed there is built, or raises, here
    return n


def _build(node, in_shapes, threads: int, features: str | None, images) -> None:
    """A worker's job: the kernel built and left in the disk cache (nothing sent back)."""
    node_module(node, in_shapes, threads, features, images)


def _build_cost(job) -> tuple[bool, int]:
    """How long a kernel takes to build, as an order: Winograd convs first (their transforms
    unroll into the largest code), then convs by their FLOPs, then the rest."""
    node, shapes, _ = job
    if node.op != "cpu_conv2d":
        return (False, 0)
    winograd = node.attrs["schedule"]["template"] == "winograd"
    return (winograd, node_workload(node, shapes[0]).flops)
