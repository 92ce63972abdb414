"""CLI support: compile an ONNX file for a target, save/load the artifact, run it.

>>> cm = compile_model("resnet18.onnx", "vta")          # import + pipeline + calibration
>>> cm.save("resnet18.vta.npz"); cm = CompiledModel.load("resnet18.vta.npz")
>>> outputs, table = run_model(cm, {"input": x}); print(table.format())

The artifact is one ``.npz`` file: the graph structure as JSON plus every constant (packed int8
weights, int32 biases, ...), so loading runs without recompiling.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pyvta.compiler.graph.executor import Executor, TimingTable
from pyvta.compiler.graph.ir import Graph, Node, Value, check_graph
from pyvta.compiler.graph.onnx_import import import_onnx
from pyvta.compiler.graph.pipeline import options_for, run_pipeline
from pyvta.compiler.graph.vta_ops import VtaBackend

FORMAT_VERSION = 1


@dataclass
class CompiledModel:
    """A compiled graph and the target it was compiled for (``cpu``, ``cpu-int8``, ``vta``)."""

    graph: Graph
    target: str

    @property
    def input_names(self) -> list[str]:
        return list(self.graph.inputs)

    @property
    def output_names(self) -> list[str]:
        return list(self.graph.outputs)

    def save(self, path: str | Path) -> Path:
        """Write the artifact (``.npz``); returns the path written."""
        g = self.graph
        names = sorted(g.constants)
        meta = {
            "format_version": FORMAT_VERSION,
            "target": self.target,
            "name": g.name,
            "inputs": g.inputs,
            "outputs": g.outputs,
            "values": [[v.name, list(v.shape), v.dtype] for v in g.values.values()],
            "constants": names,
            "nodes": [
                {"op": n.op, "name": n.name, "inputs": n.inputs, "outputs": n.outputs,
                 "attrs": n.attrs, "target": n.target}
                for n in g.nodes
            ],
        }  # fmt: skip
        arrays = {f"c{i}": g.constants[name] for i, name in enumerate(names)}
        path = Path(path)
        with path.open("wb") as f:
            np.savez(f, __graph__=np.array(json.dumps(meta)), **arrays)
        return path

    @classmethod
    def load(cls, path: str | Path) -> CompiledModel:
        """Read an artifact written by :meth:`save` (checks the graph)."""
        with np.load(Path(path), allow_pickle=False) as z:
            meta = json.loads(str(z["__graph__"]))
            if meta.get("format_version") != FORMAT_VERSION:
                raise ValueError(
                    f"{path}: artifact format {meta.get('format_version')!r} "
                    f"(supported: {FORMAT_VERSION})"
                )
            constants = {name: z[f"c{i}"] for i, name in enumerate(meta["constants"])}
        values = {n: Value(n, tuple(s), t) for n, s, t in meta["values"]}
        nodes = [Node(**d) for d in meta["nodes"]]
        g = Graph(meta["name"], meta["inputs"], meta["outputs"], nodes, constants, values)
        check_graph(g)
        return cls(g, meta["target"])


def default_calibration(graph: Graph, count: int = 8, seed: int = 0) -> list[dict]:
    """Seeded standard-normal samples for every graph input (what the zoo models expect)."""
    rng = np.random.default_rng(seed)
    return [
        {n: rng.standard_normal(graph.values[n].shape).astype(np.float32) for n in graph.inputs}
        for _ in range(count)
    ]


def compile_model(
    path: str | Path,
    target: str = "vta",
    calibration_inputs: list[dict[str, np.ndarray]] | None = None,
    keep_float: tuple[str, ...] | None = None,
    cpu_schedules: dict | None = None,
) -> CompiledModel:
    """Import an ONNX file and run the pipeline for ``target`` (``cpu``, ``cpu-int8``, ``vta``).

    ``cpu_schedules``: tuned conv schedules for ``cpu`` (``tuner.cpu_network.cpu_schedules``).
    Int8 targets calibrate on ``calibration_inputs`` (default: 8 seeded standard-normal
    samples, see :func:`default_calibration`)."""
    graph = import_onnx(path)
    samples = calibration_inputs
    if target != "cpu" and samples is None:
        samples = default_calibration(graph)
    options = options_for(target, samples, keep_float, cpu_schedules)
    return CompiledModel(run_pipeline(graph, options), target)


def run_model(
    compiled: CompiledModel,
    inputs: dict[str, np.ndarray] | np.ndarray,
    vta: VtaBackend | None = None,
) -> tuple[list[np.ndarray], TimingTable]:
    """Run once; ``inputs`` is a dict by input name (or one array for a one-input model).

    ``vta`` is the backend for ``"vta"`` nodes (default: the numpy golden model)."""
    if not isinstance(inputs, dict):
        if len(compiled.input_names) != 1:
            raise ValueError(f"model has inputs {compiled.input_names}; pass a dict")
        inputs = {compiled.input_names[0]: inputs}
    return Executor(compiled.graph, vta).run(inputs)
