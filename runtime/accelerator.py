"""The graph's accelerator nodes run from their kernels: :class:`AcceleratorBackend` loads each
node's relocatable kernel (``driver.Kernel``, lowered at compile time by
``compiler.backend.vta.graph_backend.compile_kernels``) onto a ``driver.Device`` once, then runs
the node from it. Nothing is lowered here.

    vta = AcceleratorBackend(driver.open("sim"), cm.kernels)
    Executor(graph, backends={"vta": vta}).run(...)

A kernel's ``info`` says what it computes: ``kind`` (absent: a conv2d or dense; ``"pool"``;
``"conv_pool"``: a conv and the 3x3/2 max pool after it) and ``workload`` (the fields of the
compiler's ``ConvWorkload`` / ``PoolWorkload``), from which its packed int8 input and output
shapes follow (:class:`LoadedLayer`, ``runtime.shapes.conv_out_hw``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from pyvta.driver.kernel import Kernel, load_kernel
from pyvta.runtime.ir import GraphError, Node
from pyvta.runtime.shapes import conv_out_hw

POOL_OPS = ("vta_max_pool", "vta_global_avg_pool")


@dataclass
class KernelRun:
    """One launch of a loaded kernel: its packed int8 output and what it cost."""

    output: np.ndarray  # packed (co_blocks, OH, OW, b) int8 (a leading batch axis for N > 1)
    cycles: int | None
    counters: dict
    wall_s: float
    report: object | None


@dataclass
class LayerRun:
    """One accelerator launch of :class:`AcceleratorBackend`: the kernel that ran (its ``info``:
    workload, epilogue, config) and what it cost."""

    kernel: Kernel
    cycles: int | None
    sim_wall_s: float

    @property
    def config(self) -> dict:
        """The schedule config it was lowered with (``{}``: a pool's, or a fused conv + pool)."""
        return self.kernel.info.get("config", {})

    @property
    def insns(self) -> int:
        return self.kernel.insn_count


def _blocks(channels: int, block: int) -> int:
    return -(-channels // block)


class LoadedLayer:
    """A kernel loaded onto a device (``driver.kernel.load_kernel``'s ``LoadedKernel``), called
    on packed int8 data: a conv2d's ``(ci_b, H, W, b)`` [+ residual ``(co_b, OH, OW, b)``], with
    a leading batch axis when its workload holds ``batch`` > 1 images; a pool's ``(C/B, H, W,
    B)``."""

    def __init__(self, loaded) -> None:
        self.loaded = loaded
        info = loaded.kernel.info
        wl, kind = info["workload"], info.get("kind")
        h, w, b = wl["height"], wl["width"], wl["block"]
        if kind == "pool":
            window = (h, w) if wl["kind"] == "global_avg" else (wl["kernel_h"], wl["kernel_w"])
            cb = _blocks(wl["channels"], b)
            oh, ow = conv_out_hw(h, w, window, wl["strides"], wl["pads"])
            self.batch = 1
            self.in_shape, self.out_shape = (cb, h, w, b), (cb, oh, ow, b)
            return
        pad = wl.get("pad", 0)
        pads = [wl.get(k) for k in ("pad_left", "pad_bottom", "pad_right")]
        pads = (pad, *(pad if p is None else p for p in pads))  # top, left, bottom, right
        s, d = wl.get("stride", 1), wl.get("dilation", 1)
        kernel = (wl["kernel_h"], wl["kernel_w"])
        oh, ow = conv_out_hw(h, w, kernel, (s, s), pads, (d, d))
        if kind == "conv_pool":  # the 3x3/2 max pool after the conv
            oh, ow = oh // 2, ow // 2
        self.batch = wl.get("batch", 1)
        n = (self.batch,) if self.batch > 1 else ()
        ci_b, co_b = _blocks(wl["in_channels"], b), _blocks(wl["out_channels"], b)
        self.in_shape, self.out_shape = (*n, ci_b, h, w, b), (*n, co_b, oh, ow, b)

    @property
    def kernel(self) -> Kernel:
        return self.loaded.kernel

    @property
    def insn_count(self) -> int:
        return self.kernel.insn_count

    @property
    def has_residual(self) -> bool:
        return any(r.name == "residual" for r in self.kernel.regions)

    @property
    def in_addr(self) -> int:
        return self.loaded.addrs["input"]

    @property
    def insn_addr(self) -> int:
        return self.loaded.addrs["insns"]

    def insns(self):
        """The instruction stream as placed on the device."""
        from pyvta.isa import INSN_BYTES, decode_insns

        device = self.loaded.device
        raw = device.read(self.insn_addr, self.insn_count * INSN_BYTES)
        return decode_insns(raw, device.config)

    def __call__(self, data: np.ndarray, residual: np.ndarray | None = None) -> KernelRun:
        if data.shape != self.in_shape or data.dtype != np.int8:
            raise ValueError(f"data must be int8 {self.in_shape}, got {data.dtype} {data.shape}")
        inputs = {"input": data}
        if self.has_residual:
            if residual is None or residual.shape != self.out_shape:
                raise ValueError("this conv fuses a residual add: pass the packed int8 residual")
            inputs["residual"] = np.ascontiguousarray(residual, np.int8)
        outs, r = self.loaded.run(inputs)
        out = outs["output"].view(np.int8).reshape(self.out_shape)
        return KernelRun(out, r.cycles, r.counters, r.wall_s, r.report)


class AcceleratorBackend:
    """The executor's ``"vta"`` backend on a ``driver.Device``: loads ``kernels`` (node name ->
    ``driver.Kernel``, from ``compile_kernels`` or an artifact) once, then runs each node from its
    kernel. ``load_s``: seconds the loading took (allocation, relocation, constant upload);
    ``runs``: every launch (:class:`LayerRun`)."""

    def __init__(self, device, kernels: dict[str, Kernel]):
        self.device = device
        t0 = time.perf_counter()
        self._ops = {name: LoadedLayer(load_kernel(device, k)) for name, k in kernels.items()}
        self.load_s = time.perf_counter() - t0
        self.runs: list[LayerRun] = []
        self._last_cycles: int | None = None

    @property
    def last_cycles(self) -> int | None:
        """Cycles of the most recent node (all its batch items); read by the graph executor."""
        return self._last_cycles

    @property
    def total_cycles(self) -> int:
        return sum(r.cycles or 0 for r in self.runs)

    def run(self, node: Node, args: list[np.ndarray]) -> np.ndarray:
        """x (N, I/B, H, W, 1, B) for conv2d, (N, I/B, 1, B) for dense; output likewise."""
        op = self._ops.get(node.name)
        if op is None:
            raise GraphError(
                f"node {node.name!r} has no accelerator kernel (kernels: {len(self._ops)});"
                " compile the model for the accelerator"
            )
        x, res = args[0], (args[3] if len(args) > 3 else None)
        n = x.shape[0]
        if node.op in POOL_OPS:  # (N, C/B, H, W, 1, B): N * C/B planes
            data, r = x[:, :, :, :, 0, :].reshape(-1, *x.shape[2:4], x.shape[-1]), None
        elif node.op == "vta_dense":  # (N, I/B, 1, B) -> an image of 1 x N pixels
            data = x.transpose(1, 2, 0, 3)
            r = None if res is None else np.ascontiguousarray(res.transpose(1, 2, 0, 3))
        else:
            data = x[:, :, :, :, 0, :] if op.batch > 1 else x[0, :, :, :, 0, :]
            r = (
                None
                if res is None
                else res[:, :, :, :, 0, :]
                if op.batch > 1
                else res[0, ..., 0, :]
            )
        run = op(np.ascontiguousarray(data, np.int8), r)
        self.runs.append(LayerRun(op.kernel, run.cycles, run.wall_s))
        self._last_cycles = run.cycles or 0
        pool = self._ops.get(f"{node.name}/pool")  # (a conv + max pool node in two kernels)
        if pool is not None:
            run = pool(run.output.reshape(-1, *run.output.shape[-3:]))
            self.runs.append(LayerRun(pool.kernel, run.cycles, run.wall_s))
            self._last_cycles += run.cycles or 0
        if node.op == "vta_dense":
            return np.ascontiguousarray(run.output.transpose(2, 0, 1, 3))
        out = run.output.reshape(n, -1, *run.output.shape[-3:])
        return out[:, :, :, :, None, :]
