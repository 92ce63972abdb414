"""Kernel cache: in memory per process, and on disk as optimised LLVM IR (``KEY.ll``) plus
the host object code MCJIT made from it (``KEY.o``), so a fresh process loads a kernel
without generating code.

The key is a SHA-256 of the printed loop IR, the target key and ``codegen_version()``: the
sources of this code generator and the LLVM it runs on, so a change to either never serves
machine code the old generator made (a kept copy of a miscompiled kernel, say).

Lowered functions (``KEY.func``, pickled, after the LLVM passes) are kept too, under a key the
caller derives from what it lowered (e.g. a graph node and its shapes) and ``source_digest`` of
the compiler's sources, so a fresh process that runs a compiled artifact finds its kernels
without lowering their schedules again (``compiler.targets.cpu.kernels.node_module``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
from collections import OrderedDict
from pathlib import Path


def llvm_version() -> str:
    """The LLVM llvmlite runs on, e.g. ``"llvm22.1.0"``."""
    import llvmlite.binding as llvm

    return "llvm" + ".".join(map(str, llvm.llvm_version_info))


def codegen_version() -> str:
    """What machine code for a given loop IR and target depends on besides them: the LLVM
    backend's sources and llvmlite's LLVM version."""
    return f"{source_digest('compiler.backend.llvm')}|{llvm_version()}"


def compiler_version() -> str:
    """What a schedule's speed depends on besides the host: the compiler's sources (its
    templates and this code generator) and llvmlite's LLVM version. Choices timed under one
    version (``tuner.in_network``) record it, so another version can say they may be stale."""
    return f"{source_digest('compiler')}|{llvm_version()}"


def kernel_key(ir_text: str, target_key: str) -> str:
    h = hashlib.sha256()
    for part in (codegen_version(), target_key, ir_text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


@functools.cache
def source_digest(*packages: str) -> str:
    """SHA-256 (16 hex digits) of the Python sources of the named ``pyvta`` subpackages (e.g.
    ``"compiler"``): what a cached result made by their code depends on."""
    import importlib

    h = hashlib.sha256()
    for name in packages:
        root = Path(importlib.import_module(f"pyvta.{name}").__file__).parent
        for path in sorted(root.rglob("*.py")):
            h.update(f"{name}/{path.relative_to(root)}".encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def func_key(what: str) -> str:
    """The key of a lowered function cached for ``what`` (the caller's description of it) under
    today's compiler sources."""
    from pyvta import cache

    return cache.key(what, source_digest("compiler"))


MEMORY_KERNELS = 64
"""Kernels a process keeps JIT-compiled in memory (the most recently used): a tuning worker
builds a new one per candidate, 1-6 MB of machine code and LLVM state each, so an unbounded
cache grew by gigabytes an hour; a network's kernels are held by its modules, not by this."""


class KernelCache:
    """``directory=None`` keeps the cache in memory only. In memory it keeps the
    ``memory_kernels`` most recently used kernels (``MEMORY_KERNELS``)."""

    def __init__(self, directory: str | os.PathLike | None, memory_kernels: int = MEMORY_KERNELS):
        self.directory = Path(directory) if directory is not None else None
        self.memory_kernels = memory_kernels
        self._mem: OrderedDict = OrderedDict()

    def get_memory(self, key: str):
        hit = self._mem.get(key)
        if hit is not None:
            self._mem.move_to_end(key)
        return hit

    def put_memory(self, key: str, value) -> None:
        self._mem[key] = value
        self._mem.move_to_end(key)
        while len(self._mem) > self.memory_kernels:
            self._mem.popitem(last=False)  # a module built from it keeps its own reference

    def read_ir(self, key: str) -> str | None:
        if self.directory is None:
            return None
        p = self.directory / f"{key}.ll"
        try:
            return p.read_text()
        except FileNotFoundError:
            return None

    def write_ir(self, key: str, text: str) -> None:
        self._write(f"{key}.ll", text.encode())

    def read_object(self, key: str) -> bytes | None:
        if self.directory is None:
            return None
        try:
            return (self.directory / f"{key}.o").read_bytes()
        except FileNotFoundError:
            return None

    def write_object(self, key: str, code: bytes) -> None:
        self._write(f"{key}.o", code)

    def read_func(self, key: str):
        """The lowered function kept under ``key`` (``func_key``), or None (also for a damaged
        or foreign file: the caller lowers it again)."""
        if self.directory is None:
            return None
        try:
            return pickle.loads((self.directory / f"{key}.func").read_bytes())
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            return None

    def has_func(self, key: str) -> bool:
        """Whether a lowered function is kept on disk under ``key``."""
        return self.directory is not None and (self.directory / f"{key}.func").is_file()

    def write_func(self, key: str, func) -> None:
        self._write(f"{key}.func", pickle.dumps(func, protocol=pickle.HIGHEST_PROTOCOL))

    def _write(self, name: str, data: bytes) -> None:
        from pyvta.cache import write_atomic

        if self.directory is not None:
            write_atomic(self.directory / name, data)
