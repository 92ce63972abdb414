"""A graph's compiled CPU nodes generated for a board's CPU (``CpuTarget.cross``) and linked
into one shared object (``runtime.cpu_code.CpuCode``, kept in the artifact).

Float nodes (``runtime.cpu_kernels.COMPILED_OPS``) are lowered from the schedule their attributes name
(``targets.cpu.kernels.node_schedule``), the same loop IR the host's JIT runs; int8 nodes
(``runtime.int8_kernels.compiled_int8``) from the int8 template with the tile the board's CPU gets
(``targets.cpu_int8.kernels.int8_layer``), their weights packed for it here; the float products of the
numpy-op layers (a ``vta`` model's first conv and classifier: ``cpu_llvm.gemm``) from the GEMM
template, one kernel per shape. Code is generated for one thread.
"""

from __future__ import annotations

from pyvta.runtime.cpu_code import CpuCode, KernelSig, Param
from pyvta.runtime.ir import HOST, Graph


def cross_compile_cpu(graph: Graph, target) -> CpuCode | None:
    """Every compiled ``cpu`` node of ``graph`` as machine code for ``target`` (a
    ``CpuTarget``, e.g. ``CpuTarget.cross("cortex-a9")``) in one shared object; None when the
    graph has no such node."""
    from pyvta import compiler
    from pyvta.compiler.backend.llvm.shared import for_llvm, shared_object
    from pyvta.compiler.ops.cpu.int8 import qconv2d_nchw
    from pyvta.compiler.targets.cpu.kernels import node_schedule
    from pyvta.compiler.targets.cpu_int8.kernels import int8_layer
    from pyvta.runtime.cpu_kernels import COMPILED_OPS
    from pyvta.runtime.int8_kernels import compiled_int8

    funcs, kernels, consts = [], {}, {}
    for n in graph.nodes:
        names = ()
        if n.op in COMPILED_OPS and n.target == HOST:
            sch, args = node_schedule(n, [graph.values[v].shape for v in n.inputs])
        elif compiled_int8(n, graph):
            layer, weight, bias = int8_layer(n, graph, target)
            sch, args = qconv2d_nchw(*layer)
            names = (f"w{len(funcs)}", f"b{len(funcs)}")
            consts.update(zip(names, (weight, bias), strict=True))
        else:
            continue
        func = for_llvm(compiler.lower(sch, args, name=f"pyvta_cpu_{len(funcs)}"))
        funcs.append(func)
        kernels[n.name] = kernel_sig(func, names)
    gemms = {}
    for m, n, k in sorted(gemm_shapes(graph)):
        sch, args = gemm_schedule(m, n, k, target)
        func = for_llvm(compiler.lower(sch, args, name=f"pyvta_cpu_{len(funcs)}"))
        funcs.append(func)
        params = tuple(Param(b.name, tuple(b.shape), b.dtype) for b in func.params)
        workspace = tuple((tuple(b.shape), b.dtype) for b in func.workspace)
        gemms[f"{m} {n} {k}"] = KernelSig(func.name, params, workspace, (params[-1].name,))
    if not funcs:
        return None
    so = shared_object(funcs, target)
    return CpuCode(target.triple, target.cpu, so, kernels, consts, gemms, target.features)


def kernel_sig(func, consts: tuple[str, ...] = ()) -> KernelSig:
    """The ``KernelSig`` of ``func`` (after ``for_llvm``): its parameters, scratch buffers and
    the parameters it stores to; ``consts``: the ``CpuCode.consts`` it takes."""
    from pyvta.compiler.backend.llvm.vector import walk_stmts
    from pyvta.compiler.ir.stmt import Store

    written = {st.buffer.name for st in walk_stmts(func.body) if isinstance(st, Store)}
    params = tuple(Param(b.name, tuple(b.shape), b.dtype) for b in func.params)
    workspace = tuple((tuple(b.shape), b.dtype) for b in func.workspace)
    outs = tuple(p.name for p in params if p.name in written)
    return KernelSig(func.name, params, workspace, outs, tuple(consts))


def gemm_shapes(graph: Graph) -> set[tuple[int, int, int]]:
    """The ``(M, N, K)`` of every float32 product ``cpu_llvm.gemm`` computes for the graph's
    numpy-op CPU nodes: a ``conv2d`` of one group (weights ``[O, C*KH*KW]`` times the image's
    columns ``[C*KH*KW, OH*OW]``, per image) and a ``dense`` (``[M, K]`` times ``[K, N]``)."""
    shapes = set()
    for n in graph.nodes:
        if n.target != HOST:
            continue
        out = graph.values[n.outputs[0]].shape
        if n.op == "conv2d" and n.attrs.get("group", 1) == 1:
            o, cg, kh, kw = graph.values[n.inputs[1]].shape
            shapes.add((o, out[2] * out[3], cg * kh * kw))
        elif n.op == "dense" and graph.values[n.inputs[0]].dtype == "float32":
            m, k = graph.values[n.inputs[0]].shape
            shapes.add((m, out[-1], k))
    return shapes


def gemm_schedule(m: int, n: int, k: int, target):
    """``cpu_llvm``'s GEMM template for ``target`` (``GemmKnobs.for_target``), N padded to
    its column block."""
    from pyvta.compiler.ops.cpu import GemmKnobs, matmul_packed

    knobs = GemmKnobs.for_target(target)
    return matmul_packed(m, -(-n // knobs.bn) * knobs.bn, k, knobs)
