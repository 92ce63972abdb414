"""A compiled model: save/load the artifact, run it (``compiler.graph.compile.compile_model``
makes one: import + pipeline + calibration + kernels). Loading and running import no compiler
module where the artifact carries its code (accelerator kernels, PTX, a shared object for this
CPU); compiled CPU nodes without code are built by the host's JIT (``runtime.jit``).

>>> cm.save("resnet18.vta.npz"); cm = CompiledModel.load("resnet18.vta.npz")
>>> outputs, table = run_model(cm, {"input": x}, device=driver.open("sim")); print(table.format())

The artifact is one ``.npz`` file (format in ``docs/artifact.md``): the graph structure as JSON,
every constant (packed int8 weights, int32 biases, ...) and, for a ``vta`` target, every
accelerator node's relocatable kernel (``driver.Kernel``) with the HwConfig it was lowered for;
for a ``gpu`` target, every node's PTX and launch plan; each blob's sha256 is recorded and
checked on load. Loading and running lower nothing.
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pyvta.cache import atomic_output
from pyvta.driver.kernel import Kernel, Region, RegionKind
from pyvta.isa import HwConfig, PyvtaError
from pyvta.runtime.cpu_code import CpuCode
from pyvta.runtime.cpu_kernels import CpuKernels
from pyvta.runtime.executor import Executor, TimingTable, host_backend
from pyvta.runtime.int8_kernels import CpuInt8Kernels, Int8Kernel, has_int8_nodes
from pyvta.runtime.ir import ACCELERATOR, GPU, HOST, Graph, Node, Value, check_graph
from pyvta.runtime.vta_ops import VtaBackend

FORMAT_VERSION = 2
GRAPH_KEY, DIGEST_KEY = "__graph__", "__digest__"


class ArtifactError(PyvtaError, ValueError):
    """A file that is not a readable, intact compiled-model artifact of this format."""


@dataclass(frozen=True)
class GpuKernel:
    """One node's compiled GPU code: PTX text (one ``.entry`` per kernel) for ``arch`` and its
    launch plan (``compiler.backend.cuda.launch``)."""

    ptx: str
    plan: dict
    arch: str


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class CompiledModel:
    """A compiled graph and the target it was compiled for (``cpu``, ``cpu-int8``, ``vta``,
    ``gpu``).

    ``kernels``: node name -> relocatable accelerator kernel (``vta`` target); ``hw``: the
    HwConfig they were lowered (or, before ``lower_kernels``, the graph was packed) for;
    ``gpu_kernels``: node name -> :class:`GpuKernel` (PTX and launch plan, ``gpu``
    target); ``cpu_code``: the CPU nodes' kernels as one shared object for a board's CPU
    (``cpu_code.CpuCode``, made by ``cpu_cross.cross_compile_cpu``)."""

    graph: Graph
    target: str
    kernels: dict[str, Kernel] = field(default_factory=dict)
    hw: HwConfig | None = None
    gpu_kernels: dict = field(default_factory=dict)
    cpu_code: CpuCode | None = None
    _cpu_backend: list = field(default_factory=list, repr=False, compare=False)
    _gpu_backends: dict = field(default_factory=dict, repr=False, compare=False)
    _last_executor: list = field(default_factory=list, repr=False, compare=False)

    def executor(self, vta: VtaBackend | None = None, backends: dict | None = None) -> Executor:
        """The :class:`Executor` of this model's graph with ``vta`` and ``backends``: the one
        the last call made when it was given the same objects (and the graph still has the
        same nodes), else a new one, kept for the next call (``run_model`` on a small model
        spent more on making its executor, ~1 us per node, than on some of its kernels)."""
        if HOST not in (backends or {}) and self.cpu_code is not None:
            backends = {HOST: self.cpu_backend(), **(backends or {})}
        names = tuple(sorted(backends or {}))
        objs = (self.graph, vta, *[backends[n] for n in names], *self.graph.nodes)
        last = self._last_executor
        same = last and last[0] == names and len(last[1]) == len(objs)
        if same and all(map(operator.is_, last[1], objs)):
            return last[2]
        ex = Executor(self.graph, vta, backends, compiled_for=self.target)
        last[:] = [names, objs, ex]
        return ex

    def cpu_backend(self):
        """The executor's ``"cpu"`` backend on the kernels of ``cpu_code`` (the shared object
        compiled for this machine's CPU or a board's, loaded once per model) where this machine
        runs them; else the default one (``executor.host_backend``: the JIT's kernels where
        llvmlite is; refused without it for compiled float nodes)."""
        if not self._cpu_backend:
            code = self.cpu_code
            if code is not None and code.runs_here():
                loaded = code.load()
                floats = {n: m for n, m in loaded.items() if not code.kernels[n].consts}
                backend = CpuKernels(self.graph, modules=floats)
                if has_int8_nodes(self.graph):
                    nodes = {n.name: n for n in self.graph.nodes}
                    int8 = {
                        n: Int8Kernel(
                            m,
                            *(code.consts[c] for c in code.kernels[n].consts),
                            nodes[n],
                            self.graph,
                        )
                        for n, m in loaded.items()
                        if code.kernels[n].consts
                    }
                    backend = CpuInt8Kernels(self.graph, fallback=backend, kernels=int8)
                if code.gemms:
                    from pyvta.runtime.cpu_code import WithGemms

                    backend = WithGemms(backend, code.load_gemms())
            else:
                if code is not None:
                    _other_cpu(code, self.graph)
                backend = host_backend(self.graph, self.target)
            self._cpu_backend.append(backend)
        return self._cpu_backend[0]

    def gpu_backend(self, device: str | None = None, race_check: bool = False):
        """The executor's ``"gpu"`` backend on ``device`` (``compiler.targets.gpu.devices``; None:
        the first, the GPU): on a GPU this model's PTX, loaded once per model; emulated, the
        same kernels on the CPU."""
        from pyvta.runtime.jit import jit

        code = jit()
        found = code.gpu_device(device)
        if found.on_gpu and not self.gpu_kernels:
            raise ArtifactError(
                f"the model ({self.target}) has no GPU kernels; compile it with"
                " pyvta compile --target gpu"
            )
        key = (found.name, race_check)
        if key not in self._gpu_backends:
            backend = code.gpu_backend(self.graph, found.name, self.gpu_kernels, race_check)
            self._gpu_backends[key] = backend
        return self._gpu_backends[key]

    def accelerator(self, device):
        """The executor's ``"vta"`` backend with this model's kernels loaded onto ``device`` (a
        ``driver.Device``), refused when they were lowered for another HwConfig."""
        from pyvta.runtime.accelerator import AcceleratorBackend

        n_placed = sum(n.target == ACCELERATOR for n in self.graph.nodes)
        if n_placed and not self.kernels:
            raise ArtifactError(
                f"the model has {n_placed} accelerator nodes but no kernels; compile it with"
                " pyvta compile --target vta (or lower_kernels)"
            )
        if self.hw is not None and self.hw != device.config:
            raise ArtifactError(
                f"the model was compiled for HwConfig {self.hw.tag}; the device is"
                f" {device.config.tag} (recompile with its --config)"
            )
        return AcceleratorBackend(device, self.kernels)

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
        meta["hw_config"] = self.hw.to_dict() if self.hw else None
        meta["kernels"] = {}
        for j, (node, k) in enumerate(sorted(self.kernels.items())):
            blobs = {name: np.frombuffer(data, np.uint8) for name, data in k.consts.items()}
            blobs["relocs"] = np.ascontiguousarray(k.relocs, "<i4")
            for name, arr in blobs.items():
                arrays[f"k{j}_{name}"] = arr
            meta["kernels"][node] = {
                "key": f"k{j}",
                "config_tag": k.config_tag,
                "insn_count": k.insn_count,
                "regions": [[r.name, r.kind.value, r.offset, r.nbytes] for r in k.regions],
                "blobs": sorted(blobs),
                "info": k.info,
            }
        meta["gpu_kernels"] = {}
        for j, (node, k) in enumerate(sorted(self.gpu_kernels.items())):
            arrays[f"g{j}_ptx"] = np.frombuffer(k.ptx.encode(), np.uint8)
            meta["gpu_kernels"][node] = {"key": f"g{j}", "arch": k.arch, "plan": k.plan}
        meta["cpu_code"] = self.cpu_code.meta() if self.cpu_code is not None else None
        if self.cpu_code is not None:
            arrays.update(self.cpu_code.arrays())
        meta["sha256"] = {
            key: _sha256(np.ascontiguousarray(a).tobytes()) for key, a in arrays.items()
        }
        text = json.dumps(meta)
        path = Path(path)
        with atomic_output(path) as tmp, tmp.open("wb") as f:  # written whole, then renamed
            np.savez(
                f,
                **{GRAPH_KEY: np.array(text), DIGEST_KEY: np.array(_sha256(text.encode()))},
                **arrays,
            )
        return path

    @classmethod
    def load(cls, path: str | Path) -> CompiledModel:
        """Read an artifact written by :meth:`save`: every blob's hash and the graph are checked;
        a file that is not an intact artifact raises ``ArtifactError`` saying what it is."""
        check_path(path, "path")
        path = Path(path)
        if path.is_file() and not zipfile.is_zipfile(path):
            raise ArtifactError(f"{path}: not a compiled model (not an .npz archive)")
        try:
            with np.load(path, allow_pickle=False) as z:
                meta, arrays = _read_checked(path, z)
        except ArtifactError:
            raise
        except Exception as e:  # a damaged file: zipfile, zlib, numpy's header parser, json
            if isinstance(e, IsADirectoryError):
                raise ArtifactError(f"{path}: a directory, not an artifact") from None
            if isinstance(e, FileNotFoundError):
                raise ArtifactError(f"{path}: no such file") from None
            raise ArtifactError(
                f"{path}: not a readable artifact (truncated or corrupt .npz: {e})"
            ) from None
        try:
            constants = {name: arrays[f"c{i}"] for i, name in enumerate(meta["constants"])}
            values = {n: Value(n, tuple(s), t) for n, s, t in meta["values"]}
            nodes = [Node(**d) for d in meta["nodes"]]
            g = Graph(meta["name"], meta["inputs"], meta["outputs"], nodes, constants, values)
            check_graph(g)
            kernels = {node: _kernel_from(d, arrays) for node, d in meta.get("kernels", {}).items()}
            hw = HwConfig.from_dict(meta["hw_config"]) if meta.get("hw_config") else None
            gpu = {
                node: _gpu_kernel_from(d, arrays) for node, d in meta.get("gpu_kernels", {}).items()
            }
            cpu_code = CpuCode.from_artifact(meta.get("cpu_code"), arrays)
        except Exception as e:  # the hashes matched but the contents make no graph
            raise ArtifactError(f"{path}: malformed artifact ({type(e).__name__}: {e})") from None
        return cls(g, meta["target"], kernels, hw, gpu, cpu_code)


def _other_cpu(code: CpuCode, graph: Graph) -> None:
    """An artifact whose CPU kernels are for another CPU than this machine's: the JIT compiles
    them here, or without llvmlite (a board) numpy runs the nodes that have numpy kernels (the
    int8 ones); a warning says which. Float kernels without llvmlite: refused."""
    import platform
    import warnings

    from pyvta.runtime import cpu_llvm
    from pyvta.runtime.cpu_kernels import COMPILED_OPS

    here = platform.machine()
    if cpu_llvm.have_llvmlite():
        instead = "kernels the JIT compiles here"
    elif any(n.op in COMPILED_OPS and n.target == HOST for n in graph.nodes):
        raise ArtifactError(
            f"the artifact's CPU kernels are for {code.description}; this machine is {here}"
            " and has no llvmlite to compile them: compile the model for this CPU (pyvta compile"
            " --board NAME or --cpu-target TRIPLE)"
        )
    else:
        instead = "numpy (the same bits, slower)"
    warnings.warn(
        f"the artifact's CPU kernels are for {code.description}, not this machine ({here}):"
        f" its CPU nodes run on {instead}",
        stacklevel=4,
    )


def _read_checked(path: Path, z) -> tuple[dict, dict[str, np.ndarray]]:
    """The artifact's metadata and arrays, with its format, digest and every blob hash checked."""
    if GRAPH_KEY not in z.files:
        if {"dram", "insn_addr", "insn_count"} <= set(z.files):
            raise ArtifactError(
                f"{path} is a program bundle (a DRAM image and an instruction stream for"
                " pyvta sim / pyvta hw run), not a compiled model; write one with pyvta compile"
            )
        raise ArtifactError(f"{path}: not a pyvta compiled model (no {GRAPH_KEY} entry)")
    text = str(z[GRAPH_KEY])
    meta = json.loads(text)
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise ArtifactError(
            f"{path}: artifact format {version!r} (supported: {FORMAT_VERSION});"
            " recompile it with this pyvta"
        )
    if DIGEST_KEY not in z.files or str(z[DIGEST_KEY]) != _sha256(text.encode()):
        raise ArtifactError(
            f"{path}: the artifact's metadata does not match its digest (tampered?)"
        )
    arrays = {}
    for key, want in meta["sha256"].items():
        if key not in z.files:
            raise ArtifactError(f"{path}: blob {key!r} is missing (truncated?)")
        arr = z[key]
        if _sha256(np.ascontiguousarray(arr).tobytes()) != want:
            raise ArtifactError(f"{path}: blob {key!r} does not match its sha256 (tampered?)")
        arrays[key] = arr
    return meta, arrays


