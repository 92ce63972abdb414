"""Compiled VTA layers as program bundles: what the compiler writes, to rerun on the RTL or a board.

``conv_bundle`` compiles one conv2d (or dense) layer for a ``HwConfig`` on the simulator device,
writes random int8 input (and residual) data and returns the DRAM image with the instruction
stream (``sim.Program``); ``sim.run`` of it is the golden result an accelerator must reproduce.
"""

from __future__ import annotations

import numpy as np

from pyvta import isa, sim
from pyvta.compiler.backend.vta import ConvConfig, ConvWorkload, Epilogue, VtaConv2d
from pyvta.compiler.backend.vta.packing import pack_bias, pack_data, pack_weights
from pyvta.driver import SimDevice

DRAM_BYTES = 1 << 22  # the simulator device's DRAM; the bundle keeps only the part used


def conv_bundle(
    wl: ConvWorkload,
    ep: Epilogue,
    rng: np.random.Generator,
    cfg: isa.HwConfig = isa.DEFAULT_CONFIG,
    config: ConvConfig | None = None,
) -> sim.Program:
    """``wl`` (packed to ``cfg.block_in`` channels) with epilogue ``ep`` compiled for ``cfg``
    (schedule ``config``, or the compiler's default for the config); int8 weights, input and
    residual and int32 bias drawn from ``rng``. A workload packed to another block than the
    config's is refused by the compiler (``FitError``)."""
    block = cfg.block_in
    dev = SimDevice(config=cfg, dram_bytes=DRAM_BYTES)
    w_shape = (wl.out_channels, wl.in_channels, wl.kernel_h, wl.kernel_w)
    w = rng.integers(-128, 128, w_shape, dtype=np.int8)
    b = rng.integers(-3000, 3000, wl.out_channels).astype(np.int32)
    op = VtaConv2d(wl, ep, pack_weights(w, block), pack_bias(b, block), dev, config)
    x = rng.integers(-128, 128, (1, wl.in_channels, wl.height, wl.width), dtype=np.int8)
    dev.write(op.in_addr, pack_data(x, block))
    if ep.residual:
        r = rng.integers(-128, 128, (1, wl.out_channels, wl.out_h, wl.out_w), dtype=np.int8)
        dev.write(op.loaded.addrs["residual"], pack_data(r, block))
    return dev.snapshot(op.insn_addr, op.insn_count)
