"""Assign every node a target: ``"vta"`` or ``"cpu"``, and say why a node stays on the CPU.

VTA runs quantized ``qconv2d`` (equal strides and dilations along rows and columns; with the
whole partition any groups, as block-diagonal GEMMs, and any dilation), ``qdense`` (any channel
counts: packing zero-pads them to the block size), and with the whole-network partition
(``PipelineOptions.vta_partition == "whole"``, the default) also the int8 ``max_pool`` and
``qglobal_avg_pool`` the quantizer leaves (``QuantConfig.int8_pools``) where the ALU lowering
takes them (``compiler.backend.vta.pool``). The ``"legacy"`` partition keeps the first conv, the
pools and the final dense in float on the CPU, as the VTA tutorials do, and the grouped and
dilated convs in int8 on the CPU (today's split, for comparison). Everything else stays on
the CPU; :func:`cpu_reason` gives each such node's one-line reason (``pyvta run`` prints them).
"""

from __future__ import annotations

from pyvta.compiler.targets.vta import TARGET as VTA
from pyvta.runtime.ir import HOST, Graph, Node

VTA_PARTITIONS = ("whole", "legacy")
ACC_HALF_ROWS = 1024  # half the default ACC (2048 rows): a pool band's room (``backend.vta.pool``)
MAX_POOL_PAD = 15  # the LOAD instruction's 4-bit pad fields

# CPU ops that are the host's share by design: op -> why
HOST_OPS = {
    "quantize": "host: quantize float -> int8",
    "dequantize": "host: dequantize int8 -> float",
    "pack_nchw": "host: pack into channel blocks (DMA layout)",
    "pack_nc": "host: pack into channel blocks (DMA layout)",
    "unpack_nchw": "host: unpack the channel blocks",
    "unpack_nc": "host: unpack the channel blocks",
    "pack_fold_taps": "host: fold row pairs and kernel columns into channels (the stem's input)",
    "packed_flatten": "view: a reshape of packed 1x1 pixels (no data moved)",
}


def _pool_on_vta(graph: Graph, n: Node) -> str | None:
    """None if the int8 pool ``n`` fits the ALU lowering, else why not."""
    x = graph.values[n.inputs[0]]
    if x.dtype != "int8":
        return "float pool (--partition legacy, or its input is float)"
    a = n.attrs
    if n.op == "qglobal_avg_pool":
        cb, h, w = -(-x.shape[1] // 16), x.shape[2], x.shape[3]
        rows = h * w + 1 + int("offset" in a)  # a block's pixels, its sum (, its offset)
        if cb < 2 or min(cb, ACC_HALF_ROWS // rows) < 2:
            return f"global average pool of {x.shape[1]} channels x {h * w} pixels: needs 2+ blocks in half the ACC"
        return None
    if a.get("ceil_mode", 0) or any(d != 1 for d in (a.get("dilations") or (1, 1))):
        return "max pool with ceil_mode or dilation: no ALU lowering"
    if max(a["pads"]) > MAX_POOL_PAD:
        return f"max pool pads {a['pads']} exceed the LOAD's {MAX_POOL_PAD}"
    wp = x.shape[3] + a["pads"][1] + a["pads"][3]
    if a["kernel"][0] * wp + 1 > ACC_HALF_ROWS:
        return f"max pool rows of {wp} pixels: one band exceeds half the ACC"
    return None


def _one_row_hazard(graph: Graph, n: Node, block: int = 16) -> bool:
    """Whether a conv's tiles are one ACC row each (one output pixel per image, one output
    channel block) reduced by more than one GEMM micro-op (kernel taps x input blocks)."""
    _, cout, oh, ow = graph.values[n.outputs[0]].shape
    cin = graph.values[n.inputs[0]].shape[1]
    kh, kw = n.attrs.get("kernel_shape") or graph.constants[n.inputs[1]].shape[2:]
    return oh * ow == 1 and -(-cout // block) == 1 and kh * kw * -(-cin // block) > 1


def vta_reason(graph: Graph, n: Node, partition: str = "whole") -> str | None:
    """None if ``n`` runs on VTA under ``partition``, else the one-line reason it does not."""
    if n.op == "qdense":
        return None
    if n.op == "qconv2d":  # (groups: block-diagonal GEMMs per block group, layout.block_groups)
        dh, dw = n.attrs["dilations"]
        sh, sw = n.attrs.get("strides", (1, 1))
        if dh != dw:
            return (
                f"dilations {[dh, dw]} differ: the VTA conv template spaces rows and columns alike"
            )
        if sh != sw:
            return f"strides {[sh, sw]} differ: the VTA conv template steps rows and columns alike"
        if graph is not None and _one_row_hazard(graph, n):
            return (
                "one output pixel of one channel block: every GEMM micro-op would write one ACC"
                " row back to back (a pipeline hazard)"
            )
        if partition != "whole" and n.attrs["group"] != 1:
            return f"grouped conv (group {n.attrs['group']}): on the CPU (--partition legacy)"
        if partition != "whole" and dh != 1:
            return f"dilated conv {[dh, dw]}: on the CPU (--partition legacy)"
        return None
    if n.op in ("max_pool", "qglobal_avg_pool"):
        if partition != "whole":
            return "pool kept on the CPU (--partition legacy)"
        return _pool_on_vta(graph, n)
    return cpu_reason(n)


def cpu_reason(n: Node) -> str:
    """Why a node that is no accelerator candidate runs on the CPU (one line)."""
    if n.op in HOST_OPS:
        return HOST_OPS[n.op]
    if n.op in ("conv2d", "dense"):
        return f"float {n.op} (kept float: --partition legacy or keep_float)"
    if n.op in ("max_pool", "global_avg_pool", "avg_pool"):
        return f"float {n.op} (its input is float)"
    return f"{n.op}: no accelerator lowering"


def partition_targets(graph: Graph, options) -> Graph:
    """``options.use_vta`` False keeps everything on the CPU; else a node goes where the
    accelerator target ``supports`` it under ``options.vta_partition`` (``VTA_PARTITIONS``)."""
    g = graph.copy()
    use_vta = getattr(options, "use_vta", True)
    partition = getattr(options, "vta_partition", "whole")
    for n in g.nodes:
        n.target = VTA.placement if use_vta and VTA.supports(n, g, partition) is None else HOST
    return g


# conv ops of a compiled graph: float, int8, the CPU's compiled ones, the accelerator's
CONV_OPS = ("conv2d", "qconv2d", "cpu_conv2d", "vta_conv2d", "vta_conv2d_max_pool")


def conv_placement(graph: Graph, partition: str = "whole") -> tuple[int, int, dict[str, int]]:
    """Of a compiled graph's convs: (on the accelerator, in all, the rest's one-line reasons
    (``vta_reason``) with their counts)."""
    convs = [n for n in graph.nodes if n.op in CONV_OPS]
    reasons: dict[str, int] = {}
    for n in convs:
        if n.target != VTA.placement:
            why = (
                vta_reason(graph, n, partition) or "supported, placed on the CPU by an earlier pass"
            )
            reasons[why] = reasons.get(why, 0) + 1
    return len(convs) - sum(reasons.values()), len(convs), reasons