def _kernel_from(d: dict, arrays: dict[str, np.ndarray]) -> Kernel:
    key = d["key"]
    regions = tuple(Region(n, RegionKind(k), int(o), int(b)) for n, k, o, b in d["regions"])
    consts = {name: arrays[f"{key}_{name}"].tobytes() for name in d["blobs"] if name != "relocs"}
    relocs = arrays[f"{key}_relocs"].astype(np.int32).reshape(-1, 2)
    return Kernel(d["config_tag"], regions, consts, relocs, int(d["insn_count"]), d["info"])


def _gpu_kernel_from(d: dict, arrays: dict[str, np.ndarray]) -> GpuKernel:
    return GpuKernel(arrays[f"{d['key']}_ptx"].tobytes().decode(), d["plan"], d["arch"])


def check_path(path, name: str) -> None:
    if not isinstance(path, str | os.PathLike):
        raise ArtifactError(f"{name} must be a file path (str or Path), got {type(path).__name__}")


def run_model(
    compiled: CompiledModel,
    inputs: dict[str, np.ndarray] | np.ndarray,
    vta: VtaBackend | None = None,
    device=None,
    backends: dict | None = None,
    gpu: str | None = None,
) -> tuple[list[np.ndarray], TimingTable]:
    """Run once; ``inputs`` is a dict by input name (or one array for a one-input model).

    ``"vta"`` nodes run on ``device`` (a ``driver.Device``) from the model's kernels, or through
    the operator-contract object ``vta`` (default: the numpy golden model); ``"gpu"`` nodes on
    ``gpu`` (``"cuda"``, the default, or ``"cuda-emulated"``: ``compiled.gpu_backend``);
    ``backends`` gives node backends by target directly (e.g. ``{"vta":
    compiled.accelerator(device)}``). The first run with given backends also makes them
    (:func:`prepare` makes them ahead)."""
    _check_model_and_device(compiled, device)
    if not isinstance(inputs, dict | np.ndarray):
        raise ArtifactError(
            f"inputs must be a numpy array or a dict of them by input name, got"
            f" {type(inputs).__name__}"
        )
    executor = prepare(compiled, vta, device, backends, gpu)
    if not isinstance(inputs, dict):
        if len(compiled.input_names) != 1:
            raise ValueError(f"model has inputs {compiled.input_names}; pass a dict")
        inputs = {compiled.input_names[0]: inputs}
    return executor.run(inputs)


