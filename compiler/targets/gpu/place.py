"""Put every node of a float graph on ``"gpu"`` (the ``gpu`` target), each with its default
GPU schedule in ``attrs["gpu_schedule"]`` (``compiler.targets.gpu.kernels.default_schedule``);
a node no GPU template runs is refused here, at compile time, naming the ops that run."""

from __future__ import annotations

from pyvta.compiler.targets.gpu.kernels import VIEW_OPS, default_schedule
from pyvta.runtime.ir import GPU, Graph


def place_gpu(graph: Graph, options) -> Graph:
    """A no-op unless ``options.gpu``."""
    if not getattr(options, "gpu", False):
        return graph
    g = graph.copy()
    for n in g.nodes:
        n.target = GPU
        if n.op not in VIEW_OPS:
            shapes = [g.values[i].shape for i in n.inputs]
            n.attrs["gpu_schedule"] = default_schedule(n, shapes, g.values[n.outputs[0]].shape)
    return g
