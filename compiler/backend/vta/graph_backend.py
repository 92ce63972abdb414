"""The graph executor's "vta" backend on a device: quantized conv2d / dense nodes compiled with the
VTA templates and run through ``driver`` (simulator now, RTL and board later).

It implements the operator contract of ``compiler.graph.vta_ops`` (``conv2d`` / ``dense`` on the
packed layouts with a ``FusedParams`` record), and keeps one compiled operator per node (keyed by
its weight array), so a second inference reuses the instruction streams already in DRAM.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.backend.vta.operator import VtaConv2d
from compiler.backend.vta.workload import ConvWorkload, Epilogue, WorkloadError


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
        n, ib, h, wd, bn, b = x.shape
        ob, _, kh, kw, _, _ = w.shape
        sh, sw = p.strides
        pt, pl, pb, pr = p.pads
        if sh != sw or pt != pl or bn != 1:
            raise WorkloadError(
                f"the VTA conv2d template needs equal strides, equal top/left padding and batch"
                f" block 1; got strides {p.strides}, pads {p.pads}, batch block {bn}"
            )
        wl = ConvWorkload(h, wd, ib * b, ob * b, kh, kw, sh, pt, b, pad_bottom=pb, pad_right=pr)
        outs = []
        self._last_cycles = 0
        for i in range(n):
            r = None if res is None else res[i, :, :, :, 0, :]
            outs.append(self._run(wl, w, bias, r, p, x[i, :, :, :, 0, :], id(w)))
        return np.stack(outs)[:, :, :, :, None, :]

    def dense(self, x, w, bias, res, p) -> np.ndarray:
        """x (N, I/B, 1, B), w (O/B, I/B, B, B), bias (O/B, B) -> (N, O/B, 1, B)."""
        n, ib, bn, b = x.shape
        ob = w.shape[0]
        wl = ConvWorkload.dense(ib * b, ob * b, b)
        w4 = w[:, :, None, None, :, :]
        outs = []
        self._last_cycles = 0
        for i in range(n):
            r = None if res is None else res[i][:, None, :, :]
            data = x[i][:, None, :, :]  # (I/B, 1, 1, B)
            outs.append(self._run(wl, w4, bias, r, p, data, id(w))[:, 0])  # (O/B, 1, B)
        return np.stack(outs)

    # -- compile once, run many ---------------------------------------------------------------------
    def _run(self, wl: ConvWorkload, w, bias, res, p, data, w_id: int) -> np.ndarray:
        ep = Epilogue(
            bias=True,
            shift=p.shift,
            lo=p.clip_lo,
            hi=p.clip_hi,
            residual=res is not None,
            residual_shift=p.res_shift,
        )
        key = (w_id, wl, ep)
        op = self._ops.get(key)
        if op is None:
            weights = np.ascontiguousarray(w, np.int8)
            op = VtaConv2d(
                wl,
                ep,
                weights,
                np.ascontiguousarray(bias, np.int32),
                self.device,
                self.configs.get(wl),
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