def prepare(
    compiled: CompiledModel,
    vta: VtaBackend | None = None,
    device=None,
    backends: dict | None = None,
    gpu: str | None = None,
) -> Executor:
    """The executor :func:`run_model` runs ``compiled`` on with these arguments (the same
    meaning), made now: its node backends (the host's finds and loads its code generator,
    ~6-9 ms in a fresh process) are made before the first inference, not in it. The model keeps
    it: ``run_model`` given the same backend objects runs on it (a ``device`` makes a new
    accelerator backend each call: run on the executor returned)."""
    _check_model_and_device(compiled, device)
    if device is not None:
        backends = {ACCELERATOR: compiled.accelerator(device), **(backends or {})}
    if (gpu is not None or compiled.gpu_kernels) and GPU not in (backends or {}):
        backends = {GPU: compiled.gpu_backend(gpu), **(backends or {})}
    return compiled.executor(vta, backends)


def _check_model_and_device(compiled, device) -> None:
    from pyvta.driver.device import Device

    if not isinstance(compiled, CompiledModel):
        raise ArtifactError(
            f"compiled must be a CompiledModel (CompiledModel.load(path) or compile_model), got"
            f" {type(compiled).__name__}"
        )
    if device is not None and not isinstance(device, Device):
        raise ArtifactError(
            f"device must be a driver.Device (driver.open(name)), got {type(device).__name__}"
            f" {device!r:.40}"
        )
