"""Pure-function wrappers of the small blocks (inputs -> outputs), run on Amaranth's simulator.

For unit tests against ``sim``/``isa``: each call elaborates the block and evaluates it on a batch
of inputs. Slow (Python simulation), meant for a few dozen vectors.
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Module, Signal, Value
from amaranth.sim import Simulator

from pyvta import isa
from pyvta.hw.burst import BurstSplitter
from pyvta.hw.check import CHECK_LATENCY_CYCLES, InsnCheck
from pyvta.hw.core import ALU_LATENCY_CYCLES, GEMM_LATENCY_CYCLES, Alu, GemmCore
from pyvta.hw.fields import INSN_WORD_BITS, insn_view
from pyvta.hw.queues import TokenQueue


def _pack(values: np.ndarray, lane_bits: int) -> int:
    word = 0
    for i, v in enumerate(np.asarray(values).reshape(-1).tolist()):
        word |= (int(v) & ((1 << lane_bits) - 1)) << (i * lane_bits)
    return word


def _unpack(word: int, lanes: int, lane_bits: int) -> np.ndarray:
    out = []
    for i in range(lanes):
        v = (word >> (i * lane_bits)) & ((1 << lane_bits) - 1)
        out.append(v - (1 << lane_bits) if v >> (lane_bits - 1) else v)
    return np.array(out, dtype=np.int64)


def _evaluate(dut, cases, apply):
    results = []

    async def bench(ctx):
        for case in cases:
            results.append(apply(ctx, case))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return results


def _stream(dut, cases, latency_cycles: int, apply, result):
    """Feed one case per clock cycle (``apply``) and read each result (``result``)
    ``latency_cycles`` later: checks a pipelined block at full throughput."""
    results = []

    async def bench(ctx):
        for n in range(len(cases) + latency_cycles):
            if n < len(cases):
                apply(ctx, cases[n])
            if n >= latency_cycles:
                results.append(result(ctx))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return results


def gemm_core(cfg: isa.HwConfig, inp: np.ndarray, wgt: np.ndarray, dsp_products=None):
    """inp (n, batch, block_in) int8, wgt (n, block_out, block_in) int8 -> (n, batch, block_out)
    int32 dot products, as the RTL GEMM core computes them (one pair per cycle, pipelined)."""
    dut = GemmCore(cfg, dsp_products)
    lanes = cfg.batch * cfg.block_out

    def apply(ctx, case):
        x, w = case
        ctx.set(dut.inp, _pack(x, cfg.inp_width_bits))
        ctx.set(dut.wgt, _pack(w, cfg.wgt_width_bits))

    def result(ctx):
        return _unpack(ctx.get(dut.dot), lanes, cfg.acc_width_bits)

    out = _stream(dut, list(zip(inp, wgt, strict=True)), GEMM_LATENCY_CYCLES, apply, result)
    return np.array(out).reshape(len(out), cfg.batch, cfg.block_out).astype(np.int32)


def alu(cfg: isa.HwConfig, op, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a, b (n, batch * block_out) int32 -> op(a, b) lane by lane, as the RTL ALU computes it
    (one pair per cycle, pipelined); ``op``: one ``isa.AluOp``, or one per row."""
    ops = list(op) if isinstance(op, list | tuple) else [op] * len(a)
    dut = Alu(cfg)
    lanes = cfg.batch * cfg.block_out
    w = cfg.acc_width_bits

    def apply(ctx, case):
        ctx.set(dut.op, int(case[2]))
        ctx.set(dut.a, _pack(case[0], w))
        ctx.set(dut.b, _pack(case[1], w))

    def result(ctx):
        return _unpack(ctx.get(dut.result), lanes, w)

    cases = list(zip(a, b, ops, strict=True))
    return np.array(_stream(dut, cases, ALU_LATENCY_CYCLES, apply, result)).astype(np.int32)


def decode_fields(kind: str, cfg: isa.HwConfig, words: list[int]) -> list[dict[str, int]]:
    """The fields the RTL decoder (``hw.fields.insn_view``) reads from each 128-bit word."""
    m = Module()
    word = Signal(INSN_WORD_BITS)
    view = insn_view(kind, cfg, word)
    probes = {}
    for name, _ in view.shape():
        probes[name] = Signal.like(Value.cast(getattr(view, name)), name=f"f_{name}")
        m.d.comb += probes[name].eq(getattr(view, name))

    def apply(ctx, w):
        ctx.set(word, w)
        out = {}
        for name, sig in probes.items():
            out[name] = int(ctx.get(sig))
        return out

    return _evaluate(m, words, apply)


def burst_split(requests: list[tuple[int, int, int]]) -> list[list[tuple[int, int, int]]]:
    """(byte address, beats, log2 beat bytes) requests -> the (addr, len, size) bursts issued."""
    dut = BurstSplitter()
    bursts: list[list[tuple[int, int, int]]] = []

    async def bench(ctx):
        for addr, beats, size in requests:
            got = []
            ctx.set(dut.cmd.valid, 1)
            ctx.set(dut.cmd.payload, {"addr": addr, "beats": beats, "size": size})
            ctx.set(dut.burst.ready, 1)
            await ctx.tick()
            ctx.set(dut.cmd.valid, 0)
            for _ in range(3 * beats + 3):
                if ctx.get(dut.burst.valid):
                    p = ctx.get(dut.burst.payload)
                    got.append((int(p.addr), int(p.len), int(p.size)))
                await ctx.tick()
            bursts.append(got)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return bursts


def token_queue(ops: list[tuple[int, int]], depth: int = 4) -> list[int]:
    """(push, pop) per cycle -> the token count after each cycle."""
    dut = TokenQueue(depth)
    counts = []

    async def bench(ctx):
        for push, pop in ops:
            ctx.set(dut.push, push)
            ctx.set(dut.pop, pop)
            await ctx.tick()
            counts.append(int(ctx.get(dut.count)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return counts


def insn_faults(cfg: isa.HwConfig, words: list[int]) -> list[int]:
    """128-bit instruction words, one per cycle -> the ``regmap.Fault`` the RTL checker
    (``hw.check.InsnCheck``) gives each, read ``CHECK_LATENCY_CYCLES`` later with its word."""
    dut = InsnCheck(cfg)
    faults: list[int] = []

    async def bench(ctx):
        for cycle in range(len(words) + CHECK_LATENCY_CYCLES):
            feeding = cycle < len(words)
            ctx.set(dut.valid, feeding)
            ctx.set(dut.word, words[cycle] if feeding else 0)
            if ctx.get(dut.valid_out):
                assert ctx.get(dut.word_out) == words[len(faults)], "word out of step"
                faults.append(int(ctx.get(dut.fault)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return faults
