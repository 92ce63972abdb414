"""Optimise LLVM IR for the host and JIT it (MCJIT); returns the entry address."""

from __future__ import annotations

import llvmlite.binding as llvm

from pyvta.compiler.backend.llvm.target import CpuTarget


def optimize(ir_text: str, target: CpuTarget) -> str:
    """Parse, verify and run the O3 pipeline; returns optimised IR text."""
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    tm = target.target_machine()
    mod.triple = target.triple
    mod.data_layout = str(tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return str(mod)


class JitFunction:
    """A JIT-compiled module kept alive together with the address of its entry function.

    ``object_code``: the machine code MCJIT made for this IR before (from a cache): it is
    loaded instead of generating code again; otherwise ``on_object(bytes)`` receives the
    object code just generated (to cache it)."""

    def __init__(
        self,
        ir_text: str,
        entry: str,
        target: CpuTarget,
        object_code: bytes | None = None,
        on_object=None,
    ):
        if entry != "pyvta_parallel_launch":
            from pyvta.compiler.backend.llvm.runtime import ensure_runtime

            ensure_runtime()
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
        self.engine = llvm.create_mcjit_compiler(mod, target.target_machine())
        if object_code is not None or on_object is not None:
            notify = (lambda _m, buf: on_object(bytes(buf))) if on_object is not None else None
            self.engine.set_object_cache(notify, lambda _m: object_code)
        self.engine.finalize_object()
        self.address = self.engine.get_function_address(entry)
        if not self.address:
            raise RuntimeError(f"JIT lost entry function {entry!r}")
        self.ir_text = ir_text

    def assembly(self, target: CpuTarget) -> str:
        mod = llvm.parse_assembly(self.ir_text)
        return target.target_machine().emit_assembly(mod)
