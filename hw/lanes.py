"""The compute unit's two issue lanes and the scoreboard between them (``hw.compute``).

A lane (``Lanes.lane``) is S0 (loop counters, UOP read), S1 (the UOP row: indices) and the
ISSUE register S2, then the control of its micro-ops past ISSUE (one stage per cycle, to the
ACC write at ``WRITE_STAGE``). The scoreboard (``Lanes.issue``) decides at ISSUE which micro-op
of each lane goes: read-after-write hazards on ACC rows against every micro-op past ISSUE of
either lane, program order between the lanes (instruction tags), and the ACC bank ports; the
ALU's src-row register spares a repeated src read. Every compare it uses is registered a cycle
ahead, so the decision starts at flip-flops.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Mux, Signal
from amaranth.lib import data

from pyvta import isa
from pyvta.hw.core import ALU_LATENCY_CYCLES, GEMM_LATENCY_CYCLES
from pyvta.hw.fields import INSN_WORD_BITS, any_of, flexible_layout, insn_view, uop_view
from pyvta.hw.sram import bank_of

# Pipeline stages (numbered as in hw.compute's docstring), derived from the cores' latencies.
ISSUE_STAGE = 2
DOT_STAGE = ISSUE_STAGE + 2 + GEMM_LATENCY_CYCLES  # issue, INP/WGT rows registered, the core
WRITE_STAGE = DOT_STAGE + 1
ACC_READ_STAGE = DOT_STAGE - 2  # read, then registered: the ACC row is there with the dot product
SRC_READ_STAGE = ACC_READ_STAGE - 1
assert WRITE_STAGE - ALU_LATENCY_CYCLES == DOT_STAGE, "ALU operands enter with the dot product"
PIPELINE_LATENCY_CYCLES = WRITE_STAGE  # S0 of the last micro-op to its ACC write
# Instruction tags, compared modulo 2**SEQ_BITS: far more than the instructions in flight
# (at most one per lane stage).
SEQ_BITS = 6
LANES = ("gemm", "alu")


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
            "overlap": 1,
            "seq": SEQ_BITS,  # the instruction's tag
            "limit": SEQ_BITS,  # issue after the other lane's micro-ops with older tags
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


def older(a, b):
    """Instruction tag ``a`` is older than tag ``b`` (modulo 2**SEQ_BITS)."""
    d = (b - a)[:SEQ_BITS]
    return (d != 0) & ~d[SEQ_BITS - 1]


class Lanes:
    """Builds the issue lanes and the scoreboard into the compute unit's module; ``uop``, ``acc``,
    ``inp``, ``wgt``: the unit's SRAM shapes (``hw.sram.sram_shape``)."""

    def __init__(self, cfg: isa.HwConfig, uop, acc, inp, wgt):
        self.cfg = cfg
        self.uop, self.acc, self.inp, self.wgt = uop, acc, inp, wgt

    def issue(self, m, G, A, zero, loading):
        """S2, the scoreboard: drives both lanes' ``issue_go`` and returns the ALU lane's src row
        at ISSUE. A micro-op waits for read-after-write hazards on ACC rows (either lane's
        micro-ops past ISSUE), for the other lane's older micro-ops (program order between the
        lanes) and, on the ALU lane, for the ACC bank ports. ``zero``: CTRL.CLEAR zeroes the
        memories; ``loading``: a LOAD into UOP/ACC starts (both invalidate the src-row register).
        """
        acc_bits = self.acc.addr_bits

        cg, ca = G.op[ISSUE_STAGE], A.op[ISSUE_STAGE]
        src = A.issue_src[:acc_bits]
        matches = {
            "g_dst": self._row_matches(m, G, "dst", cg.dst, (G, A)),
            "a_dst": self._row_matches(m, A, "dst", ca.dst, (G, A)),
            "a_src": self._row_matches(m, A, "src", src, (G, A)),
        }

        def written(which, read_stage):
            """A micro-op past ISSUE still writes the ACC row ``which`` (``matches``) of the one at
            ISSUE when that one reads it at ``read_stage`` (the read port is not transparent:
            same-cycle writes are not seen)."""
            last = WRITE_STAGE + ISSUE_STAGE - read_stage
            return any_of(
                ln.valid[s] & matches[which][ln.name, s]
                for ln in (G, A)
                for s in range(ISSUE_STAGE + 1, last + 1)
            )

        g_waits = self._waits_for_older(m, G, A)
        g_hazard = reads_dst(cg) & written("g_dst", ACC_READ_STAGE)
        m.d.comb += G.issue_go.eq(G.valid[ISSUE_STAGE] & ~g_hazard & ~g_waits)

        src_tag, src_tag_seq, src_tag_valid, src_hit = self._src_row_register(
            m, A, src, (G, A), zero | loading, written("a_src", ISSUE_STAGE)
        )
        reads_src = needs_src(ca) & ~src_hit
        a_hazard = (reads_dst(ca) & written("a_dst", ACC_READ_STAGE)) | (
            reads_src & written("a_src", SRC_READ_STAGE)
        )
        ahead = ISSUE_STAGE + 1
        # Ports: a src read (ahead + 1) meets the dst read of a micro-op issued one cycle before
        # (ALU lane: any; GEMM lane: in the same bank, or any for an instruction without overlap,
        # as on one lane); a GEMM micro-op issuing now to the ALU's dst bank has priority.
        g_ahead = G.valid[ahead] & reads_dst(G.op[ahead])
        port_taken = reads_src & (
            (A.valid[ahead] & reads_dst(A.op[ahead]))
            | (g_ahead & (~ca.overlap | (bank_of(G.op[ahead].dst) == bank_of(src))))
        )
        bank_taken = G.valid[ISSUE_STAGE] & ~g_waits & (bank_of(cg.dst) == bank_of(ca.dst))
        a_waits = self._waits_for_older(m, A, G)
        m.d.comb += A.issue_go.eq(
            A.valid[ISSUE_STAGE] & ~a_hazard & ~a_waits & ~port_taken & ~bank_taken
        )
        set_tag = A.issue_go & reads_src
        with m.If(set_tag):
            m.d.sync += [src_tag.eq(src), src_tag_seq.eq(ca.seq), src_tag_valid.eq(1)]
        self._tag_match_next(m, A, src, set_tag)
        m.d.sync += A.op[ahead].src_cached.eq(src_hit)
        return src

    def lane(self, m, name, uop_rd, start, insn):
        """One issue lane's S0 (loop counters, UOP read), S1 (indices) and S2 registers, and the
        stages past ISSUE (control only). The caller drives ``issue_go``, ``new_seq`` and
        ``new_limit`` (the tags of the instruction dispatched when ``start`` is high)."""
        cfg = self.cfg
        is_alu = name == "alu"
        acc_bits, inp_bits, wgt_bits = (self.acc.addr_bits, self.inp.addr_bits, self.wgt.addr_bits)
        src_bits = acc_bits if is_alu else inp_bits
        layout = op_layout(cfg, acc_bits)
        valid = [None] + [Signal(name=f"{name}_s{s}_valid") for s in range(1, WRITE_STAGE + 1)]
        op = [None] + [Signal(layout, name=f"{name}_s{s}_op") for s in range(1, WRITE_STAGE + 1)]
        ln = SimpleNamespace(
            name=name,
            valid=valid,
            op=op,
            issue_go=Signal(name=f"{name}_issue_go"),
            new_seq=Signal(SEQ_BITS, name=f"{name}_new_seq"),
            new_limit=Signal(SEQ_BITS, name=f"{name}_new_limit"),
            seq=Signal(SEQ_BITS, name=f"{name}_seq"),
            limit=Signal(SEQ_BITS, name=f"{name}_limit"),
            issue_src=Signal(src_bits, name=f"{name}_issue_src"),
            issue_wgt=Signal(wgt_bits, name=f"{name}_issue_wgt"),
        )
        own = Signal(INSN_WORD_BITS, name=f"{name}_insn")  # the lane's instruction, kept
        gi, g, a = (
            insn_view("gemm", cfg, insn),
            insn_view("gemm", cfg, own),
            insn_view("alu", cfg, own),
        )
        with m.If(start):
            m.d.sync += [own.eq(insn), ln.seq.eq(ln.new_seq), ln.limit.eq(ln.new_limit)]

        # ---- S0: loop counters -------------------------------------------------------------------
        gen, gen_prev = Signal(name=f"{name}_gen"), Signal(name=f"{name}_gen_prev")
        m.d.sync += gen_prev.eq(gen)
        i = Signal(len(g.iter_out), name=f"{name}_i")
        j = Signal(len(g.iter_in), name=f"{name}_j")
        k = Signal(len(g.uop_end), name=f"{name}_k")
        widths = [acc_bits, src_bits] + ([] if is_alu else [wgt_bits])
        tags = ["dst", "src", "wgt"]
        bases_o = [Signal(w, name=f"{name}_{t}_o") for w, t in zip(widths, tags, strict=False)]
        bases_i = [Signal(w, name=f"{name}_{t}_i") for w, t in zip(widths, tags, strict=False)]
        src_f = (
            (a.src_factor_out, a.src_factor_in) if is_alu else (g.src_factor_out, g.src_factor_in)
        )
        f_out = [g.dst_factor_out, src_f[0], g.wgt_factor_out][: len(widths)]
        f_in = [g.dst_factor_in, src_f[1], g.wgt_factor_in][: len(widths)]

        # k, j, i at their last value (limit - 1), registered: each is set with its counter,
        # from the value the counter takes, so a step tests flip-flops, not a sum and a compare.
        k_last, j_last, i_last = (Signal(name=f"{name}_{c}_last") for c in "kji")

        issue_ready = ~valid[ISSUE_STAGE] | ln.issue_go
        s1_ready = ~valid[1] | issue_ready
        s0_fire = gen & s1_ready
        log_per_row = self.uop.log_elems_per_row
        m.d.comb += [uop_rd.addr.eq(k >> log_per_row), uop_rd.en.eq(s0_fire)]
        with m.If(s0_fire):
            with m.If(k_last):
                m.d.sync += [k.eq(g.uop_bgn), k_last.eq(g.uop_bgn + 1 == g.uop_end)]
                with m.If(j_last):
                    m.d.sync += [j.eq(0), j_last.eq(g.iter_in == 1)]
                    m.d.sync += [i.eq(i + 1), i_last.eq(i + 2 == g.iter_out)]
                    with m.If(i_last):
                        m.d.sync += gen.eq(0)
                    for bo, bi, fo in zip(bases_o, bases_i, f_out, strict=True):
                        m.d.sync += [bo.eq(bo + fo), bi.eq(bo + fo)]
                with m.Else():
                    m.d.sync += [j.eq(j + 1), j_last.eq(j + 2 == g.iter_in)]
                    for bi, fi in zip(bases_i, f_in, strict=True):
                        m.d.sync += bi.eq(bi + fi)
            with m.Else():
                m.d.sync += [k.eq(k + 1), k_last.eq(k + 2 == g.uop_end)]
        loop_nonempty = (gi.iter_out != 0) & (gi.iter_in != 0) & (gi.uop_end > gi.uop_bgn)
        with m.If(start):
            m.d.sync += [gen.eq(loop_nonempty), i.eq(0), j.eq(0), k.eq(gi.uop_bgn)]
            m.d.sync += [
                k_last.eq(gi.uop_bgn + 1 == gi.uop_end),
                j_last.eq(gi.iter_in == 1),
                i_last.eq(gi.iter_out == 1),
            ]
            m.d.sync += [b.eq(0) for b in bases_o + bases_i]

        # ---- S1: the UOP row arrives; indices ------------------------------------------------------
        s1_bases = [
            Signal(len(b), name=f"{name}_s1_{t}") for b, t in zip(bases_i, tags, strict=False)
        ]
        s1_lane = Signal(max(1, log_per_row), name=f"{name}_s1_lane")
        with m.If(s1_ready):
            m.d.sync += valid[1].eq(s0_fire)
        with m.If(s0_fire):
            m.d.sync += [s.eq(b) for s, b in zip(s1_bases, bases_i, strict=True)]
            m.d.sync += s1_lane.eq(k[:log_per_row] if log_per_row else 0)
            m.d.sync += [
                op[1].gemm.eq(not is_alu),
                op[1].alu.eq(is_alu),
                op[1].overlap.eq(g.overlap),
                op[1].seq.eq(ln.seq),
                op[1].limit.eq(ln.limit),
            ]
            if is_alu:
                m.d.sync += [
                    op[1].use_imm.eq(a.use_imm),
                    op[1].alu_op.eq(a.alu_opcode),
                    op[1].imm.eq(a.imm),
                ]
            else:
                m.d.sync += op[1].reset.eq(g.reset_reg)
        u = uop_view(cfg, uop_rd.data.word_select(s1_lane, self.uop.elem_bits))
        src_sum = u.src + s1_bases[1]

        def new_row_is(what, row):
            """S1's row ``what`` ("dst"/"src": the micro-op's field plus the loop base) equals
            ``row``, tested as field == row - base (modulo the row width): the subtraction is of
            registers, so only a compare follows the UOP read (not the sum, then the compare)."""
            field, base = (u.dst, s1_bases[0]) if what == "dst" else (u.src, s1_bases[1])
            return field[: len(row)] == (row - base)[: len(row)]

        ln.new_row_is = new_row_is
        with m.If(issue_ready):
            m.d.sync += [
                valid[ISSUE_STAGE].eq(valid[1]),
                op[ISSUE_STAGE].eq(op[1]),
                op[ISSUE_STAGE].dst.eq(u.dst + s1_bases[0]),
                ln.issue_src.eq(src_sum[:src_bits]),
            ]
            if not is_alu:
                m.d.sync += ln.issue_wgt.eq(u.wgt + s1_bases[2])

        # ---- past ISSUE: control moves one stage per cycle ------------------------------------------
        ahead = ISSUE_STAGE + 1
        m.d.sync += [valid[ahead].eq(ln.issue_go), op[ahead].eq(op[ISSUE_STAGE])]
        for s in range(ahead, WRITE_STAGE):
            m.d.sync += [valid[s + 1].eq(valid[s]), op[s + 1].eq(op[s])]

        ln.issue_ready, ln.s0_fire = issue_ready, s0_fire
        ln.free = ~gen & ~gen_prev  # the counters take the next instruction (as after EXEC)
        ln.busy = gen | any_of(valid[1:])

        def retiring_older(limit):
            """Micro-ops of this lane older than tag ``limit`` not yet retired."""
            return any_of(valid[s] & older(op[s].seq, limit) for s in range(1, WRITE_STAGE + 1))

        ln.retiring_older = retiring_older
        return ln

    def _waits_for_older(self, m, me, other):
        """High when ``other`` lane holds an un-issued micro-op (S1, S2) older than the ``limit``
        of ``me``'s micro-op at ISSUE: that one issues first (program order between the lanes).

        The tag compares are registered: each flag's next value is chosen among the compares of
        the values S1/S2 can hold next (held, or moved on), so only a mux follows the issue
        decisions and only the valid bits and an OR precede this cycle's."""
        # Next cycle, me's ISSUE holds S1's micro-op (it moves on) or its own; other's S1 holds
        # a new micro-op (S0 fires) or its own, other's S2 holds S1's (it moves on) or its own.
        limits = (me.op[1].limit, me.op[ISSUE_STAGE].limit)
        nexts = {
            1: (other.s0_fire, other.seq, other.op[1].seq),
            ISSUE_STAGE: (other.issue_ready, other.op[1].seq, other.op[ISSUE_STAGE].seq),
        }
        waits = 0
        for s, (moves, new, held) in nexts.items():
            flag = Signal(name=f"{me.name}_after_{other.name}_s{s}")
            pick = [Mux(moves, older(new, lim), older(held, lim)) for lim in limits]
            m.d.sync += flag.eq(Mux(me.issue_ready, pick[0], pick[1]))
            waits = waits | (other.valid[s] & flag)
        return waits

    def _src_row_register(self, m, lane, src, lanes, invalidate, in_flight):
        """Rule 8 of the overlap contract: the ALU keeps the last ACC src row it read (one entry).

        Returns (tag, tag_seq, tag_valid, hit): ``hit`` is high when the micro-op at ISSUE needs
        src row ``src`` and that row is the one the last src read of the same instruction fetched
        (the entry counts within one instruction, as the cycle model does), with no write to it
        since or in flight (stages past ISSUE, either lane), so it takes no ACC read (one cycle,
        not two). A write to the row, CTRL.CLEAR and a LOAD invalidate the entry; the caller sets
        it on a src read (and keeps ``lane.tag_match``, ``_tag_match_next``). ``in_flight``: a
        micro-op past ISSUE writes row ``src``.
        """
        cur = lane.op[ISSUE_STAGE]
        tag = Signal(self.acc.addr_bits, name="src_tag")
        tag_seq = Signal(SEQ_BITS, name="src_tag_seq")
        tag_valid = Signal(name="src_tag_valid")
        lane.tag_match = Signal(name="src_tag_match")  # tag == src and tag_seq == cur.seq
        hit_by_write = any_of(
            ln.valid[WRITE_STAGE] & (ln.op[WRITE_STAGE].dst == tag) for ln in lanes
        )
        with m.If(invalidate | hit_by_write):
            m.d.sync += tag_valid.eq(0)
        hit = needs_src(cur) & tag_valid & lane.tag_match & ~in_flight
        lane.src_tag, lane.src_tag_seq = tag, tag_seq
        return tag, tag_seq, tag_valid, hit

    def _tag_match_next(self, m, lane, src, set_tag):
        """``lane.tag_match`` a cycle ahead: the src-row register's tag (``src`` and its
        instruction tag when ``set_tag``) against the src row and tag of the micro-op at ISSUE
        next (S1's when ``issue_ready``), so the hit test starts at a flip-flop."""
        cur = lane.op[ISSUE_STAGE]
        tag, tag_seq = lane.src_tag, lane.src_tag_seq
        new_seq = lane.op[1].seq
        m.d.sync += lane.tag_match.eq(
            Mux(
                set_tag,
                lane.new_row_is("src", src) & (new_seq == cur.seq),
                Mux(
                    lane.issue_ready,
                    lane.new_row_is("src", tag) & (new_seq == tag_seq),
                    (src == tag) & (cur.seq == tag_seq),
                ),
            )
        )

    def _row_matches(self, m, me, what, cur_idx, lanes) -> dict:
        """Registered compares of row ``what`` (``cur_idx``) of ``me``'s micro-op at ISSUE with
        the ACC destination at every stage past ISSUE of ``lanes``: ``{(lane, stage): bit}``.

        Each bit is set a cycle ahead from what the stages hold next: the stages past ISSUE move
        on every cycle (stage s takes s - 1's micro-op, the first one ISSUE's), and ISSUE takes
        S1's micro-op (``me.new_row_is``) when ``issue_ready``. So the issue decision starts at
        flip-flops (the valid bits and these), not at 11-bit compares."""
        out = {}
        for ln in lanes:
            for s in range(ISSUE_STAGE + 1, WRITE_STAGE + 1):
                bit = Signal(name=f"{me.name}_{what}_is_{ln.name}_s{s}_dst")
                dst_next = ln.op[s - 1].dst
                now = cur_idx == dst_next
                m.d.sync += bit.eq(Mux(me.issue_ready, me.new_row_is(what, dst_next), now))
                out[ln.name, s] = bit
        return out
