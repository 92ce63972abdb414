"""A compiled VTA conv2d/dense: lowered once per device, then run on packed int8 tensors."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from pyvta.compiler.backend.vta.config import ConvConfig, FitError, check_fit
from pyvta.compiler.backend.vta.constants import bias_digit_blocks, identity_block, ones_row
from pyvta.compiler.backend.vta.conv2d import DramMap, LoweredConv, lower_conv2d
from pyvta.compiler.backend.vta.default import default_config
from pyvta.compiler.backend.vta.packing import check_int32
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
from pyvta.isa import HwConfig, encode_insns, encode_uops


@dataclass
class ConvRun:
    output: np.ndarray  # packed (co_blocks, OH, OW, b) int8
    cycles: int | None
    counters: dict
    wall_s: float
    report: object | None


def lowering_epilogue(
    wl: ConvWorkload, ep: Epilogue, bias: np.ndarray | None
) -> tuple[Epilogue, np.ndarray | None]:
    """``ep`` with the lowering choices these bias values allow, and the bias digit blocks.

    The bias is added by one GEMM pass over "bias digit" weights when its values are small
    enough; with a residual, the shift is split around the residual add when the int32 sum
    cannot wrap. (A tuner measuring a network layer uses this same epilogue.)"""
    digits = bias_digit_blocks(bias) if ep.bias and bias is not None else None
    ep = dataclasses.replace(ep, bias_via_gemm=digits is not None)
    if ep.residual:
        # (acc + r << k) >> s == ((acc >> a) + (r << (k - a))) >> (s - a) when nothing wraps
        terms = wl.ci_blocks * wl.block * wl.kernel_h * wl.kernel_w
        top = terms * 128 * 128 + (int(np.abs(bias).max()) if ep.bias else 0)
        if top + (128 << ep.residual_shift) < 2**31:
            ep = dataclasses.replace(ep, residual_after_shift=True)
    return ep, digits


class VtaConv2d:
    """conv2d (+ fused epilogue) compiled for one device.

    ``weights`` packed (co_b, ci_b, KH, KW, b, b) int8; ``bias`` packed (co_b, b) int32.
    ``device`` is any ``driver.Device``-like object (alloc / write / read / launch).
    Without ``config``, a default is derived for the shape; with ``search`` > 0 it is the fastest
    of that many candidates on the device's ``estimate_cycles`` (the simulator's cycle model).
    """

    def __init__(
        self,
        wl: ConvWorkload,
        ep: Epilogue,
        weights: np.ndarray,
        bias: np.ndarray | None,
        device,
        config: ConvConfig | None = None,
        search: int = 0,
        explore: int = 0,
    ):
        hw: HwConfig = device.config
        if ep.bias and bias is not None:
            bias = check_int32("bias", bias)  # before any use: a float or wide bias is refused
        ep, digits = lowering_epilogue(wl, ep, bias)
        if config is not None and digits is not None:
            try:
                check_fit(wl, ep, config, hw)
            except FitError:  # the digit rows do not fit beside this config's tiles: use the ALU
                ep, digits = dataclasses.replace(ep, bias_via_gemm=False), None
        self.wl, self.ep, self.device = wl, ep, device
        measure = getattr(device, "estimate_cycles", None) if search else None
        self.config = config or default_config(
            wl, ep, hw, measure=measure, candidates=max(search, 1), explore=explore
        )
        expect = (wl.co_blocks, wl.ci_blocks, wl.kernel_h, wl.kernel_w, wl.block, wl.block)
        if weights.shape != expect or weights.dtype != np.int8:
            raise ValueError(f"weights must be int8 {expect}, got {weights.dtype} {weights.shape}")
        if ep.bias and (bias is None or bias.shape != (wl.co_blocks, wl.block)):
            raise ValueError(
                f"bias must be int32 {(wl.co_blocks, wl.block)} for an epilogue with bias"
            )
        d = device
        self.in_addr = d.alloc(wl.ci_blocks * wl.height * wl.width * hw.inp_elem_bytes, 64)
        self.out_bytes = wl.co_blocks * wl.out_h * wl.out_w * hw.out_elem_bytes
        self.out_addr = d.alloc(self.out_bytes, 64)
        self.res_addr = d.alloc(self.out_bytes, 64) if ep.residual else 0
        self.w_addr = d.put(weights, hw.wgt_elem_bytes)
        self.b_addr = d.put(bias.astype("<i4"), 64) if ep.bias else 0
        consts = [
            digits if digits is not None else np.zeros((wl.co_blocks, wl.block, wl.block), np.int8),
            identity_block(wl.block, max(ep.residual_gemm_shift, 0)),
        ]
        self.consts_addr = d.put(np.concatenate(consts), hw.wgt_elem_bytes)
        self.ones_addr = d.put(ones_row(wl.block), 64)
        probe = self._lower(0)  # micro-op count, to place them
        self.uop_addr = d.alloc(max(len(probe.uops), 1) * 4, 64)
        self.lowered: LoweredConv = self._lower(self.uop_addr // 4)
        if self.lowered.uops:
            d.write(self.uop_addr, encode_uops(self.lowered.uops, hw))
        raw = encode_insns(self.lowered.insns, hw)
        self.insn_addr = d.alloc(len(raw), 16)
        d.write(self.insn_addr, raw)
        self.insn_count = len(self.lowered.insns)

    def _lower(self, uop_base: int) -> LoweredConv:
        hw = self.device.config
        dram = DramMap(
            data=self.in_addr // hw.inp_elem_bytes,
            weights=self.w_addr // hw.wgt_elem_bytes,
            bias=self.b_addr // hw.acc_elem_bytes,
            output=self.out_addr // hw.out_elem_bytes,
            residual=self.res_addr // hw.out_elem_bytes,
            uops=uop_base,
            wgt_consts=self.consts_addr // hw.wgt_elem_bytes,
            ones=self.ones_addr // hw.inp_elem_bytes,
        )
        return lower_conv2d(self.wl, self.ep, self.config, hw, dram)

    def __call__(self, data: np.ndarray, residual: np.ndarray | None = None) -> ConvRun:
        """Run on packed int8 data (ci_b, H, W, b) [+ residual (co_b, OH, OW, b)]."""
        wl = self.wl
        expect = (wl.ci_blocks, wl.height, wl.width, wl.block)
        if data.shape != expect or data.dtype != np.int8:
            raise ValueError(f"data must be int8 {expect}, got {data.dtype} {data.shape}")
        self.device.write(self.in_addr, np.ascontiguousarray(data))
        if self.ep.residual:
            if residual is None or residual.shape != (wl.co_blocks, wl.out_h, wl.out_w, wl.block):
                raise ValueError("this conv fuses a residual add: pass the packed int8 residual")
            self.device.write(self.res_addr, np.ascontiguousarray(residual, np.int8))
        r = self.device.launch(self.insn_addr, self.insn_count)
        out = self.device.read(self.out_addr, self.out_bytes).view(np.int8)
        out = out.reshape(wl.co_blocks, wl.out_h, wl.out_w, wl.block)
        return ConvRun(out, r.cycles, r.counters, r.wall_s, r.report)
