"""Build a lowered function for the host CPU, going through the kernel cache."""

from __future__ import annotations

from pyvta.compiler.backend.llvm.cache import KernelCache, kernel_key
from pyvta.compiler.backend.llvm.codegen import CodeGen
from pyvta.compiler.backend.llvm.jit import JitFunction, optimize
from pyvta.compiler.backend.llvm.module import Module
from pyvta.compiler.backend.llvm.passes import LLVM_PASSES
from pyvta.compiler.backend.llvm.target import CpuTarget, cpu_scopes
from pyvta.compiler.ir.stmt import PrimFunc
from pyvta.compiler.passes.pipeline import run_passes


def build_llvm(
    func: PrimFunc, target: CpuTarget, cache: KernelCache, func_key: str | None = None
) -> Module:
    """Run ``LLVM_PASSES`` on ``func``, generate, optimise and JIT it (or reuse a cached copy).

    ``func_key`` (``cache.func_key``): keep the function after the passes under that key, so a
    later process builds it with ``cached_func`` without lowering it."""
    func = run_passes(func, LLVM_PASSES)
    if func_key is not None:
        cache.write_func(func_key, func)
    return _build_passed(func, target, cache)


def assembly(func: PrimFunc, target: CpuTarget) -> str:
    """Assembly of a lowered ``func`` generated for ``target``: code generation only, nothing
    runs, so ``target`` may be a CPU this host is not (``CpuTarget.of_cpu``)."""
    import llvmlite.binding as llvm

    func = run_passes(func, LLVM_PASSES)
    text = optimize(str(CodeGen(func, target, cpu_scopes()).generate()), target)
    return target.target_machine().emit_assembly(llvm.parse_assembly(text))


def cached_func(key: str, target: CpuTarget, cache: KernelCache) -> Module | None:
    """The module of the function ``build_llvm`` kept under ``key``, or None if it has none."""
    func = cache.read_func(key)
    return None if func is None else _build_passed(func, target, cache)


def _build_passed(func: PrimFunc, target: CpuTarget, cache: KernelCache) -> Module:
    key = kernel_key(str(func), target.key)
    hit = cache.get_memory(key)
    if hit is not None:
        return Module(func, hit, target, "memory")
    text = cache.read_ir(key)
    source = "disk"
    if text is None:
        source = "none"
        llmod = CodeGen(func, target, cpu_scopes()).generate()
        text = optimize(str(llmod), target)
        cache.write_ir(key, text)
    obj = cache.read_object(key) if source == "disk" else None
    on_object = None if obj is not None else (lambda code: cache.write_object(key, code))
    jit = JitFunction(text, func.name, target, object_code=obj, on_object=on_object)
    cache.put_memory(key, jit)
    return Module(func, jit, target, source)
