"""The fetch unit (``hw.fetch``) on Amaranth's simulator against a modelled AXI read slave: every
word reaches its queue in order, the reads cover the stream once in bursts of at most
``BURST_INSNS`` words, and ``done`` rises (instruction counts around the burst size)."""

import pytest
from amaranth.sim import Simulator

from pyvta import isa
from pyvta.hw.fetch import BURST_INSNS, Fetch

pytestmark = pytest.mark.hw
CFG = isa.HwConfig(LOG_BUS_WIDTH=6)  # 64-bit bus: two beats per instruction word
BASE_ADDR = 0x1000 - 3 * CFG.insn_bytes  # a stream that crosses a 4 KiB boundary
QUEUES = {
    isa.Module.LOAD: "load_q",
    isa.Module.COMPUTE: "compute_q",
    isa.Module.STORE: "store_q",
}


def _program(count: int) -> list[isa.Insn]:
    """Distinct words for all three queues."""
    kinds = [
        lambda i: isa.GemmInsn(uop_bgn=i % 100, uop_end=i % 100 + 1),
        lambda i: isa.Store(sram_base=i),
        lambda i: isa.Load(isa.MemType.INP, sram_base=i),
    ]
    return [kinds[i % len(kinds)](i) for i in range(count)]


def _run_fetch(words: list[int], ready_every: int = 1, max_cycles: int = 2000):
    """Fetch ``words`` from BASE_ADDR, the queues ready one cycle in ``ready_every`` -> (words per
    queue, AR bursts as (addr, beats))."""
    dut = Fetch(CFG)
    beat_bytes = CFG.bus_width_bytes
    memory = {}
    for i, w in enumerate(words):
        for b in range(CFG.insn_bytes // beat_bytes):
            memory[BASE_ADDR + i * CFG.insn_bytes + b * beat_bytes] = w >> (b * beat_bytes * 8)
    got = {mod: [] for mod in QUEUES}
    bursts = []
    done_at = []

    async def bench(ctx):
        ctx.set(dut.rd.ar.ready, 1)
        ctx.set(dut.insn_addr, BASE_ADDR)
        ctx.set(dut.insn_count, len(words))
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        beats = []  # addresses of the beats still to return, in request order
        for cycle in range(max_cycles):
            if ctx.get(dut.rd.ar.valid):
                p = ctx.get(dut.rd.ar.payload)
                n = int(p.len) + 1
                bursts.append((int(p.addr), n))
                beats += [int(p.addr) + k * beat_bytes for k in range(n)]
            if beats:
                ctx.set(dut.rd.r.valid, 1)
                ctx.set(dut.rd.r.payload.data, memory[beats[0]] & ((1 << (8 * beat_bytes)) - 1))
            else:
                ctx.set(dut.rd.r.valid, 0)
            for mod, name in QUEUES.items():
                q = getattr(dut, name)
                ctx.set(q.ready, cycle % ready_every == 0)
                if ctx.get(q.valid) and ctx.get(q.ready):
                    got[mod].append(int(ctx.get(q.payload)))
            # (``done`` may rise for a cycle while a word moves into the staging buffer's
            # output register: wait for the count too.)
            if ctx.get(dut.done) and ctx.get(dut.dispatched) == len(words) and not beats:
                done_at.append(cycle)
                break
            await ctx.tick()
            if beats:
                beats.pop(0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert done_at, f"fetch of {len(words)} words not done in {max_cycles} cycles"
    return got, bursts


@pytest.mark.parametrize(
    "count", [0, 1, BURST_INSNS - 1, BURST_INSNS, BURST_INSNS + 1, 3 * BURST_INSNS + 5]
)
def test_fetch_dispatches_every_word_once_in_order(count):
    program = _program(count)
    words = [insn.encode(CFG) for insn in program]
    got, bursts = _run_fetch(words)
    for mod in QUEUES:
        assert got[mod] == [w for w, insn in zip(words, program, strict=True) if insn.module is mod]
    beats_per_insn = CFG.insn_bytes // CFG.bus_width_bytes
    addr = BASE_ADDR
    for b_addr, beats in bursts:  # contiguous, each within one request of at most BURST_INSNS
        assert b_addr == addr and beats <= BURST_INSNS * beats_per_insn
        addr += beats * CFG.bus_width_bytes
    assert addr == BASE_ADDR + count * CFG.insn_bytes


def test_fetch_waits_for_room_in_the_staging_buffer():
    """Slow queues: the staging buffer fills, reads wait for room, and nothing is lost."""
    count = 5 * BURST_INSNS + 3
    program = _program(count)
    words = [insn.encode(CFG) for insn in program]
    got, _ = _run_fetch(words, ready_every=5)
    for mod in QUEUES:
        assert got[mod] == [w for w, insn in zip(words, program, strict=True) if insn.module is mod]
