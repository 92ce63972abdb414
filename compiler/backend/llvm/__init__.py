"""CPU backend: loop IR -> LLVM IR -> host machine code via llvmlite.

Its names are imported on first use (the arrays a kernel is called with, ``aligned_empty`` and
``check_arrays``, are ``pyvta.runtime.arrays``': a board's runtime has no llvmlite).
"""

import importlib

_EXPORTS = {
    "CpuTarget": "target",
    "cpu_scopes": "target",
    "Module": "module",
    "build_llvm": "build",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
