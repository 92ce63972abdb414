"""The host's compiled kernels, one home: each described by a :class:`KernelSpec`, built once
per process, kept on disk by its description, and those missing built on every core.

A spec names everything its kernel's code depends on besides the compiler's sources (``what``:
the op, its shapes and knobs, the threads, the CPU target's key) and how to lower it (a
module-level function and its arguments, so a worker process can lower it too). ``built``
returns its module: from this process (``_MODULES``), else from the disk cache's lowered
function (``cache.func_key(what)``: a fresh process neither lowers nor generates code), else
lowered and built here, its lowered function and code kept on disk. The float CPU target's
kernels (``cpu.kernels.node_spec``), the int8 ones (``cpu_int8.kernels``) and the host's GEMM
(``targets.jit.gemm_kernel``) go through it.

From an empty cache, building a network's kernels is most of its first run (ResNet-18's float
kernels: about 5.4 s of 7, one after another on one core). ``build_missing`` builds the specs
that neither this process nor the disk cache holds in worker processes (``pyvta.workers``, one
per CPU), the longest first (``KernelSpec.order``); each leaves its kernel in the disk cache,
where ``built`` then finds it. A kernel a worker did not build (an error, a crash, a timeout) is
left to ``built``, which builds it in this process and so raises any error where it belongs:
the workers save time and never decide a result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

PARALLEL_MIN_KERNELS = 4
"""Missing kernels below which they are built in this process: a worker takes about 0.3 s to
start, as long as a few small kernels take to build."""

BUILD_TIMEOUT_S = 600.0
"""A worker's time for one kernel before it is killed (and the kernel left to this process)."""


@dataclass(frozen=True)
class KernelSpec:
    """A host kernel to build: ``what`` describes it (JSON text), ``lower(*lower_args)`` returns
    its lowered ``PrimFunc`` (both picklable); built for ``num_threads`` threads and the x86
    feature level ``features`` (None: ``$PYVTA_CPU_FEATURES``, else the host's). ``order``: how
    long it takes to build, as a sort key (larger first; e.g. Winograd convs, then by FLOPs)."""

    what: str
    lower: Callable
    lower_args: tuple
    num_threads: int
    features: str | None = None
    order: tuple = (0, 0)

    @property
    def func_key(self) -> str:
        from pyvta.compiler.backend.llvm.cache import func_key

        return func_key(self.what)


_MODULES: dict[str, object] = {}  # KernelSpec.what -> built module, per process


def built_here(spec: KernelSpec) -> bool:
    """Whether this process holds ``spec``'s module."""
    return spec.what in _MODULES


def built(spec: KernelSpec):
    """``spec``'s module (``compiler.build``'s ``Module``), once per process: from this process,
    the disk cache, or lowered and built here (and kept on disk)."""
    from pyvta import compiler
    from pyvta.compiler.backend.llvm.entry import BACKEND

    mod = _MODULES.get(spec.what)
    if mod is None:
        threads, features = spec.num_threads, spec.features
        mod = BACKEND.cached(spec.func_key, num_threads=threads, cpu_features=features)
        if mod is None:
            func = spec.lower(*spec.lower_args)
            mod = compiler.build(
                func, num_threads=threads, func_key=spec.func_key, cpu_features=features
            )
        _MODULES[spec.what] = mod
    return mod


def lowered(template: Callable, *args):
    """The lowered function of ``template(*args)``'s schedule and tensors (a ``KernelSpec``'s
    ``lower`` for a template that needs nothing after lowering)."""
    from pyvta import compiler

    return compiler.lower(*template(*args))


def build_missing(specs, workers: int | None = None) -> int:
    """Build in worker processes, into the disk cache, the ``specs`` that neither this process
    nor the disk cache holds. ``workers``: how many (default ``pyvta.workers.workers_for``, at
    least ``PARALLEL_MIN_KERNELS`` missing; ``$PYVTA_BUILD_WORKERS`` caps them). Returns
    the workers started (0: none; ``built`` then builds the kernels here, as before)."""
    from pyvta.compiler.backend.llvm.entry import BACKEND
    from pyvta.workers import in_workers

    missing = {}
    for spec in specs:
        if not built_here(spec) and not BACKEND.keeps(spec.func_key):
            missing.setdefault(spec.what, spec)
    order = sorted(missing.values(), key=lambda s: s.order, reverse=True)  # the longest first
    jobs = [(_build, (spec,)) for spec in order]  # what fails there is built, or raises, here
    return in_workers(jobs, PARALLEL_MIN_KERNELS, BUILD_TIMEOUT_S, workers)


def build_all(specs) -> list:
    """The modules of ``specs``, in order: those missing built on every core first
    (``build_missing``)."""
    build_missing(specs)
    return [built(spec) for spec in specs]


def _build(spec: KernelSpec) -> None:
    """A worker's job: the kernel built and left in the disk cache (nothing sent back)."""
    built(spec)
