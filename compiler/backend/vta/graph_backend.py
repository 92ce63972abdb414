"""The graph executor's "vta" backend on a device: quantized conv2d / dense nodes compiled with the
VTA templates and run through ``driver`` (simulator now, RTL and board later).

It implements the operator contract of ``compiler.graph.vta_ops`` (``conv2d`` / ``dense`` on the
packed layouts with a ``FusedParams`` record), and keeps one compiled operator per node (keyed by
its weight array), so a second inference reuses the instruction streams already in DRAM.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pyvta.compiler.backend.vta.config import ConvConfig
from pyvta.compiler.backend.vta.operator import VtaConv2d, lowering_epilogue
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue, WorkloadError


def conv_workload(x_shape, w_shape, p) -> ConvWorkload:
    """The VTA workload of a packed conv2d node (x (N, I/B, H, W, 1, B), w (O/B, I/B, KH, KW,
    B, B)) with fused parameters ``p``."""
    _, ib, h, wd, bn, b = x_shape
    ob, _, kh, kw, _, _ = w_shape
    sh, sw = p.strides
    pt, pl, pb, pr = p.pads
    if sh != sw or pt != pl or bn != 1:
        raise WorkloadError(
            f"the VTA conv2d template needs equal strides, equal top/left padding and batch"
            f" block 1; got strides {p.strides}, pads {p.pads}, batch block {bn}"
        )
    return ConvWorkload(h, wd, ib * b, ob * b, kh, kw, sh, pt, b, pad_bottom=pb, pad_right=pr)


def dense_workload(x_shape, w_shape) -> ConvWorkload:
    """The VTA workload of a packed dense node (x (N, I/B, 1, B), w (O/B, I/B, B, B))."""
    _, ib, _, b = x_shape
    return ConvWorkload.dense(ib * b, w_shape[0] * b, b)


def fused_epilogue(p, residual: bool) -> Epilogue:
    """The epilogue of a node's ``FusedParams`` (before the lowering choices)."""
    return Epilogue(
        bias=True,
        shift=p.shift,
        lo=p.clip_lo,
        hi=p.clip_hi,
        residual=residual,
        residual_shift=p.res_shift,
    )


@dataclass(frozen=True)
class Layer:
    """One distinct accelerator layer of a network: what a tuner needs to measure it."""

    workload: ConvWorkload
    epilogue: Epilogue  # with the lowering choices its bias values allow
    count: int  # launches per inference


class LayerCollector:
    """A stand-in "vta" backend that runs nothing: it records each accelerator node's workload
    and lowering epilogue and returns zeros of the right shape (the graph's shifts and weights
    are compile-time constants, so every layer is still seen exactly as it will run)."""

    def __init__(self):
        self._counts: dict[tuple[ConvWorkload, Epilogue], int] = {}
        self.last_cycles = None

    @property
    def layers(self) -> list[Layer]:
        return [Layer(wl, ep, n) for (wl, ep), n in self._counts.items()]

    def _note(self, wl, bias, res, p, n: int) -> None:
        bias = np.asarray(bias, np.int32)
        ep = lowering_epilogue(wl, fused_epilogue(p, res is not None), bias)[0]
        self._counts[(wl, ep)] = self._counts.get((wl, ep), 0) + n

    def conv2d(self, x, w, bias, res, p) -> np.ndarray:
        wl = conv_workload(x.shape, w.shape, p)
        self._note(wl, bias, res, p, x.shape[0])
        return np.zeros((x.shape[0], wl.co_blocks, wl.out_h, wl.out_w, 1, wl.block), np.int8)

    def dense(self, x, w, bias, res, p) -> np.ndarray:
        wl = dense_workload(x.shape, w.shape)
        self._note(wl, bias, res, p, x.shape[0])
        return np.zeros((x.shape[0], wl.co_blocks, 1, wl.block), np.int8)


@dataclass
class LayerRun:
    """One accelerator launch: what ran and what it cost."""

    workload: ConvWorkload
    config: dict
    cycles: int | None
    sim_wall_s: float
    insns: int


class AcceleratorBackend:
    """``device``: a ``driver.Device`` (e.g. ``SimDevice()``); ``search``: candidates measured on
    the device's cycle estimate when picking each layer's default config (0: analytic choice)."""

    def __init__(self, device, search: int = 0, configs: dict | None = None, explore: int = 0):
        self.device, self.search, self.explore = device, search, explore
        self.configs = configs or {}  # ConvWorkload -> ConvConfig (e.g. from a tuning log)
        self._ops: dict[tuple, VtaConv2d] = {}
        self.runs: list[LayerRun] = []
        self._last_cycles: int | None = None

    @property
    def last_cycles(self) -> int | None:
        """Cycles of the most recent node (all its batch items); read by the graph executor."""
        return self._last_cycles

    @property
    def total_cycles(self) -> int:
        return sum(r.cycles or 0 for r in self.runs)

    # -- the contract ------------------------------------------------------------------------------
    def conv2d(self, x, w, bias, res, p) -> np.ndarray:
        """x (N, I/B, H, W, 1, B), w (O/B, I/B, KH, KW, B, B), bias (O/B, B), res like the output."""
        wl = conv_workload(x.shape, w.shape, p)
        outs = []
        self._last_cycles = 0
        for i in range(x.shape[0]):
            r = None if res is None else res[i, :, :, :, 0, :]
            outs.append(self._run(wl, w, bias, r, p, x[i, :, :, :, 0, :], id(w)))
        return np.stack(outs)[:, :, :, :, None, :]

    def dense(self, x, w, bias, res, p) -> np.ndarray:
        """x (N, I/B, 1, B), w (O/B, I/B, B, B), bias (O/B, B) -> (N, O/B, 1, B)."""
        wl = dense_workload(x.shape, w.shape)
        w4 = w[:, :, None, None, :, :]
        outs = []
        self._last_cycles = 0
        for i in range(x.shape[0]):
            r = None if res is None else res[i][:, None, :, :]
            data = x[i][:, None, :, :]  # (I/B, 1, 1, B)
            outs.append(self._run(wl, w4, bias, r, p, data, id(w))[:, 0])  # (O/B, 1, B)
        return np.stack(outs)

    def config_for(self, wl: ConvWorkload, ep: Epilogue, bias) -> ConvConfig | None:
        """The given config of this layer: keyed by ``(workload, lowering epilogue)`` (as a
        network tuning log gives them) or by the workload alone; None: derive a default."""
        if not self.configs:
            return None
        key = (wl, lowering_epilogue(wl, ep, bias)[0])
        return self.configs.get(key) or self.configs.get(wl)

    # -- compile once, run many ---------------------------------------------------------------------
    def _run(self, wl: ConvWorkload, w, bias, res, p, data, w_id: int) -> np.ndarray:
        ep = fused_epilogue(p, res is not None)
        key = (w_id, wl, ep)
        op = self._ops.get(key)
        if op is None:
            bias = np.ascontiguousarray(bias, np.int32)
            op = VtaConv2d(
                wl,
                ep,
                np.ascontiguousarray(w, np.int8),
                bias,
                self.device,
                self.config_for(wl, ep, bias),
                search=self.search,
                explore=self.explore,
            )
            self._ops[key] = op
        run = op(
            np.ascontiguousarray(data, np.int8),
            None if res is None else np.ascontiguousarray(res, np.int8),
        )
        self.runs.append(LayerRun(wl, op.config.to_dict(), run.cycles, run.wall_s, op.insn_count))
        self._last_cycles = (self._last_cycles or 0) + (run.cycles or 0)
        return run.output
