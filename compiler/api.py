"""Top-level API: ``lower(schedule, args)`` and ``build(schedule, args, target="llvm")``."""

from __future__ import annotations

import os

from pyvta.compiler.ir.stmt import PrimFunc
from pyvta.compiler.lower.schedule_ops import lower_schedule
from pyvta.compiler.passes.pipeline import PASSES, run_passes

_CACHES: dict = {}


def lower(sch, args, name: str = "main") -> PrimFunc:
    """Loop IR of schedule ``sch`` with parameters ``args`` (tensors, in call order).
    ``print(lower(...))`` shows its stable text."""
    from pyvta.compiler.ir.verify import verify

    return run_passes(verify(lower_schedule(sch, args, name)), PASSES)


def default_cache_dir() -> str:
    """``$PYVTA_CACHE_DIR`` if set, else ``~/.cache/pyvta/llvm``."""
    env = os.environ.get("PYVTA_CACHE_DIR")
    if env:
        return os.path.join(env, "llvm")
    return os.path.join(os.path.expanduser("~"), ".cache", "pyvta", "llvm")


def build(sch, args, target: str = "llvm", name: str = "main", cache_dir=..., num_threads=None):
    """Compile ``sch`` for ``target`` (only ``"llvm"``: the host CPU) and return a callable
    ``Module`` taking numpy arrays in the order of ``args``.

    ``cache_dir``: where compiled kernels are kept on disk (default ``default_cache_dir()``;
    None keeps them in memory only). ``num_threads``: threads for ``parallel`` loops
    (default: all cores)."""
    from pyvta.compiler.backend.llvm import CpuTarget, build_llvm
    from pyvta.compiler.backend.llvm.cache import KernelCache

    if target != "llvm":
        raise ValueError(f"target {target!r} is not supported here (allowed: 'llvm')")
    func = sch if isinstance(sch, PrimFunc) else lower(sch, args, name)
    directory = default_cache_dir() if cache_dir is ... else cache_dir
    cache = _CACHES.setdefault(directory, KernelCache(directory))
    return build_llvm(func, CpuTarget.host(num_threads), cache)
