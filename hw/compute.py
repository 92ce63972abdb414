"""The compute unit: micro-op buffer, ACC buffer, GEMM core and ALU, UOP/ACC loads, FINISH.

Two issue lanes (``isa.layout.OVERLAP_DOC``): the GEMM lane (GEMM instructions, resets included)
and the ALU lane, each with its own loop counters and UOP read port, each in order, one micro-op
per cycle. Every stage ends in registers:
  S0  loop counters -> UOP read           S1  UOP row -> indices (u + loop bases)
  S2  ISSUE: INP/WGT reads (GEMM lane); the only stage that stalls (read-after-write hazards on
      ACC rows in both lanes, program order between the lanes, the ACC bank ports). Its decision
      starts at flip-flops: the row compares with the stages past ISSUE, the src-row register's
      tag compare and the loop counters' last-value tests are registered a cycle ahead
  S3  INP/WGT rows registered             S4-S6  GEMM core (products, adder tree in two halves)
  S4  ACC src read (ALU, register operand, unless the src-row register holds the row)
  S5  ACC dst read;  S6  ACC rows registered
  S7  accumulate (GEMM) / ALU operands    S8  ACC and OUT write (ALU result combined)
ACC and OUT are two banks by the top row bit, each with its own ports; when both lanes need one
bank's port in the same cycle the ALU lane waits. Each micro-op carries its own control
(``op_layout``), so the next instruction's micro-ops follow without a drain.

Dispatch is in program order (``hw.queues.sequence``): a GEMM/ALU instruction goes to its lane once
the lane's counters are free and, unless its ``overlap`` bit is set, the other lane's too; its
micro-ops then issue after every earlier micro-op of the other lane except (``overlap``) those of
its partner, the other lane's most recent instruction (instruction tags ``seq``/``limit``). An
instruction that pushes a token waits for its lane to drain and for the other lane to retire all
but the partner; a LOAD (into UOP/ACC, which the lanes read) and FINISH wait for both to drain.
A program without overlap bits runs exactly as on one lane.

The lanes (S0-S2 and their control past ISSUE) and the scoreboard that decides at ISSUE are built
by ``hw.lanes``; this unit holds the memories, the cores and the datapath between them.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from pyvta import isa
from pyvta.hw.axi import read_client_signature
from pyvta.hw.core import Alu, GemmCore, lanes_add
from pyvta.hw.dma import DmaLoad
from pyvta.hw.fields import INSN_WORD_BITS, insn_view
from pyvta.hw.lanes import (
    ACC_READ_STAGE,
    DOT_STAGE,
    ISSUE_STAGE,
    LANES,
    SEQ_BITS,
    SRC_READ_STAGE,
    WRITE_STAGE,
    Lanes,
    reads_dst,
    two_phase,
)
from pyvta.hw.queues import sequence, token_port
from pyvta.hw.sram import (
    ACC_BANKS,
    bank_of,
    bank_row,
    bank_shape,
    sram_read_signature,
    sram_shape,
    sram_write_signature,
)

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
        if self.out.depth != self.acc.depth:
            raise ValueError(
                f"OUT depth {self.out.depth} differs from ACC depth {self.acc.depth}: the compute"
                " unit writes OUT row i with ACC row i (equal depths are required)"
            )
        self.out_bank = bank_shape(self.out)
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
                "out_wr": Out(sram_write_signature(self.out_bank)).array(ACC_BANKS),
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
        uop_wr = uop_mem.write_port(granularity=self.uop.granularity_bits)
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

        G, A, lanes, loading = self._dispatch(m, dma, uop_mem)
        src = lanes.issue(m, G, A, self.zero, loading)  # S2: the scoreboard
        self._issued(m, G, A)
        acc_wr, gemm_sum = self._acc_datapath(m, G, A, src, gemm, alu)
        self._writes(m, [(G, gemm_sum), (A, alu.result)], acc_wr, dma)
        return m

    def _dispatch(self, m, dma, uop_mem):
        """The instruction sequencer (``hw.queues.sequence``), instruction tags and the two issue
        lanes' S0-S2 (``hw.lanes``). Returns the lanes, their builder and the start of a LOAD."""
        cfg = self.cfg
        insn = Signal(INSN_WORD_BITS)
        g = insn_view("gemm", cfg, insn)
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
        m.d.comb += [dma.insn.eq(insn), dma.start.eq(start & is_load)]
        with m.If(start & is_finish):
            m.d.sync += self.finished.eq(1)
        with m.If(self.clear):
            m.d.sync += [self.finished.eq(0), self.gemm_uops.eq(0), self.alu_uops.eq(0)]

        seq = Signal(SEQ_BITS)
        with m.If(start & is_loop):
            m.d.sync += seq.eq(seq + 1)
        lanes = Lanes(cfg, self.uop, self.acc, self.inp, self.wgt)
        built = []
        for name, is_kind in zip(LANES, (is_gemm, is_alu), strict=True):
            port = uop_mem.read_port()
            built.append(lanes.lane(m, name, port, start & is_kind, insn))
        G, A = built
        ov = g.overlap
        for me, other in ((G, A), (A, G)):
            # An overlapped instruction need not wait for its partner (the other lane's newest);
            # with the other lane empty there is none, and the tag of its newest may be stale.
            m.d.comb += me.new_limit.eq(Mux(ov & other.busy, other.seq, seq))
            m.d.comb += me.new_seq.eq(seq)
        pipe_busy = G.busy | A.busy
        loop_ok = Mux(is_gemm, G.free & (ov | A.free), A.free & (ov | G.free))
        m.d.comb += may_start.eq(Mux(is_load | is_finish, ~pipe_busy, ~is_loop | loop_ok))
        # A push waits for both lanes to drain (as on one lane) or, overlapped, for its own lane
        # and the other lane's micro-ops older than the partner: that check is registered (its
        # tag compares are long; in EXEC it only turns true, so a cycle-old value is safe).
        partner_retired = Signal()
        m.d.sync += partner_retired.eq(
            executing
            & Mux(
                is_gemm, ~G.busy & ~A.retiring_older(G.limit), ~A.busy & ~G.retiring_older(A.limit)
            )
        )
        push_ok = Mux(ov, partner_retired, ~pipe_busy)
        pushes = g.push_prev_dep | g.push_next_dep
        m.d.comb += finished.eq(Mux(is_load, ~dma.busy, ~is_loop | ~pushes | push_ok))
        # Waiting for a lane is counted as executing (one lane: the previous instruction's EXEC).
        loop_wait = ~idle & ~executing & is_loop & ~may_start
        m.d.comb += [
            self.idle.eq(idle),
            self.executing.eq(executing | loop_wait),
            self.stalled.eq(stalled & ~loop_wait),
        ]
        return G, A, lanes, start & is_load

    def _issued(self, m, G, A):
        """What issue starts: the GEMM lane's INP/WGT reads and the micro-op counters."""
        m.d.comb += [
            self.inp_rd.addr.eq(G.issue_src),
            self.inp_rd.en.eq(G.issue_go),
            self.wgt_rd.addr.eq(G.issue_wgt),
            self.wgt_rd.en.eq(G.issue_go),
        ]
        # Counters enabled by issue (issue as a carry-in would run along the 32-bit carry chain).
        with m.If(G.issue_go):
            m.d.sync += self.gemm_uops.eq(self.gemm_uops + 1)
        with m.If(A.issue_go):
            m.d.sync += self.alu_uops.eq(self.alu_uops + 1)

    def _acc_datapath(self, m, G, A, src, gemm, alu):
        """S3-S7: INP/WGT rows registered into the GEMM core; the ACC reads (two banks: the ALU's
        src row, then the dst rows), registered; the accumulate and the ALU operands. Returns the
        ACC banks' write ports and the GEMM lane's result."""
        cfg = self.cfg
        acc_bits = self.acc.addr_bits
        ahead = ISSUE_STAGE + 1
        src_at = {ahead: Signal(acc_bits, name=f"s{ahead}_src")}
        m.d.sync += src_at[ahead].eq(src)
        for s in range(ahead, ACC_READ_STAGE):
            src_at[s + 1] = Signal(acc_bits, name=f"s{s + 1}_src")
            m.d.sync += src_at[s + 1].eq(src_at[s])

        inp_row = Signal.like(self.inp_data)
        wgt_row = Signal.like(self.wgt_data)
        m.d.sync += [inp_row.eq(self.inp_data), wgt_row.eq(self.wgt_data)]
        m.d.comb += [gemm.inp.eq(inp_row), gemm.wgt.eq(wgt_row)]
        bank = bank_shape(self.acc)
        acc_rd, acc_wr = [], []
        for b in range(ACC_BANKS):
            mem = memory.Memory(shape=bank.row_bits, depth=bank.depth, init=[])
            m.submodules[f"acc_mem{b}"] = mem
            acc_wr.append(mem.write_port(granularity=bank.granularity_bits))
            acc_rd.append(rd := mem.read_port())
            a_src, a_dst, g_dst = (A.op[SRC_READ_STAGE], A.op[ACC_READ_STAGE], G.op[ACC_READ_STAGE])
            src_idx = src_at[SRC_READ_STAGE]
            with m.If(A.valid[SRC_READ_STAGE] & two_phase(a_src) & (bank_of(src_idx) == b)):
                m.d.comb += [rd.addr.eq(bank_row(src_idx)), rd.en.eq(1)]
            with m.Elif(A.valid[ACC_READ_STAGE] & (bank_of(a_dst.dst) == b)):
                m.d.comb += [rd.addr.eq(bank_row(a_dst.dst)), rd.en.eq(1)]
            with m.Elif(G.valid[ACC_READ_STAGE] & reads_dst(g_dst) & (bank_of(g_dst.dst) == b)):
                m.d.comb += [rd.addr.eq(bank_row(g_dst.dst)), rd.en.eq(1)]

        def read_data(idx):
            """The row the bank of ``idx`` returns (read the cycle before)."""
            return Mux(bank_of(idx), acc_rd[1].data, acc_rd[0].data)

        # The src row arrives while its micro-op reads dst; the ALU's second operand (that row or
        # the immediate) and the dst rows are registered for DOT_STAGE.
        lanes_n = cfg.batch * cfg.block_out
        aw = cfg.acc_width_bits
        row_bits = self.acc.row_bits
        src_row = Signal(row_bits)
        alu_row = Signal(row_bits)
        gemm_row = Signal(row_bits)
        operand_b = Signal(row_bits)
        with m.If(A.valid[ahead + 2] & two_phase(A.op[ahead + 2])):
            m.d.sync += src_row.eq(read_data(src_at[ahead + 2]))  # held for the next micro-ops
        b_op = A.op[DOT_STAGE - 1]
        imm = Signal(aw)
        m.d.comb += imm.eq(b_op.imm)
        m.d.sync += [
            operand_b.eq(Mux(b_op.use_imm, imm.replicate(lanes_n), src_row)),
            alu_row.eq(read_data(A.op[DOT_STAGE - 1].dst)),
            gemm_row.eq(read_data(G.op[DOT_STAGE - 1].dst)),
        ]

        # S7: accumulate / ALU operands
        m.d.comb += [alu.op.eq(A.op[DOT_STAGE].alu_op), alu.a.eq(alu_row), alu.b.eq(operand_b)]
        gemm_sum = Signal(row_bits)
        g_dot = G.op[DOT_STAGE]
        m.d.sync += gemm_sum.eq(Mux(g_dot.reset, 0, lanes_add(gemm_row, gemm.dot, aw, lanes_n)))
        return acc_wr, gemm_sum

    def _writes(self, m, writers, acc_wr, dma):
        """S8: each ACC bank (and its OUT bank) takes CTRL.CLEAR's zeroes, else a lane's result
        (``writers``: (lane, result), in priority order), else the DMA's ACC load."""
        cfg = self.cfg
        lanes_n = cfg.batch * cfg.block_out
        aw = cfg.acc_width_bits

        def out_row(result):
            return Cat(*(result[lane * aw :][: cfg.out_width_bits] for lane in range(lanes_n)))

        for b in range(ACC_BANKS):
            wr, out_wr = acc_wr[b], self.out_wr[b]
            with m.If(self.zero):
                m.d.comb += [
                    wr.addr.eq(self.zero_addr),
                    wr.data.eq(0),
                    wr.en.eq(-1),
                    out_wr.addr.eq(self.zero_addr),
                    out_wr.data.eq(0),
                    out_wr.en.eq(-1),
                ]
            for lane, result in writers:
                w = lane.op[WRITE_STAGE]
                with m.Elif(lane.valid[WRITE_STAGE] & (bank_of(w.dst) == b)):
                    m.d.comb += [
                        wr.addr.eq(bank_row(w.dst)),
                        wr.data.eq(result),
                        wr.en.eq(-1),
                        out_wr.addr.eq(bank_row(w.dst)),
                        out_wr.data.eq(out_row(result)),
                        out_wr.en.eq(-1),
                    ]
            with m.Elif(bank_of(dma.acc_wr.addr) == b):
                m.d.comb += [
                    wr.addr.eq(bank_row(dma.acc_wr.addr)),
                    wr.data.eq(dma.acc_wr.data),
                    wr.en.eq(dma.acc_wr.en),
                ]
        return m
