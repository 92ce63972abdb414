"""The compute unit: micro-op buffer, ACC buffer, GEMM core and ALU, UOP/ACC loads, FINISH.

GEMM/ALU pipeline, one micro-op per cycle (two for ALU without immediate: one ACC read port):
  S0  loop counters -> UOP read          S1  indices -> INP/WGT/ACC reads (stalls on a RAW hazard
  S2  GEMM core / ALU -> register        S3  ACC and OUT write          with S2/S3, so results never
depend on micro-op order). Pipeline latency 4 cycles; the unit drains it before the next instruction.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from pyvta import isa
from pyvta.hw.axi import read_client_signature
from pyvta.hw.core import Alu, GemmCore, lanes_add
from pyvta.hw.dma import DmaLoad
from pyvta.hw.fields import INSN_WORD_BITS, insn_view, uop_view
from pyvta.hw.queues import sequence, token_port
from pyvta.hw.sram import sram_read_signature, sram_shape, sram_write_signature

COMPUTE_LOADS = tuple(m for m, mod in isa.LOAD_MODULE.items() if mod is isa.Module.COMPUTE)


class ComputeUnit(wiring.Component):
    def __init__(self, cfg: isa.HwConfig, dsp_products: int | None = None):
        self.cfg = cfg
        self.dsp_products = dsp_products
        self.uop = sram_shape(cfg, "uop", (isa.MemType.UOP,))
        self.acc = sram_shape(cfg, "acc", (isa.MemType.ACC, isa.MemType.ACC_8BIT))
        self.inp = sram_shape(cfg, "inp")
        self.wgt = sram_shape(cfg, "wgt")
        self.out = sram_shape(cfg, "out")
        super().__init__(
            {
                "cmd": In(stream.Signature(INSN_WORD_BITS)),
                "rd": Out(read_client_signature(cfg.bus_width_bits)),
                "l2c": Out(token_port()),
                "s2c": Out(token_port()),
                "c2l": Out(token_port()),
                "c2s": Out(token_port()),
                "inp_rd": Out(sram_read_signature(self.inp)),
                "inp_data": In(self.inp.row_bits),
                "wgt_rd": Out(sram_read_signature(self.wgt)),
                "wgt_data": In(self.wgt.row_bits),
                "out_wr": Out(sram_write_signature(self.out)),
                "clear": In(1),
                "zero": In(1),
                "zero_addr": In(16),
                "finished": Out(1),
                "idle": Out(1),
                "executing": Out(1),
                "stalled": Out(1),
                "gemm_uops": Out(32),
                "alu_uops": Out(32),
            }
        )

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        srams = {t: (self.uop if t is isa.MemType.UOP else self.acc) for t in COMPUTE_LOADS}
        m.submodules.dma = dma = DmaLoad(cfg, srams)
        wiring.connect(m, dma.rd, wiring.flipped(self.rd))
        m.submodules.uop_mem = uop_mem = memory.Memory(
            shape=self.uop.row_bits, depth=self.uop.depth, init=[]
        )
        m.submodules.acc_mem = acc_mem = memory.Memory(
            shape=self.acc.row_bits, depth=self.acc.depth, init=[]
        )
        uop_wr = uop_mem.write_port(granularity=self.uop.granularity_bits)
        uop_rd = uop_mem.read_port()
        acc_wr = acc_mem.write_port(granularity=self.acc.granularity_bits)
        acc_rd = acc_mem.read_port()
        with m.If(self.zero):
            m.d.comb += [uop_wr.addr.eq(self.zero_addr), uop_wr.data.eq(0), uop_wr.en.eq(-1)]
        with m.Else():
            m.d.comb += [
                uop_wr.addr.eq(dma.uop_wr.addr),
                uop_wr.data.eq(dma.uop_wr.data),
                uop_wr.en.eq(dma.uop_wr.en),
            ]
        m.submodules.gemm = gemm = GemmCore(cfg, self.dsp_products)
        m.submodules.alu = alu = Alu(cfg)

        insn = Signal(INSN_WORD_BITS)
        g = insn_view("gemm", cfg, insn)
        a = insn_view("alu", cfg, insn)
        is_gemm = g.opcode == isa.Opcode.GEMM
        is_alu = g.opcode == isa.Opcode.ALU
        is_loop = is_gemm | is_alu
        is_load = g.opcode == isa.Opcode.LOAD
        is_finish = g.opcode == isa.Opcode.FINISH

        start = Signal()
        finished = Signal()
        idle, executing, stalled = sequence(
            m,
            self.cmd,
            insn,
            g,
            isa.Module.COMPUTE,
            {q: getattr(self, q.value) for q in isa.DepQueue},
            start=start,
            finished=finished,
        )
        m.d.comb += [
            self.idle.eq(idle),
            self.executing.eq(executing),
            self.stalled.eq(stalled),
            dma.insn.eq(insn),
            dma.start.eq(start & is_load),
        ]
        with m.If(start & is_finish):
            m.d.sync += self.finished.eq(1)
        with m.If(self.clear):
            m.d.sync += [self.finished.eq(0), self.gemm_uops.eq(0), self.alu_uops.eq(0)]

        # ---- S0: loop counters -------------------------------------------------------------------
        acc_bits, inp_bits, wgt_bits = self.acc.addr_bits, self.inp.addr_bits, self.wgt.addr_bits
        src_bits = max(acc_bits, inp_bits)
        gen = Signal()
        i = Signal(len(g.iter_out))
        j = Signal(len(g.iter_in))
        k = Signal(len(g.uop_end))
        bases_o = [
            Signal(acc_bits, name="dst_o"),
            Signal(src_bits, name="src_o"),
            Signal(wgt_bits, name="wgt_o"),
        ]
        bases_i = [
            Signal(acc_bits, name="dst_i"),
            Signal(src_bits, name="src_i"),
            Signal(wgt_bits, name="wgt_i"),
        ]
        f_out = [
            g.dst_factor_out,
            Mux(is_alu, a.src_factor_out, g.src_factor_out),
            g.wgt_factor_out,
        ]
        f_in = [g.dst_factor_in, Mux(is_alu, a.src_factor_in, g.src_factor_in), g.wgt_factor_in]

        s1_ready = Signal()
        s0_fire = gen & s1_ready
        log_per_row = self.uop.log_elems_per_row
        m.d.comb += [uop_rd.addr.eq(k >> log_per_row), uop_rd.en.eq(s0_fire)]
        with m.If(s0_fire):
            with m.If(k + 1 == g.uop_end):
                m.d.sync += k.eq(g.uop_bgn)
                with m.If(j + 1 == g.iter_in):
                    m.d.sync += [j.eq(0), i.eq(i + 1)]
                    with m.If(i + 1 == g.iter_out):
                        m.d.sync += gen.eq(0)
                    for bo, bi, fo in zip(bases_o, bases_i, f_out, strict=True):
                        m.d.sync += [bo.eq(bo + fo), bi.eq(bo + fo)]
                with m.Else():
                    m.d.sync += j.eq(j + 1)
                    for bi, fi in zip(bases_i, f_in, strict=True):
                        m.d.sync += bi.eq(bi + fi)
            with m.Else():
                m.d.sync += k.eq(k + 1)
        loop_nonempty = (g.iter_out != 0) & (g.iter_in != 0) & (g.uop_end > g.uop_bgn)
        with m.If(start & is_loop):
            m.d.sync += [gen.eq(loop_nonempty), i.eq(0), j.eq(0), k.eq(g.uop_bgn)]
            m.d.sync += [b.eq(0) for b in bases_o + bases_i]

        # ---- S1: indices and SRAM reads ---------------------------------------------------------
        s1_valid = Signal()
        s1_bases = [Signal(len(b), name=f"s1_{b.name}") for b in bases_i]
        s1_lane = Signal(max(1, log_per_row))
        with m.If(s0_fire):
            m.d.sync += [s.eq(b) for s, b in zip(s1_bases, bases_i, strict=True)]
            m.d.sync += s1_lane.eq(k[:log_per_row] if log_per_row else 0)
        u = uop_view(cfg, uop_rd.data.word_select(s1_lane, self.uop.elem_bits))
        dst = Signal(acc_bits)
        src = Signal(src_bits)
        wgt = Signal(wgt_bits)
        m.d.comb += [
            dst.eq(u.dst + s1_bases[0]),
            src.eq(Mux(is_alu, (u.src + s1_bases[1])[:acc_bits], (u.src + s1_bases[1])[:inp_bits])),
            wgt.eq(u.wgt + s1_bases[2]),
        ]
        s2_valid, s3_valid = Signal(), Signal()
        s2_dst, s3_dst = Signal(acc_bits), Signal(acc_bits)
        two_phase = is_alu & ~a.use_imm

        def in_flight(idx):
            return (s2_valid & (s2_dst == idx)) | (s3_valid & (s3_dst == idx))

        # A GEMM reset only writes: in-order writes need no stall.
        reads_acc = ~(is_gemm & g.reset_reg)
        hazard = (reads_acc & in_flight(dst)) | (two_phase & in_flight(src[:acc_bits]))
        phase = Signal()
        s1_go = s1_valid & ~hazard & (~two_phase | phase)
        m.d.comb += s1_ready.eq(~s1_valid | s1_go)
        with m.If(s1_valid & ~hazard & two_phase & ~phase):
            m.d.comb += [acc_rd.addr.eq(src), acc_rd.en.eq(1)]
            m.d.sync += phase.eq(1)
        with m.If(s1_go):
            m.d.comb += [
                acc_rd.addr.eq(dst),
                acc_rd.en.eq(1),
                self.inp_rd.addr.eq(src),
                self.inp_rd.en.eq(is_gemm),
                self.wgt_rd.addr.eq(wgt),
                self.wgt_rd.en.eq(is_gemm),
            ]
            m.d.sync += phase.eq(0)
        m.d.sync += s1_valid.eq(s0_fire | (s1_valid & ~s1_go))
        with m.If(s1_go):
            m.d.sync += [
                self.gemm_uops.eq(self.gemm_uops + is_gemm),
                self.alu_uops.eq(self.alu_uops + is_alu),
            ]

        # ---- S2: GEMM core / ALU ------------------------------------------------------------------
        src_val = Signal(self.acc.row_bits)
        with m.If(s1_go & two_phase):
            m.d.sync += src_val.eq(acc_rd.data)
        lanes = cfg.batch * cfg.block_out
        imm = Signal(cfg.acc_width_bits)
        m.d.comb += imm.eq(a.imm)
        m.d.comb += [
            gemm.inp.eq(self.inp_data),
            gemm.wgt.eq(self.wgt_data),
            alu.op.eq(a.alu_opcode),
            alu.a.eq(acc_rd.data),
            alu.b.eq(Mux(a.use_imm, imm.replicate(lanes), src_val)),
        ]
        s3_a = Signal(self.acc.row_bits)
        s3_b = Signal(self.acc.row_bits)
        m.d.sync += [s2_valid.eq(s1_go), s2_dst.eq(dst), s3_valid.eq(s2_valid), s3_dst.eq(s2_dst)]
        with m.If(s2_valid):
            with m.If(is_alu):
                m.d.sync += [s3_a.eq(alu.result), s3_b.eq(0)]
            with m.Elif(g.reset_reg):
                m.d.sync += [s3_a.eq(0), s3_b.eq(0)]
            with m.Else():
                m.d.sync += [s3_a.eq(acc_rd.data), s3_b.eq(gemm.dot)]

        # ---- S3: ACC and OUT writes ---------------------------------------------------------------
        aw = cfg.acc_width_bits
        result = Signal(self.acc.row_bits)
        m.d.comb += result.eq(lanes_add(s3_a, s3_b, aw, lanes))
        with m.If(self.zero):
            m.d.comb += [
                acc_wr.addr.eq(self.zero_addr),
                acc_wr.data.eq(0),
                acc_wr.en.eq(-1),
                self.out_wr.addr.eq(self.zero_addr),
                self.out_wr.data.eq(0),
                self.out_wr.en.eq(-1),
            ]
        with m.Elif(s3_valid):
            m.d.comb += [
                acc_wr.addr.eq(s3_dst),
                acc_wr.data.eq(result),
                acc_wr.en.eq((1 << self.acc.lanes) - 1),
                self.out_wr.addr.eq(s3_dst),
                self.out_wr.data.eq(
                    Cat(*(result[lane * aw :][: cfg.out_width_bits] for lane in range(lanes)))
                ),
                self.out_wr.en.eq((1 << self.out.lanes) - 1),
            ]
        with m.Else():
            m.d.comb += [
                acc_wr.addr.eq(dma.acc_wr.addr),
                acc_wr.data.eq(dma.acc_wr.data),
                acc_wr.en.eq(dma.acc_wr.en),
            ]

        pipe_busy = gen | s1_valid | s2_valid | s3_valid
        m.d.comb += finished.eq(Mux(is_load, ~dma.busy, Mux(is_loop, ~pipe_busy, 1)))
        return m
