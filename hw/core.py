"""The arithmetic of the compute unit: the GEMM core and the vector ALU (both combinational).

``GemmCore``: dot[b][o] = sum_k inp[b][k] * wgt[o][k] for one micro-op: BATCH x BLOCK_IN int8 by
BLOCK_IN x BLOCK_OUT int8 (weights stored output-major), int32 results. ``dsp_products`` of the
products use ``*`` (mapped to DSP48 slices by synthesis); the rest are shift-and-add LUT multipliers,
so the default config's 256 products fit the 220 DSPs of a Zynq-7020.

``Alu``: lane-wise MIN, MAX, ADD, SHR (signed amount: right for >= 0, left for < 0, both clamped to 31)
and MUL (low 32 bits) over BATCH x BLOCK_OUT int32 lanes; all arithmetic wraps.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pyvta import isa


def tree_sum(values):
    """Balanced adder tree (keeps the result width and the logic depth small)."""
    values = list(values)
    while len(values) > 1:
        nxt = [values[i] + values[i + 1] for i in range(0, len(values) - 1, 2)]
        if len(values) % 2:
            nxt.append(values[-1])
        values = nxt
    return values[0]


def lut_mul(a, b):
    """Signed x signed product as explicit partial products (stays in LUTs, never a DSP)."""
    a = a.as_signed()
    n = len(b)
    terms = [Mux(b[i], a << i, 0) for i in range(n - 1)]
    return tree_sum(terms) - Mux(b[n - 1], a << (n - 1), 0)


def default_dsp_products(cfg: isa.HwConfig) -> int:
    """Half the products on DSPs for the default config (128 of 256), all of them when small."""
    products = cfg.batch * cfg.block_in * cfg.block_out
    return products if products <= 64 else products // 2


class GemmCore(wiring.Component):
    def __init__(self, cfg: isa.HwConfig, dsp_products: int | None = None):
        self.cfg = cfg
        self.dsp_products = default_dsp_products(cfg) if dsp_products is None else dsp_products
        super().__init__(
            {
                "inp": In(cfg.inp_elem_bytes * 8),
                "wgt": In(cfg.wgt_elem_bytes * 8),
                "dot": Out(cfg.acc_elem_bytes * 8),
            }
        )

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        iw, ww, aw = cfg.inp_width_bits, cfg.wgt_width_bits, cfg.acc_width_bits
        p = 0
        for b in range(cfg.batch):
            for o in range(cfg.block_out):
                products = []
                for k in range(cfg.block_in):
                    x = self.inp[(b * cfg.block_in + k) * iw :][:iw].as_signed()
                    w = self.wgt[(o * cfg.block_in + k) * ww :][:ww].as_signed()
                    prod = Signal(signed(iw + ww), name=f"p_{b}_{o}_{k}")
                    m.d.comb += prod.eq(x * w if p < self.dsp_products else lut_mul(x, w))
                    products.append(prod)
                    p += 1
                lane = b * cfg.block_out + o
                m.d.comb += self.dot[lane * aw : (lane + 1) * aw].eq(tree_sum(products))
        return m


class Alu(wiring.Component):
    def __init__(self, cfg: isa.HwConfig):
        self.cfg = cfg
        op_bits = isa.alu_layout(cfg).fields["alu_opcode"].width_bits
        row = cfg.acc_elem_bytes * 8
        super().__init__({"op": In(op_bits), "a": In(row), "b": In(row), "result": Out(row)})

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        w = cfg.acc_width_bits
        max_shift = w - 1
        sh_bits = max_shift.bit_length()
        for lane in range(cfg.batch * cfg.block_out):
            a = self.a[lane * w : (lane + 1) * w].as_signed()
            b = self.b[lane * w : (lane + 1) * w].as_signed()
            res = self.result[lane * w : (lane + 1) * w]
            neg = Signal(w + 1, name=f"neg_{lane}")
            right = Signal(sh_bits, name=f"rsh_{lane}")
            left = Signal(sh_bits, name=f"lsh_{lane}")
            m.d.comb += [
                neg.eq(-b),
                right.eq(Mux(b > max_shift, max_shift, b[:sh_bits])),
                left.eq(Mux(neg > max_shift, max_shift, neg[:sh_bits])),
            ]
            with m.Switch(self.op):
                with m.Case(isa.AluOp.MIN):
                    m.d.comb += res.eq(Mux(a < b, a, b))
                with m.Case(isa.AluOp.MAX):
                    m.d.comb += res.eq(Mux(a > b, a, b))
                with m.Case(isa.AluOp.ADD):
                    m.d.comb += res.eq(a + b)
                with m.Case(isa.AluOp.SHR):
                    m.d.comb += res.eq(Mux(b >= 0, a >> right, a << left))
                with m.Case(isa.AluOp.MUL):
                    m.d.comb += res.eq(a * b)
        return m


def lanes_add(a, b, lane_bits: int, lanes: int):
    """Lane-wise wrapping add of two packed rows."""
    return Cat(
        *(
            (a[i * lane_bits :][:lane_bits] + b[i * lane_bits :][:lane_bits])[:lane_bits]
            for i in range(lanes)
        )
    )
