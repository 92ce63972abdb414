"""Kernels -> LLVM IR for NVPTX -> PTX text (llvmlite's NVPTX target).

Each ``Kernel`` becomes a ``ptx_kernel`` function taking one ``addrspace(1)`` pointer per buffer
it touches; a loop bound to ``blockIdx.d`` / ``threadIdx.d`` reads ``llvm.nvvm.read.ptx.sreg.
ctaid.d`` / ``tid.d`` (guarded when narrower than the launch); ``shared`` buffers are
``addrspace(3)`` globals; the barrier is ``llvm.nvvm.barrier.cta.sync.aligned.all``; float
``+ - *`` carry the ``contract`` flag so ptxas-level FMAs form. Expressions, stores and local
(register) buffers are the CPU code generator's (``backend.llvm.codegen.CodeGen``).

Math calls go through an allow-list (``MATH``): NVPTX has no libcall for ``llvm.exp`` (LLVM
aborts the process), so ``exp`` maps to libdevice's ``__nv_expf``, linked from the
``nvidia-cuda-nvcc-cu12`` wheel's ``libdevice.10.bc`` with every non-kernel symbol internalised.
"""

from __future__ import annotations

from functools import cache

import llvmlite.binding as llvm
from llvmlite import ir

from pyvta.compiler.backend.cuda.limits import gpu_scopes
from pyvta.compiler.backend.cuda.passes import BARRIER
from pyvta.compiler.backend.llvm.codegen import CodeGen, CodegenError
from pyvta.compiler.backend.llvm.frame import F32, I32, MEM_TYPE, FnState
from pyvta.compiler.ir.expr import BinOp, is_float
from pyvta.compiler.ir.stmt import THREAD_TAGS, For

TRIPLE = "nvptx64-nvidia-cuda"
SREG = {"blockIdx": "ctaid", "threadIdx": "tid"}
MATH = {  # our Call name -> (kind, symbol): "llvm" intrinsics NVPTX lowers, or libdevice
    "sqrt": ("llvm", "llvm.sqrt.f32"),
    "fabs": ("llvm", "llvm.fabs.f32"),
    "exp": ("libdevice", "__nv_expf"),
}
CONTRACT = ("contract",)


@cache
def _init() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


def target_machine(arch: str):
    _init()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, opt=3)


class _NvptxTarget:
    triple = TRIPLE
    num_threads = 1  # parallel loops never reach here (serialize_loops)


class NvptxCodeGen(CodeGen):
    """One LLVM module holding every kernel of a function."""

    def __init__(self, func, kernels, arch: str):
        super().__init__(func, _NvptxTarget(), gpu_scopes(arch))
        self.kernels = kernels
        self.uses_libdevice = False

    def generate(self) -> ir.Module:
        for n, k in enumerate(self.kernels):
            self._kernel(n, k)
        return self.module

    def _kernel(self, n: int, k) -> None:
        ptys = [ir.PointerType(MEM_TYPE[b.dtype], addrspace=1) for b in k.params]
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), ptys), name=k.name)
        fn.calling_convention = "ptx_kernel"
        st = FnState(fn)
        for arg, buf in zip(fn.args, k.params, strict=True):
            arg.name = buf.name.replace(".", "_")
            arg.add_attribute("noalias")
            st.bufs[buf] = arg
        for buf in k.shared:
            aty = ir.ArrayType(MEM_TYPE[buf.dtype], buf.size_elems)
            gv = ir.GlobalVariable(self.module, aty, f"{k.name}_{buf.name}".replace(".", "_"), 3)
            gv.linkage = "internal"
            gv.align = 16
            gv.initializer = ir.Constant(aty, ir.Undefined)
            st.bufs[buf] = st.builder.gep(gv, [ir.Constant(I32, 0)] * 2, inbounds=True)
        self.st, self.launch = st, k
        self.stmt(k.body)
        self._finish(st)
        md = self.module.add_metadata(
            [fn, ir.MetaDataString(self.module, "maxntidx"), I32(k.threads)]
        )
        self.module.add_named_metadata("nvvm.annotations").add(md)

    def _sreg(self, tag: str):
        kind, dim = tag.split(".")
        return self.b.call(self._decl(f"llvm.nvvm.read.ptx.sreg.{SREG[kind]}.{dim}", I32, []), [])

    def loop(self, s: For) -> None:
        if s.kind not in THREAD_TAGS:
            super().loop(s)
            return
        idx = self._sreg(s.kind)
        self.st.vars[s.var] = idx
        launch = self.launch.grid if s.kind.startswith("blockIdx.") else self.launch.block
        if s.extent.value < launch["xyz".index(s.kind[-1])]:
            with self.b.if_then(self.b.icmp_signed("<", idx, I32(s.extent.value))):
                self.stmt(s.body)
        else:
            self.stmt(s.body)

    def binop(self, e: BinOp):
        v = super().binop(e)
        if is_float(e.dtype) and e.op in ("+", "-", "*") and hasattr(v, "flags"):
            v.flags.extend(f for f in CONTRACT if f not in v.flags)
        return v

    def call(self, e):
        if e.name == BARRIER:
            bar = self._decl("llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [I32])
            self.b.call(bar, [I32(0)])
            return I32(0)
        if e.name not in MATH:
            raise CodegenError(
                f"intrinsic {e.name!r} has no GPU implementation (allowed: {', '.join(MATH)})"
            )
        kind, sym = MATH[e.name]
        self.uses_libdevice |= kind == "libdevice"
        args = [self.expr(a) for a in e.args]
        return self.b.call(self._decl(sym, F32, [F32] * len(args)), args)


def compile_ptx(func, kernels, arch: str) -> str:
    """PTX text of ``kernels`` (from ``split_kernels(func)``) for ``arch`` (``sm_80``, ...)."""
    cg = NvptxCodeGen(func, kernels, arch)
    mod = llvm.parse_assembly(str(cg.generate()))
    mod.verify()
    if cg.uses_libdevice:
        from pyvta.compiler.backend.cuda.ptxas import libdevice_path

        with open(libdevice_path(), "rb") as f:
            mod.link_in(llvm.parse_bitcode(f.read()))
        entries = {k.name for k in kernels}
        for fn in mod.functions:
            if fn.name not in entries and not fn.is_declaration:
                fn.linkage = "internal"
    tm = target_machine(arch)
    mod.triple = TRIPLE
    mod.data_layout = str(tm.target_data)
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_assembly(mod)
