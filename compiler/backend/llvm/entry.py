"""``target="llvm"``: the host CPU as a ``compiler.build`` backend (kernel cache selection)."""

from __future__ import annotations

from pyvta.compiler.backend.llvm.passes import LLVM_PASSES

_CACHES: dict = {}


def default_cache_dir() -> str:
    """The ``llvm`` folder of the cache root (``pyvta.cache``: ``$PYVTA_CACHE_DIR/llvm``)."""
    from pyvta import cache

    return str(cache.folder("llvm"))


class LlvmBackend:
    name = "llvm"
    passes = LLVM_PASSES

    def build(self, func, cache_dir=..., num_threads=None, func_key=None, cpu_features=None):
        """A callable ``Module`` for the host CPU. ``cache_dir``: where compiled kernels are
        kept on disk (default ``default_cache_dir()``; None keeps them in memory only).
        ``num_threads``: threads for ``parallel`` loops (default: all cores). ``func_key``
        (``cache.func_key``): also keep the lowered function, for ``cached``.
        ``cpu_features``: the x86 feature level to compile for (``target.X86_LEVELS``; default
        ``$PYVTA_CPU_FEATURES``, else the host's)."""
        from pyvta.compiler.backend.llvm import CpuTarget, build_llvm

        target = CpuTarget.host(num_threads, cpu_features)
        return build_llvm(func, target, _cache(cache_dir), func_key)

    def cached(self, func_key, cache_dir=..., num_threads=None, cpu_features=None):
        """The module of the function kept under ``func_key`` by ``build``, or None
        (``cpu_features`` as for ``build``)."""
        from pyvta.compiler.backend.llvm import CpuTarget
        from pyvta.compiler.backend.llvm.build import cached_func

        target = CpuTarget.host(num_threads, cpu_features)
        return cached_func(func_key, target, _cache(cache_dir))

    def keeps(self, func_key, cache_dir=...) -> bool:
        """Whether ``cached`` finds a function kept under ``func_key`` on disk (a fresh
        process would too); false where the cache is in memory only."""
        return _cache(cache_dir).has_func(func_key)


def _cache(cache_dir):
    from pyvta.compiler.backend.llvm.cache import KernelCache

    directory = default_cache_dir() if cache_dir is ... else cache_dir
    return _CACHES.setdefault(directory, KernelCache(directory))


BACKEND = LlvmBackend()
