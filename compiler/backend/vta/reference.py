"""numpy golden model of the fused conv2d the accelerator computes (plain NCHW / OIHW layouts)."""

from __future__ import annotations

import numpy as np

from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
from pyvta.runtime.vta_ops import wrap_int32


def reference_conv(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    ep: Epilogue,
    wl: ConvWorkload,
    residual: np.ndarray | None = None,
) -> np.ndarray:
    """x (1, C, H, W) int8, w (O, C, KH, KW) int8 (a grouped conv's block-diagonal, dense), b (O,) int32, residual (1, O, OH, OW) int8
    -> (1, O, OH, OW) int8, with the epilogue arithmetic of ``workload``'s docstring."""
    xp = np.pad(x[0].astype(np.int64), ((0, 0), (wl.pad, wl.pad_b), (wl.pad_l, wl.pad_r)))
    out = np.zeros((w.shape[0], wl.out_h, wl.out_w), np.int64)
    s, d = wl.stride, wl.dilation
    for kh in range(wl.kernel_h):
        for kw in range(wl.kernel_w):
            patch = xp[:, kh * d : kh * d + s * wl.out_h : s, kw * d : kw * d + s * wl.out_w : s]
            out += np.einsum("chw,oc->ohw", patch, w[:, :, kh, kw].astype(np.int64))
    acc = wrap_int32(out + (b.astype(np.int64)[:, None, None] if ep.bias else 0))
    if ep.residual:
        acc = wrap_int32(acc + (residual[0].astype(np.int64) << ep.residual_shift))
    acc = acc >> ep.shift
    return np.clip(acc, ep.lo, ep.hi).astype(np.int8)[None]
