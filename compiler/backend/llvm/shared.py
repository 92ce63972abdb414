"""Lowered functions generated for a CPU that need not be this one (a board's,
``CpuTarget.cross``) and linked into one shared object, which a process on that CPU loads with
ctypes (``runtime.cpu_code``): no LLVM there.

Code generation is llvmlite's (every LLVM target is in it); the link is ``ld.lld``'s, LLVM's
linker for every ELF target (Debian's ``lld``, which ``make setup`` installs).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from pyvta.compiler.ir.stmt import PrimFunc
from pyvta.isa.errors import PyvtaError

LINKER = "ld.lld"


class LinkError(PyvtaError, RuntimeError):
    """No linker, or the linker refused the objects."""


def linker() -> str:
    """The path of ``LINKER``; a ``LinkError`` saying how to install it when there is none."""
    path = shutil.which(LINKER)
    if path is None:
        raise LinkError(
            f"{LINKER} (LLVM's linker) is not on PATH: `apt-get install lld` (make setup does)"
            " to link CPU kernels for a board"
        )
    return path


def for_llvm(func: PrimFunc) -> PrimFunc:
    """``func`` (as ``compiler.lower`` returns it) after the CPU backend's passes: what
    :func:`object_code` generates, with its scratch buffers lifted into ``func.workspace``."""
    from pyvta.compiler.backend.llvm.passes import LLVM_PASSES
    from pyvta.compiler.passes.pipeline import run_passes

    return run_passes(func, LLVM_PASSES)


def object_code(func: PrimFunc, target) -> bytes:
    """``func`` (after :func:`for_llvm`) as a relocatable object for ``target``, position
    independent, exporting ``func.name``."""
    import llvmlite.binding as llvm

    from pyvta.compiler.backend.llvm.codegen import CodeGen
    from pyvta.compiler.backend.llvm.jit import optimize
    from pyvta.compiler.backend.llvm.target import cpu_scopes

    if target.num_threads != 1:
        raise ValueError(
            f"a shared object's kernels run on one thread (the pool is the JIT's), got"
            f" num_threads={target.num_threads}"
        )
    text = optimize(str(CodeGen(func, target, cpu_scopes()).generate()), target)
    return target.target_machine(shared=True).emit_object(llvm.parse_assembly(text))


def shared_object(funcs: list[PrimFunc], target) -> bytes:
    """One ELF shared object for ``target`` holding every function of ``funcs`` (after
    :func:`for_llvm`, with distinct names), each exported by its name."""
    names = [f.name for f in funcs]
    if len(set(names)) != len(names):
        raise ValueError(f"functions of one shared object need distinct names, got {names}")
    ld = linker()
    with tempfile.TemporaryDirectory(prefix="pyvta-link-") as tmp:
        objs = []
        for i, func in enumerate(funcs):
            path = Path(tmp, f"k{i}.o")
            path.write_bytes(object_code(func, target))
            objs.append(str(path))
        out = Path(tmp, "kernels.so")
        proc = subprocess.run(
            [ld, "-shared", "--build-id=none", "-o", str(out), *objs],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise LinkError(f"{LINKER} failed for {target.triple}: {proc.stderr.strip()}")
        return out.read_bytes()
