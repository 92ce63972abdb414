"""The arithmetic of the compute unit: the GEMM core and the vector ALU, both pipelined.

``GemmCore``: dot[b][o] = sum_k inp[b][k] * wgt[o][k] for one micro-op: BATCH x BLOCK_IN int8 by
BLOCK_IN x BLOCK_OUT int8 (weights stored output-major), int32 results. ``dsp_products`` of the
products use ``*`` (mapped to DSP48 slices by synthesis); the rest are shift-and-add LUT multipliers,
so the default config's 256 products fit the 220 DSPs of a Zynq-7020. Latency
``GEMM_LATENCY_CYCLES`` (registered products, then the adder tree in two registered halves),
throughput one dot product per cycle; ``dot`` is a register output.

``Alu``: lane-wise MIN, MAX, ADD, SHR (signed amount: right for >= 0, left for < 0, both clamped to 31),
MUL (low 32 bits) and CLIP (``isa.opcodes.CLIP_DOC``) over BATCH x BLOCK_OUT int32 lanes; all
arithmetic wraps. Latency
``ALU_LATENCY_CYCLES``: the operands are registered with the simple results and the three 16x16
partial products of MUL; ``result`` combines them (combinational from those registers).
"""

from __future__ import annotations

import math

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pyvta import isa

GEMM_LATENCY_CYCLES = 3  # products, first half of the adder tree, second half
ALU_LATENCY_CYCLES = 1  # inputs -> registered partial results -> ``result``


def tree_sum(values, levels: int | None = None):
    """Balanced adder tree (keeps the result width and the logic depth small).

    With ``levels``, only that many adder levels are built and the partial sums are returned."""
    values = list(values)
    done = 0
    while len(values) > 1 and (levels is None or done < levels):
        nxt = [values[i] + values[i + 1] for i in range(0, len(values) - 1, 2)]
        if len(values) % 2:
            nxt.append(values[-1])
        values = nxt
        done += 1
    return values if levels is not None else values[0]


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
        levels = math.ceil(math.log2(cfg.block_in)) if cfg.block_in > 1 else 0
        first_levels = (levels + 1) // 2
        p = 0
        for b in range(cfg.batch):
            for o in range(cfg.block_out):
                products = []
                for k in range(cfg.block_in):
                    x = self.inp[(b * cfg.block_in + k) * iw :][:iw].as_signed()
                    w = self.wgt[(o * cfg.block_in + k) * ww :][:ww].as_signed()
                    prod = Signal(signed(iw + ww), name=f"p_{b}_{o}_{k}")
                    m.d.sync += prod.eq(x * w if p < self.dsp_products else lut_mul(x, w))
                    products.append(prod)
                    p += 1
                partial = []
                for n, value in enumerate(tree_sum(products, first_levels)):
                    s = Signal(signed(len(value)), name=f"t_{b}_{o}_{n}")
                    m.d.sync += s.eq(value)
                    partial.append(s)
                lane = b * cfg.block_out + o
                m.d.sync += self.dot[lane * aw : (lane + 1) * aw].eq(tree_sum(partial))
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
        half = w // 2
        max_shift = w - 1
        sh_bits = max_shift.bit_length()
        op = Signal.like(self.op)
        m.d.sync += op.eq(self.op)
        for lane in range(cfg.batch * cfg.block_out):
            a = self.a[lane * w : (lane + 1) * w].as_signed()
            b = self.b[lane * w : (lane + 1) * w].as_signed()
            res = self.result[lane * w : (lane + 1) * w]
            # SHR: right by b for b >= 0, left by -b for b < 0, both clamped to max_shift. The
            # shifters take b's low bits as they are and the clamp picks among the results
            # after them; left by -b is left by ~b and then by one (no negation: short paths).
            sh = b[:sh_bits]
            high = b[sh_bits:]
            small_neg = (high == (1 << len(high)) - 1) & (sh != 0)  # -max_shift <= b < 0
            shr = Mux(high != 0, a >> max_shift, a >> sh)
            shl = Mux(small_neg, (a << ~sh) << 1, a << max_shift)
            # ADD has its own register: the opcode's mux follows it one stage later, not the
            # carry chain's end (short paths).
            total = Signal(w, name=f"add_{lane}")
            m.d.sync += total.eq(a + b)
            simple = Signal(w, name=f"simple_{lane}")
            with m.Switch(self.op):
                with m.Case(isa.AluOp.MIN):
                    m.d.sync += simple.eq(Mux(signed_less(a, b), a, b))
                with m.Case(isa.AluOp.MAX):
                    m.d.sync += simple.eq(Mux(signed_less(b, a), a, b))
                with m.Case(isa.AluOp.SHR):
                    m.d.sync += simple.eq(Mux(b >= 0, shr, shl))
                with m.Case(isa.AluOp.CLIP):
                    m.d.sync += simple.eq(clip(a, b))
            # MUL, low w bits: lo*lo + ((hi*lo + lo*hi) << half), each 16x16 product registered.
            a_lo, a_hi, b_lo, b_hi = a[:half], a[half:], b[:half], b[half:]
            low = Signal(w, name=f"mul_ll_{lane}")
            cross = Signal(half, name=f"mul_x_{lane}")
            m.d.sync += [low.eq(a_lo * b_lo), cross.eq(a_hi * b_lo + a_lo * b_hi)]
            product = Cat(low[:half], low[half:] + cross)
            m.d.comb += res.eq(
                Mux(op == isa.AluOp.MUL, product, Mux(op == isa.AluOp.ADD, total, simple))
            )
        return m


def clip(a, b):
    """``min(max(a, lo), hi)`` with lo, hi the signed bytes 7..0 and 15..8 of ``b``
    (``isa.opcodes.CLIP_DOC``): the three compares side by side, each on a byte (short paths)."""
    bits = isa.opcodes.CLIP_BOUND_BITS
    lo, hi = b[:bits].as_signed(), b[bits : 2 * bits].as_signed()
    below, above = byte_less(a, lo), byte_less(a, hi, swap=True)
    return Mux(above | (hi < lo), hi, Mux(below, lo, a))


def byte_less(a, byte, swap: bool = False):
    """``a < byte`` (``byte < a`` with ``swap``) for a signed ``a`` and a signed byte: a compare
    of the low bytes where ``a`` fits a byte, else ``a``'s sign decides."""
    bits = len(byte)
    top = a[bits - 1 :]
    fits = (top == 0) | (top == (1 << len(top)) - 1)
    low = a[:bits].as_signed()
    return Mux(fits, (byte < low) if swap else (low < byte), ~a[-1] if swap else a[-1])


def signed_less(a, b):
    """``a < b`` for signed values of one width, from the two halves compared side by side: half
    the carry chain of one full-width comparison (short paths)."""
    half = len(a) // 2
    high_a, high_b = a[half:], b[half:]
    return (high_a.as_signed() < high_b.as_signed()) | ((high_a == high_b) & (a[:half] < b[:half]))


def lanes_add(a, b, lane_bits: int, lanes: int):
    """Lane-wise wrapping add of two packed rows."""
    return Cat(
        *(
            (a[i * lane_bits :][:lane_bits] + b[i * lane_bits :][:lane_bits])[:lane_bits]
            for i in range(lanes)
        )
    )
