"""On-chip state: the UOP, INP, WGT, ACC and OUT SRAMs as numpy arrays."""

from __future__ import annotations

import numpy as np

from pyvta.isa import HwConfig, decode_uop_fields
from pyvta.sim.errors import OutOfBoundsError


class SramState:
    """SRAM contents, shaped by element (row):

    uop (uop_depth,) uint32; inp (inp_depth, batch, block_in) int8;
    wgt (wgt_depth, block_out, block_in) int8 (output-major); acc (acc_depth, batch, block_out) int32;
    out (acc_depth, batch, block_out) int8.
    """

    def __init__(self, cfg: HwConfig):
        self.cfg = cfg
        self.uop = np.zeros(cfg.uop_depth, np.uint32)
        self.inp = np.zeros((cfg.inp_depth, cfg.batch, cfg.block_in), np.int8)
        self.wgt = np.zeros((cfg.wgt_depth, cfg.block_out, cfg.block_in), np.int8)
        self.acc = np.zeros((cfg.acc_depth, cfg.batch, cfg.block_out), np.int32)
        self.out = np.zeros((cfg.acc_depth, cfg.batch, cfg.block_out), np.int8)

    def buffer(self, name: str) -> np.ndarray:
        return getattr(self, name)

    def decoded_uops(self, bgn: int, end: int, index: int) -> dict[str, np.ndarray]:
        """Fields of micro-ops [bgn, end) as int64 index arrays of length end - bgn.

        Raises OutOfBoundsError (naming instruction ``index``) if ``end`` passes the buffer.
        """
        if end > self.uop.shape[0]:
            raise OutOfBoundsError(
                f"instruction {index}: micro-ops [{bgn}, {end}) pass the end of the UOP buffer"
                f" ({self.uop.shape[0]} rows)"
            )
        return decode_uop_fields(self.uop[bgn:end], self.cfg)
