"""AXI burst generation and read arbitration.

``BurstSplitter`` turns a (byte address, beat count, beat size) request into AXI INCR bursts of at most
256 beats that never cross a 4 KiB boundary; one burst per three cycles. ``ReadArbiter`` shares the AXI read
channels between read clients: round-robin on AR, and R beats routed back in request order (one AXI ID,
so the slave returns bursts in order). It allows up to ``max_outstanding`` bursts in flight.
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from pyvta.hw.axi import (
    ADDR_BITS,
    AXI_BOUNDARY_BYTES,
    AXI_MAX_BURST_BEATS,
    burst_layout,
    read_client_signature,
)

BEATS_BITS = 26


def request_layout() -> data.StructLayout:
    """A transfer request: byte address (aligned to the beat size), beats, log2 bytes per beat."""
    return data.StructLayout(
        {"addr": unsigned(ADDR_BITS), "beats": unsigned(BEATS_BITS), "size": unsigned(3)}
    )


class BurstSplitter(wiring.Component):
    """Request in, AXI bursts out; ``idle`` when nothing is pending.

    Each burst takes three cycles, every one ending in registers (short paths): the distance to
    the 4 KiB boundary and the capped remainder, then the burst's beats and bytes, then the burst
    (the address and the remainder advance when it is taken). Three cycles per burst do not limit
    the data rate for bursts of three beats or more; the requests run ahead of the data.
    """

    cmd: In(stream.Signature(request_layout()))
    burst: Out(stream.Signature(burst_layout()))
    idle: Out(1)

    def elaborate(self, platform):
        m = Module()
        addr = Signal(ADDR_BITS)
        remaining = Signal(BEATS_BITS)
        size = Signal(3)
        busy = Signal()

        boundary_bits = (AXI_BOUNDARY_BYTES - 1).bit_length()
        beats_range = range(AXI_MAX_BURST_BEATS + 1)
        to_boundary = Signal(boundary_bits + 1)
        capped = Signal(beats_range)
        beats = Signal(beats_range)
        burst_bytes = Signal(boundary_bits + 1)
        step = Signal(2)  # 0: measure, 1: choose beats, 2: burst offered
        m.d.comb += [
            self.cmd.ready.eq(~busy),
            self.idle.eq(~busy),
            self.burst.valid.eq(busy & (step == 2)),
            self.burst.payload.addr.eq(addr),
            self.burst.payload.len.eq(beats - 1),
            self.burst.payload.size.eq(size),
        ]
        with m.If(busy & (step == 0)):
            m.d.sync += [
                to_boundary.eq((AXI_BOUNDARY_BYTES - addr[:boundary_bits]) >> size),
                capped.eq(Mux(remaining < AXI_MAX_BURST_BEATS, remaining, AXI_MAX_BURST_BEATS)),
                step.eq(1),
            ]
        with m.If(busy & (step == 1)):
            chosen = Mux(capped < to_boundary, capped, to_boundary)
            m.d.sync += [beats.eq(chosen), burst_bytes.eq(chosen << size), step.eq(2)]
        with m.If(self.cmd.valid & ~busy):
            m.d.sync += [
                addr.eq(self.cmd.payload.addr),
                remaining.eq(self.cmd.payload.beats),
                size.eq(self.cmd.payload.size),
                busy.eq(self.cmd.payload.beats != 0),
                step.eq(0),
            ]
        with m.If(self.burst.valid & self.burst.ready):
            m.d.sync += [
                addr.eq(addr + burst_bytes),
                remaining.eq(remaining - beats),
                busy.eq(remaining != beats),
                step.eq(0),
            ]
        return m


class ReadArbiter(wiring.Component):
    """``n_clients`` read clients onto one read channel pair (``down``), round-robin per burst."""

    def __init__(self, n_clients: int, data_bits: int, max_outstanding: int = 8):
        self.n_clients = n_clients
        self.max_outstanding = max_outstanding
        members = {f"c{i}": In(read_client_signature(data_bits)) for i in range(n_clients)}
        members["down"] = Out(read_client_signature(data_bits))
        members["outstanding"] = Out(range(max_outstanding + 2))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        n = self.n_clients
        clients = [getattr(self, f"c{i}") for i in range(n)]
        down = self.down
        m.submodules.route = route = fifo.SyncFIFOBuffered(
            width=max(1, (n - 1).bit_length()), depth=self.max_outstanding
        )
        m.d.comb += self.outstanding.eq(route.level)

        # AR: round-robin, starting after the last client granted.
        last = Signal(range(n), init=n - 1)
        grant = Signal(range(n))
        any_valid = Signal()
        for rot in range(n):
            with m.If(last == rot):
                order = [(rot + 1 + i) % n for i in range(n)]
                for idx in reversed(order):
                    with m.If(clients[idx].ar.valid):
                        m.d.comb += grant.eq(idx)
        m.d.comb += any_valid.eq(_or(c.ar.valid for c in clients))
        # AXI: a request stays the same until accepted, so a waiting grant is held.
        held = Signal(range(n))
        holding = Signal()
        granted = Signal(range(n))
        m.d.comb += granted.eq(Mux(holding, held, grant))
        m.d.sync += [holding.eq(down.ar.valid & ~down.ar.ready), held.eq(granted)]
        can_issue = any_valid & route.w_rdy
        m.d.comb += down.ar.valid.eq(can_issue)
        with m.Switch(granted):
            for i, c in enumerate(clients):
                with m.Case(i):
                    m.d.comb += [
                        down.ar.payload.eq(c.ar.payload),
                        c.ar.ready.eq(down.ar.ready & route.w_rdy),
                    ]
        with m.If(down.ar.valid & down.ar.ready):
            m.d.comb += [route.w_en.eq(1), route.w_data.eq(granted)]
            m.d.sync += last.eq(granted)

        # R: beats go to the client at the head of the route FIFO.
        for i, c in enumerate(clients):
            sel = route.r_rdy & (route.r_data == i)
            m.d.comb += [
                c.r.payload.eq(down.r.payload),
                c.r.valid.eq(down.r.valid & sel),
            ]
            with m.If(sel):
                m.d.comb += down.r.ready.eq(c.r.ready)
        with m.If(down.r.valid & down.r.ready & down.r.payload.last):
            m.d.comb += route.r_en.eq(1)
        return m


def _or(terms):
    out = 0
    for t in terms:
        out = out | t
    return out
