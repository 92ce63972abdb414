"""A graph's compiled CPU nodes generated for a board's CPU (``CpuTarget.cross``) and linked
into one shared object (``compiler.graph.cpu_code.CpuCode``, kept in the artifact).

Each node is lowered from the schedule its attributes name (``cpu_kernels.node_schedule``), the
same loop IR the host's JIT runs, then generated for the board's CPU with one thread.
"""

from __future__ import annotations

from pyvta.compiler.graph.cpu_code import CpuCode, KernelSig, Param
from pyvta.compiler.graph.ir import Graph


def cross_compile_cpu(graph: Graph, target) -> CpuCode | None:
    """Every compiled ``cpu`` node of ``graph`` (``cpu_kernels.COMPILED_OPS``) as machine code
    for ``target`` (a ``CpuTarget``, e.g. ``CpuTarget.cross("cortex-a9")``) in one shared
    object; None when the graph has no such node."""
    from pyvta import compiler
    from pyvta.compiler.backend.llvm.shared import for_llvm, shared_object
    from pyvta.compiler.backend.llvm.vector import walk_stmts
    from pyvta.compiler.graph.cpu_kernels import COMPILED_OPS, node_schedule
    from pyvta.compiler.ir.stmt import Store

    nodes = [n for n in graph.nodes if n.op in COMPILED_OPS and n.target == "cpu"]
    if not nodes:
        return None
    funcs, kernels = [], {}
    for i, n in enumerate(nodes):
        sch, args = node_schedule(n, [graph.values[v].shape for v in n.inputs])
        func = for_llvm(compiler.lower(sch, args, name=f"pyvta_cpu_{i}"))
        funcs.append(func)
        written = {st.buffer.name for st in walk_stmts(func.body) if isinstance(st, Store)}
        params = tuple(Param(b.name, tuple(b.shape), b.dtype) for b in func.params)
        workspace = tuple((tuple(b.shape), b.dtype) for b in func.workspace)
        outs = tuple(p.name for p in params if p.name in written)
        kernels[n.name] = KernelSig(func.name, params, workspace, outs)
    return CpuCode(target.triple, target.cpu, shared_object(funcs, target), kernels)
