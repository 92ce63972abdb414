"""Assign every node a target: ``"vta"`` or ``"cpu"``.

VTA runs quantized ``qconv2d`` with ``group == 1`` and unit dilation, and ``qdense`` (any channel
counts: packing zero-pads them to the block size). Everything else stays on the CPU: float layers
(by default the first conv and the final dense), pooling, softmax, depthwise/grouped convs,
quantize/dequantize and layout changes.
"""

from __future__ import annotations

from pyvta.compiler.graph.ir import HOST, Graph, Node
from pyvta.compiler.targets.vta import TARGET as VTA


def runs_on_vta(n: Node) -> bool:
    if n.op == "qdense":
        return True
    return n.op == "qconv2d" and n.attrs["group"] == 1 and list(n.attrs["dilations"]) == [1, 1]


def partition_targets(graph: Graph, options) -> Graph:
    """``options.use_vta`` False keeps everything on the CPU; else a node goes where the
    accelerator target ``supports`` it (``runs_on_vta``)."""
    g = graph.copy()
    use_vta = getattr(options, "use_vta", True)
    for n in g.nodes:
        n.target = VTA.placement if use_vta and VTA.supports(n) is None else HOST
    return g
