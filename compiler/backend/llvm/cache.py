"""Kernel cache: in memory per process, and on disk as optimised LLVM IR (``KEY.ll``) plus
the host object code MCJIT made from it (``KEY.o``), so a fresh process loads a kernel
without generating code.

The key is a SHA-256 of the printed loop IR, the target key and ``CODEGEN_VERSION``; bump the
version whenever code generation changes what it emits for the same IR.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

CODEGEN_VERSION = "11"  # 11: min/max propagate NaN (llvm.minimum/maximum)


def kernel_key(ir_text: str, target_key: str) -> str:
    h = hashlib.sha256()
    for part in (CODEGEN_VERSION, target_key, ir_text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


class KernelCache:
    """``directory=None`` keeps the cache in memory only."""

    def __init__(self, directory: str | os.PathLike | None):
        self.directory = Path(directory) if directory is not None else None
        self._mem: dict = {}

    def get_memory(self, key: str):
        return self._mem.get(key)

    def put_memory(self, key: str, value) -> None:
        self._mem[key] = value

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

    def _write(self, name: str, data: bytes) -> None:
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".{name}.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.directory / name)
