"""Dependency-token queues and the per-unit instruction sequencer.

A token queue carries no data, so it is a saturating counter: ``push`` adds a token, ``pop`` takes one
(only when ``can_pop``); both in one cycle leave the count unchanged. Latency one cycle; ``can_push`` and
``can_pop`` are registered (set with the count), so they say the same as ``count != depth`` / ``!= 0``.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pyvta import isa

TOKEN_QUEUE_DEPTH = 512


class TokenQueue(wiring.Component):
    def __init__(self, depth: int = TOKEN_QUEUE_DEPTH):
        self.depth = depth
        super().__init__(
            {
                "push": In(1),
                "pop": In(1),
                "clear": In(1),
                "can_push": Out(1, init=1),
                "can_pop": Out(1),
                "count": Out(range(depth + 1)),
            }
        )

    def elaborate(self, platform):
        # can_push / can_pop are registers, set from the count the cycle brings (a token
        # unit's start logic begins at a flip-flop, not at a 10-bit comparison of the count).
        m = Module()
        up = self.push & self.can_push
        down = self.pop & self.can_pop
        with m.If(self.clear):
            m.d.sync += [self.count.eq(0), self.can_pop.eq(0), self.can_push.eq(1)]
        with m.Elif(up & ~down):
            m.d.sync += [
                self.count.eq(self.count + 1),
                self.can_pop.eq(1),
                self.can_push.eq(self.count != self.depth - 1),
            ]
        with m.Elif(down & ~up):
            m.d.sync += [
                self.count.eq(self.count - 1),
                self.can_pop.eq(self.count != 1),
                self.can_push.eq(1),
            ]
        return m


def token_port() -> wiring.Signature:
    """A unit's side of one token queue: ask to pop/push, and whether it may."""
    return wiring.Signature({"pop": Out(1), "push": Out(1), "can_pop": In(1), "can_push": In(1)})


def connect_tokens(m: Module, queue: TokenQueue, popper, pusher) -> None:
    """Wire ``queue`` between the unit that pushes (``pusher``) and the one that pops (``popper``)."""
    m.d.comb += [
        queue.push.eq(pusher.push),
        pusher.can_push.eq(queue.can_push),
        queue.pop.eq(popper.pop),
        popper.can_pop.eq(queue.can_pop),
    ]


def sequence(
    m: Module,
    cmd,
    insn,
    header,
    module: isa.Module,
    ports: dict,
    start,
    finished,
    may_start=1,
    back_to_back: bool = False,
):
    """The IDLE -> POP -> EXEC -> PUSH cycle every unit runs for each instruction.

    ``cmd``: command stream in; ``insn``: register that receives the word; ``header``: a view of it
    with the dependency flags; ``ports``: {isa.DepQueue: token port} of ``module``, whose flags map
    to queues as ``isa.DEP_QUEUES`` says (flags that must be 0 are ignored); ``start``: pulsed when
    the instruction may execute (its tokens are there and ``may_start`` is high;
    ``stalled`` counts only the wait for tokens);
    ``finished``: high when it has completed. Returns (idle, executing, stalled) signals.
    Latency: 3 cycles of overhead per instruction plus the wait for tokens; with ``back_to_back``,
    an instruction that pushes no token is followed by the next one's POP at once (1 cycle).
    """
    idle = Signal()
    executing = Signal()
    stalled = Signal()
    flags = [
        (flag, ports[queue])
        for flag, queue in zip(isa.DEP_FLAG_NAMES, isa.DEP_QUEUES[module], strict=True)
        if queue is not None
    ]
    pops = [(getattr(header, f), p) for f, p in flags if f.startswith("pop")]
    pushes = [(getattr(header, f), p) for f, p in flags if f.startswith("push")]
    # With back_to_back the next word is taken from the command stream while this one runs
    # (into ``pending``), so the stream's ready is a register and not the end of the
    # ``finished`` logic; the word reaches ``insn`` in the same cycle as if taken directly.
    pending = Signal.like(insn, name="seq_pending")
    has_pending = Signal(name="seq_has_pending")
    next_word = Mux(has_pending, pending, cmd.payload)
    if back_to_back:
        m.d.comb += cmd.ready.eq(~has_pending)
        with m.If(cmd.valid & ~has_pending):
            m.d.sync += [pending.eq(cmd.payload), has_pending.eq(1)]

    def latch_next(otherwise: str):
        """Take the next word into ``insn`` and go to POP; else go to ``otherwise``."""
        with m.If(has_pending | cmd.valid):
            m.d.sync += [insn.eq(next_word), has_pending.eq(0)]
            m.next = "POP"
        with m.Else():
            m.next = otherwise

    with m.FSM(name="seq"):
        with m.State("IDLE"):
            m.d.comb += idle.eq(~has_pending)
            if not back_to_back:
                m.d.comb += cmd.ready.eq(1)
            latch_next("IDLE")
        with m.State("POP"):
            ready = 1
            for flag, port in pops:
                ready = ready & (~flag | port.can_pop)
            m.d.comb += stalled.eq(~ready)
            with m.If(ready & may_start):
                for flag, port in pops:
                    m.d.comb += port.pop.eq(flag)
                m.d.comb += start.eq(1)
                m.next = "EXEC"
        with m.State("EXEC"):
            m.d.comb += executing.eq(1)
            with m.If(finished):
                m.next = "PUSH"
                if back_to_back:
                    no_push = 1
                    for flag, _ in pushes:
                        no_push = no_push & ~flag
                    with m.If(no_push):
                        latch_next("IDLE")
        with m.State("PUSH"):
            ready = 1
            for flag, port in pushes:
                ready = ready & (~flag | port.can_push)
            m.d.comb += stalled.eq(~ready)
            with m.If(ready):
                for flag, port in pushes:
                    m.d.comb += port.push.eq(flag)
                m.next = "IDLE"
    return idle, executing, stalled
