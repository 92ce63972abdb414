"""Instruction fetch: reads ``insn_count`` 128-bit words from DRAM and dispatches them.

STORE goes to the store queue, LOAD of a type ``isa.LOAD_MODULE`` gives the load module to the load
queue, everything else to the compute queue. Reads are issued only for words the staging buffer
can take, so the shared in-order read channel never waits on a full command queue.
Every word passes ``hw.check.InsnCheck`` on its way into the staging buffer (adds its latency
once, not per word). A faulting word at the head is not dispatched: fetch latches its fault and
index (``fault``, ``fault_index``), issues no more reads and raises ``halted`` once the reads in
flight have landed; START clears both and empties the staging buffer.
Throughput: one instruction per 128/bus-width beats; dispatch one per cycle.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, ResetInserter, Signal, signed
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from pyvta import isa
from pyvta.hw.axi import ADDR_BITS, read_client_signature
from pyvta.hw.burst import BurstSplitter
from pyvta.hw.check import InsnCheck
from pyvta.hw.fields import INSN_WORD_BITS, dispatch_module
from pyvta.isa import regmap

STAGE_DEPTH = 16
LOG_BURST_INSNS = 3
BURST_INSNS = 1 << LOG_BURST_INSNS


class Fetch(wiring.Component):
    def __init__(self, cfg: isa.HwConfig):
        self.cfg = cfg
        super().__init__(
            {
                "start": In(1),
                "insn_addr": In(ADDR_BITS),
                "insn_count": In(32),
                "rd": Out(read_client_signature(cfg.bus_width_bits)),
                "load_q": Out(stream.Signature(INSN_WORD_BITS)),
                "compute_q": Out(stream.Signature(INSN_WORD_BITS)),
                "store_q": Out(stream.Signature(INSN_WORD_BITS)),
                "done": Out(1),
                "dispatched": Out(32),
                "fault": Out(regmap.FAULT_BITS),
                "fault_index": Out(regmap.ERROR_INDEX_BITS),
                "halted": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        insn_bytes = cfg.insn_bytes
        chunk_bytes = min(insn_bytes, cfg.bus_width_bytes)
        log_chunk = chunk_bytes.bit_length() - 1
        chunks = insn_bytes // chunk_bytes
        log_bus = cfg.bus_width_bytes.bit_length() - 1
        m.submodules.split = split = BurstSplitter()
        m.submodules.check = check = InsnCheck(cfg)
        staged = fifo.SyncFIFOBuffered(width=INSN_WORD_BITS + regmap.FAULT_BITS, depth=STAGE_DEPTH)
        m.submodules.stage = stage = ResetInserter(self.start)(staged)
        wiring.connect(m, split.burst, wiring.flipped(self.rd.ar))

        # The words still to read, as whole bursts and a tail: bursts of BURST_INSNS while any
        # remain, then the tail. A registered flag says a whole burst remains, so the burst
        # size is a mux, not a 32-bit compare feeding a 32-bit subtract.
        count = self.insn_count
        bursts = Signal(len(count) - LOG_BURST_INSNS)
        tail = Signal(LOG_BURST_INSNS)
        full = Signal()
        next_addr = Signal(ADDR_BITS)
        inflight = Signal(range(STAGE_DEPTH + 1))
        # The staging buffer's free places not promised to reads in flight (STAGE_DEPTH - level -
        # inflight), kept in a register: the room check is one short compare.
        space = Signal(range(STAGE_DEPTH + 1), init=STAGE_DEPTH)
        # The words of the next read, Mux(full, BURST_INSNS, tail), kept in a register too.
        n = Signal(range(BURST_INSNS + 1))
        room = n <= space
        m.d.comb += [
            split.cmd.valid.eq((n != 0) & room & (self.fault == 0)),
            split.cmd.payload.addr.eq(next_addr),
            split.cmd.payload.beats.eq(n * chunks),
            split.cmd.payload.size.eq(log_chunk),
        ]
        issued = split.cmd.valid & split.cmd.ready

        # Assemble words from beats.
        c = Signal(range(chunks))
        asm_addr = Signal(max(1, log_bus))
        word = Signal(INSN_WORD_BITS)
        beat = self.rd.r.payload.data
        chunk = Signal(chunk_bytes * 8)
        m.d.comb += [chunk.eq(beat >> (asm_addr * 8) if log_bus else beat), self.rd.r.ready.eq(1)]
        got = self.rd.r.valid
        complete = got & (c == chunks - 1)
        with m.If(got):
            m.d.sync += [asm_addr.eq(asm_addr + chunk_bytes), c.eq(Mux(c == chunks - 1, 0, c + 1))]
            for i in range(chunks - 1):
                with m.If(c == i):
                    m.d.sync += word[i * chunk_bytes * 8 : (i + 1) * chunk_bytes * 8].eq(chunk)
        m.d.comb += [
            check.valid.eq(complete),
            check.word.eq(Cat(word[: (chunks - 1) * chunk_bytes * 8], chunk)),
            stage.w_en.eq(check.valid_out),
            stage.w_data.eq(Cat(check.word_out, check.fault)),
        ]
        # Each count moves by a small step looked up from n and the cycle's events (one adder
        # after the events, not a mux, a subtract and an add in a row).
        arrived, taken = check.valid_out, stage.r_en
        d_inflight = _step(m, "d_inflight", Cat(n, issued, arrived), lambda k, i, a: i * k - a)
        d_space = _step(m, "d_space", Cat(n, issued, taken), lambda k, i, t: t - i * k)
        # STAGE_DEPTH - inflight, for START (the staging buffer empties): its own register.
        outside = Signal(range(STAGE_DEPTH + 1), init=STAGE_DEPTH)
        d_outside = _step(m, "d_outside", Cat(n, issued, arrived), lambda k, i, a: a - i * k)
        outside_next = outside + d_outside
        m.d.sync += [
            inflight.eq(inflight + d_inflight),
            outside.eq(outside_next),
            space.eq(space + d_space),
        ]
        with m.If(issued):
            m.d.sync += next_addr.eq(next_addr + n * insn_bytes)
            with m.If(full):
                m.d.sync += [
                    bursts.eq(bursts - 1),
                    full.eq(bursts != 1),
                    n.eq(Mux(bursts != 1, BURST_INSNS, tail)),
                ]
            with m.Else():
                m.d.sync += [tail.eq(0), n.eq(0)]

        # Dispatch the staged word at the head, unless it faults.
        head, head_fault = stage.r_data[:INSN_WORD_BITS], stage.r_data[INSN_WORD_BITS:]
        target = dispatch_module(head, cfg)
        queues = {
            isa.Module.LOAD: self.load_q,
            isa.Module.COMPUTE: self.compute_q,
            isa.Module.STORE: self.store_q,
        }
        good = stage.r_rdy & (head_fault == 0)
        for mod, q in queues.items():
            m.d.comb += [q.payload.eq(head), q.valid.eq(good & target[mod])]
            with m.If(q.valid & q.ready):
                m.d.comb += stage.r_en.eq(1)
        with m.If(stage.r_en):
            m.d.sync += self.dispatched.eq(self.dispatched + 1)
        with m.If(stage.r_rdy & (head_fault != 0) & (self.fault == 0)):
            m.d.sync += [self.fault.eq(head_fault), self.fault_index.eq(self.dispatched)]
        m.d.comb += self.halted.eq((self.fault != 0) & (inflight == 0))

        with m.If(self.start):
            m.d.sync += [
                bursts.eq(count[LOG_BURST_INSNS:]),
                tail.eq(count[:LOG_BURST_INSNS]),
                full.eq(count[LOG_BURST_INSNS:] != 0),
                n.eq(Mux(count[LOG_BURST_INSNS:] != 0, BURST_INSNS, count[:LOG_BURST_INSNS])),
                next_addr.eq(self.insn_addr),
                self.dispatched.eq(0),
                c.eq(0),
                asm_addr.eq(self.insn_addr),
                self.fault.eq(0),
                self.fault_index.eq(0),
                space.eq(outside_next),  # the staging buffer empties
            ]
        m.d.comb += self.done.eq((n == 0) & (inflight == 0) & ~stage.r_rdy)
        return m


def _step(m: Module, name: str, inputs, fn) -> Signal:
    """``fn(n, *flags)`` for every value of ``inputs`` = Cat(n, flag, flag), as a lookup table
    (LUTs, no carry chain): a signed count step."""
    n_bits = len(inputs) - 2
    steps = {
        v: fn(v & ((1 << n_bits) - 1), (v >> n_bits) & 1, v >> (n_bits + 1))
        for v in range(1 << len(inputs))
    }
    out = Signal(signed(max(abs(x) for x in steps.values()).bit_length() + 1), name=name)
    with m.Switch(inputs):
        for v, step in steps.items():
            with m.Case(v):
                m.d.comb += out.eq(step)
    return out
