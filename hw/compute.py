"""The compute unit: micro-op buffer, ACC buffer, GEMM core and ALU, UOP/ACC loads, FINISH.

GEMM/ALU pipeline, one micro-op per cycle (two for ALU without immediate: one ACC read port), every
stage ends in registers:
  S0  loop counters -> UOP read           S1  UOP row -> indices (u + loop bases)
  S2  ISSUE: INP/WGT reads; the only stage that stalls (read-after-write hazards on ACC, so results
      never depend on micro-op order, and the ACC read port for two-phase ALU micro-ops)
  S3  INP/WGT rows registered             S4-S6  GEMM core (products, adder tree in two halves)
  S4  ACC src read (ALU without imm)      S5  ACC dst read;  S6  ACC rows registered
  S7  accumulate (GEMM) / ALU operands    S8  ACC and OUT write (ALU result combined)
Each micro-op carries its own control (``op_layout``), so the next instruction's micro-ops follow
the previous one's without a drain. The unit drains (``pipe_busy`` low) only before pushing a
dependency token, before FINISH and before a LOAD (into UOP/ACC, which the pipeline reads).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from pyvta import isa
from pyvta.hw.axi import read_client_signature
from pyvta.hw.core import ALU_LATENCY_CYCLES, GEMM_LATENCY_CYCLES, Alu, GemmCore, lanes_add
from pyvta.hw.dma import DmaLoad
from pyvta.hw.fields import INSN_WORD_BITS, flexible_layout, insn_view, uop_view
from pyvta.hw.queues import sequence, token_port
from pyvta.hw.sram import sram_read_signature, sram_shape, sram_write_signature

COMPUTE_LOADS = tuple(m for m, mod in isa.LOAD_MODULE.items() if mod is isa.Module.COMPUTE)
# Pipeline stages (numbered as in the module docstring), derived from the cores' latencies.
ISSUE_STAGE = 2
DOT_STAGE = ISSUE_STAGE + 2 + GEMM_LATENCY_CYCLES  # issue, INP/WGT rows registered, the core
WRITE_STAGE = DOT_STAGE + 1
ACC_READ_STAGE = DOT_STAGE - 2  # read, then registered: the ACC row is there with the dot product
SRC_READ_STAGE = ACC_READ_STAGE - 1
assert WRITE_STAGE - ALU_LATENCY_CYCLES == DOT_STAGE, "ALU operands enter with the dot product"
PIPELINE_LATENCY_CYCLES = WRITE_STAGE  # S0 of the last micro-op to its ACC write


def op_layout(cfg: isa.HwConfig, acc_bits: int) -> data.StructLayout:
    """What a micro-op carries down the pipeline (the instruction register moves on without it)."""
    alu = flexible_layout(isa.alu_layout(cfg))
    return data.StructLayout(
        {
            "gemm": 1,
            "alu": 1,
            "reset": 1,
            "use_imm": 1,
            "alu_op": alu["alu_opcode"].shape,
            "imm": alu["imm"].shape,
            "dst": acc_bits,
            "src_cached": 1,  # the src row is the one the last src read fetched (no read)
        }
    )


def reads_dst(op):
    """The micro-op reads its ACC destination (all but a GEMM reset)."""
    return op.alu | (op.gemm & ~op.reset)


def needs_src(op):
    """An ALU micro-op with a register operand (a src row)."""
    return op.alu & ~op.use_imm


def two_phase(op):
    """An ALU micro-op that reads its src row from ACC: reads ACC twice (src, then dst)."""
    return needs_src(op) & ~op.src_cached


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
        may_start = Signal()
        idle, executing, stalled = sequence(
            m,
            self.cmd,
            insn,
            g,
            isa.Module.COMPUTE,
            {q: getattr(self, q.value) for q in isa.DepQueue},
            start=start,
            finished=finished,
            may_start=may_start,
            back_to_back=True,
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
        layout = op_layout(cfg, acc_bits)
        stages = range(WRITE_STAGE + 1)
        valid = [Signal(name=f"s{s}_valid") for s in stages]
        op = [Signal(layout, name=f"s{s}_op") for s in stages]
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

        issue_go = Signal()
        issue_ready = ~valid[ISSUE_STAGE] | issue_go
        s1_ready = ~valid[1] | issue_ready
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

        # ---- S1: the UOP row arrives; indices ------------------------------------------------------
        s1_bases = [Signal(len(b), name=f"s1_{b.name}") for b in bases_i]
        s1_lane = Signal(max(1, log_per_row))
        with m.If(s1_ready):
            m.d.sync += valid[1].eq(s0_fire)
        with m.If(s0_fire):
            m.d.sync += [s.eq(b) for s, b in zip(s1_bases, bases_i, strict=True)]
            m.d.sync += s1_lane.eq(k[:log_per_row] if log_per_row else 0)
            m.d.sync += [
                op[1].gemm.eq(is_gemm),
                op[1].alu.eq(is_alu),
                op[1].reset.eq(g.reset_reg),
                op[1].use_imm.eq(a.use_imm),
                op[1].alu_op.eq(a.alu_opcode),
                op[1].imm.eq(a.imm),
            ]
        u = uop_view(cfg, uop_rd.data.word_select(s1_lane, self.uop.elem_bits))
        src_sum = u.src + s1_bases[1]
        issue_src = Signal(src_bits)
        issue_wgt = Signal(wgt_bits)
        with m.If(issue_ready):
            m.d.sync += [
                valid[ISSUE_STAGE].eq(valid[1]),
                op[ISSUE_STAGE].eq(op[1]),
                op[ISSUE_STAGE].dst.eq(u.dst + s1_bases[0]),
                issue_src.eq(Mux(op[1].alu, src_sum[:acc_bits], src_sum[:inp_bits])),
                issue_wgt.eq(u.wgt + s1_bases[2]),
            ]

        # ---- S2: issue (hazards) and INP/WGT reads -------------------------------------------------
        def in_flight(idx, read_stage):
            """A micro-op ahead still writes ACC row ``idx`` when the one at ISSUE reads it at
            ``read_stage`` (the read port is not transparent: same-cycle writes are not seen)."""
            last = WRITE_STAGE + ISSUE_STAGE - read_stage
            hit = 0
            for s in range(ISSUE_STAGE + 1, last + 1):
                hit = hit | (valid[s] & (op[s].dst == idx))
            return hit

        cur = op[ISSUE_STAGE]
        ahead = ISSUE_STAGE + 1
        src_row_idx = issue_src[:acc_bits]
        src_tag, src_tag_valid, src_hit = self._src_row_register(
            m, cur, src_row_idx, valid, op, start & is_load
        )
        reads_src = needs_src(cur) & ~src_hit
        hazard = (reads_dst(cur) & in_flight(cur.dst, ACC_READ_STAGE)) | (
            reads_src & in_flight(src_row_idx, SRC_READ_STAGE)
        )
        # A src read at SRC_READ_STAGE meets the dst read of the micro-op one ahead.
        port_taken = reads_src & valid[ahead] & reads_dst(op[ahead])
        m.d.comb += issue_go.eq(valid[ISSUE_STAGE] & ~hazard & ~port_taken)
        with m.If(issue_go & reads_src):
            m.d.sync += [src_tag.eq(src_row_idx), src_tag_valid.eq(1)]
        m.d.comb += [
            self.inp_rd.addr.eq(issue_src),
            self.inp_rd.en.eq(issue_go & cur.gemm),
            self.wgt_rd.addr.eq(issue_wgt),
            self.wgt_rd.en.eq(issue_go & cur.gemm),
        ]
        with m.If(issue_go):
            m.d.sync += [
                self.gemm_uops.eq(self.gemm_uops + cur.gemm),
                self.alu_uops.eq(self.alu_uops + cur.alu),
            ]
        m.d.sync += [valid[ahead].eq(issue_go), op[ahead].eq(cur)]
        m.d.sync += op[ahead].src_cached.eq(src_hit)
        for s in range(ahead, WRITE_STAGE):
            m.d.sync += [valid[s + 1].eq(valid[s]), op[s + 1].eq(op[s])]
        src_at = {ahead: Signal(src_bits, name=f"s{ahead}_src")}
        m.d.sync += src_at[ahead].eq(issue_src)
        for s in range(ahead, SRC_READ_STAGE):
            src_at[s + 1] = Signal(src_bits, name=f"s{s + 1}_src")
            m.d.sync += src_at[s + 1].eq(src_at[s])

        # ---- S3-S6: INP/WGT rows registered, GEMM core; ACC reads, registered ----------------------
        inp_row = Signal.like(self.inp_data)
        wgt_row = Signal.like(self.wgt_data)
        m.d.sync += [inp_row.eq(self.inp_data), wgt_row.eq(self.wgt_data)]
        m.d.comb += [gemm.inp.eq(inp_row), gemm.wgt.eq(wgt_row)]
        src_op, dst_op = op[SRC_READ_STAGE], op[ACC_READ_STAGE]
        with m.If(valid[SRC_READ_STAGE] & two_phase(src_op)):
            m.d.comb += [acc_rd.addr.eq(src_at[SRC_READ_STAGE][:acc_bits]), acc_rd.en.eq(1)]
        with m.Elif(valid[ACC_READ_STAGE] & reads_dst(dst_op)):
            m.d.comb += [acc_rd.addr.eq(dst_op.dst), acc_rd.en.eq(1)]
        # The src row arrives while its micro-op reads dst; the ALU's second operand (that row or
        # the immediate) and the dst row are registered for DOT_STAGE.
        lanes = cfg.batch * cfg.block_out
        aw = cfg.acc_width_bits
        src_row = Signal(self.acc.row_bits)
        acc_row = Signal(self.acc.row_bits)
        operand_b = Signal(self.acc.row_bits)
        b_op = op[DOT_STAGE - 1]
        imm = Signal(aw)
        m.d.comb += imm.eq(b_op.imm)
        with m.If(valid[SRC_READ_STAGE + 1] & two_phase(op[SRC_READ_STAGE + 1])):
            m.d.sync += src_row.eq(acc_rd.data)  # held for later micro-ops of the same src row
        m.d.sync += [
            operand_b.eq(Mux(b_op.use_imm, imm.replicate(lanes), src_row)),
            acc_row.eq(acc_rd.data),
        ]

        # ---- S7: accumulate / ALU operands ---------------------------------------------------------
        dot_op = op[DOT_STAGE]
        m.d.comb += [alu.op.eq(dot_op.alu_op), alu.a.eq(acc_row), alu.b.eq(operand_b)]
        gemm_sum = Signal(self.acc.row_bits)
        m.d.sync += gemm_sum.eq(Mux(dot_op.reset, 0, lanes_add(acc_row, gemm.dot, aw, lanes)))

        # ---- S8: ACC and OUT writes ----------------------------------------------------------------
        wr_op = op[WRITE_STAGE]
        result = Signal(self.acc.row_bits)
        m.d.comb += result.eq(Mux(wr_op.alu, alu.result, gemm_sum))
        with m.If(self.zero):
            m.d.comb += [
                acc_wr.addr.eq(self.zero_addr),
                acc_wr.data.eq(0),
                acc_wr.en.eq(-1),
                self.out_wr.addr.eq(self.zero_addr),
                self.out_wr.data.eq(0),
                self.out_wr.en.eq(-1),
            ]
        with m.Elif(valid[WRITE_STAGE]):
            m.d.comb += [
                acc_wr.addr.eq(wr_op.dst),
                acc_wr.data.eq(result),
                acc_wr.en.eq((1 << self.acc.lanes) - 1),
                self.out_wr.addr.eq(wr_op.dst),
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

        # Drain only where another party must see the writes or the pipeline's reads are done.
        pipe_busy = gen
        for v in valid[1:]:
            pipe_busy = pipe_busy | v
        pushes = g.push_prev_dep | g.push_next_dep
        m.d.comb += [
            may_start.eq(~((is_load | is_finish) & pipe_busy)),
            finished.eq(Mux(is_load, ~dma.busy, Mux(is_loop, ~gen & ~(pushes & pipe_busy), 1))),
        ]
        return m

    def _src_row_register(self, m, cur, src, valid, op, loading):
        """Rule 8 of the overlap contract: the ALU keeps the last ACC src row it read (one entry).

        Returns (tag, tag_valid, hit): ``hit`` is high when the micro-op at ISSUE needs src row
        ``src`` and that row is the one the last src read fetched, with no write to it since or in
        flight (stages past ISSUE), so it takes no ACC read (one cycle, not two). A write to the
        row, CTRL.CLEAR and a LOAD invalidate the entry; the caller sets it on a src read.
        """
        tag = Signal(self.acc.addr_bits, name="src_tag")
        tag_valid = Signal(name="src_tag_valid")
        written = 0
        for s in range(ISSUE_STAGE + 1, WRITE_STAGE + 1):
            written = written | (valid[s] & (op[s].dst == src))
        with m.If(self.zero | loading | (valid[WRITE_STAGE] & (op[WRITE_STAGE].dst == tag))):
            m.d.sync += tag_valid.eq(0)
        return tag, tag_valid, needs_src(cur) & tag_valid & (tag == src) & ~written
