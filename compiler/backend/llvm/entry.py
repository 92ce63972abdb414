"""``target="llvm"``: the host CPU as a ``compiler.build`` backend (kernel cache selection)."""

from __future__ import annotations

import os

from pyvta.compiler.backend.llvm.passes import LLVM_PASSES

_CACHES: dict = {}


def default_cache_dir() -> str:
    """``$PYVTA_CACHE_DIR`` if set, else ``~/.cache/pyvta/llvm``."""
    env = os.environ.get("PYVTA_CACHE_DIR")
    if env:
        return os.path.join(env, "llvm")
    return os.path.join(os.path.expanduser("~"), ".cache", "pyvta", "llvm")


class LlvmBackend:
    name = "llvm"
    passes = LLVM_PASSES

    def build(self, func, cache_dir=..., num_threads=None):
        """A callable ``Module`` for the host CPU. ``cache_dir``: where compiled kernels are
        kept on disk (default ``default_cache_dir()``; None keeps them in memory only).
        ``num_threads``: threads for ``parallel`` loops (default: all cores)."""
        from pyvta.compiler.backend.llvm import CpuTarget, build_llvm
        from pyvta.compiler.backend.llvm.cache import KernelCache

        directory = default_cache_dir() if cache_dir is ... else cache_dir
        cache = _CACHES.setdefault(directory, KernelCache(directory))
        return build_llvm(func, CpuTarget.host(num_threads), cache)


BACKEND = LlvmBackend()
