"""Amaranth-simulator unit tests of the small blocks, against ``isa`` and ``sim`` (no Verilog)."""

import numpy as np
import pytest

from pyvta import isa
from pyvta.hw import pure
from pyvta.hw.axi import AXI_BOUNDARY_BYTES, AXI_MAX_BURST_BEATS
from pyvta.sim.alu import apply as alu_reference

pytestmark = pytest.mark.hw
CFG = isa.DEFAULT_CONFIG
SMALL = isa.HwConfig(
    LOG_BLOCK=2,
    LOG_BATCH=1,
    LOG_UOP_BUFF_SIZE=12,
    LOG_INP_BUFF_SIZE=12,
    LOG_WGT_BUFF_SIZE=12,
    LOG_ACC_BUFF_SIZE=12,
)


def _random_insns(rng, n):
    out = []
    g, a, mem = isa.gemm_layout(CFG), isa.alu_layout(CFG), isa.mem_layout(CFG)

    def r(layout, name):
        f = layout.fields[name]
        return int(rng.integers(f.min_value, f.max_value + 1))

    flags = {k: bool(rng.integers(2)) for k in isa.DEP_FLAG_NAMES}

    def ordered(kw):  # a micro-op range is [uop_bgn, uop_end): encode refuses a reversed one
        kw["uop_bgn"], kw["uop_end"] = sorted((kw["uop_bgn"], kw["uop_end"]))
        return kw

    for _ in range(n):
        out.append(
            isa.GemmInsn(
                reset_reg=bool(rng.integers(2)),
                **ordered({k: r(g, k) for k in g.fields if k not in ("opcode", "reset_reg")})
                | flags,
            )
        )
        kw = {k: r(a, k) for k in a.fields if k not in ("opcode", "reset_reg", "alu_opcode")}
        kw["use_imm"] = bool(kw["use_imm"])
        kw = ordered(kw) | flags
        out.append(isa.AluInsn(alu_opcode=isa.AluOp(int(rng.integers(len(isa.AluOp)))), **kw))
        mt = list(isa.LOAD_MODULE)[int(rng.integers(len(isa.LOAD_MODULE)))]
        kw = {k: r(mem, k) for k in mem.fields if k not in ("opcode", "memory_type")} | flags
        out.append(isa.Load(mt, **kw))
    return out


@pytest.mark.parametrize("kind", ["mem", "gemm", "alu"])
def test_decoder_reproduces_encoded_fields(kind):
    """The RTL's instruction views read back exactly what ``isa`` encoded (contract test)."""
    rng = np.random.default_rng(1)
    insns = [
        i
        for i in _random_insns(rng, 8)
        if {"mem": isa.MemInsn, "gemm": isa.GemmInsn, "alu": isa.AluInsn}[kind] is type(i)
    ]
    words = [i.encode(CFG) for i in insns]
    layout = {"mem": isa.mem_layout, "gemm": isa.gemm_layout, "alu": isa.alu_layout}[kind](CFG)
    for word, fields in zip(words, pure.decode_fields(kind, CFG, words), strict=True):
        assert fields == layout.unpack(word)


def test_dispatch_matches_isa_modules():
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator

    from pyvta.hw.fields import dispatch_module

    rng = np.random.default_rng(2)
    insns = _random_insns(rng, 6) + [isa.Store(), isa.FinishInsn()]
    insns += [isa.Load(mt) for mt in isa.LOAD_MODULE]
    m = Module()
    word = Signal(128)
    probes = {mod: Signal(name=f"to_{mod.value}") for mod in isa.Module}
    for mod, cond in dispatch_module(word, CFG).items():
        m.d.comb += probes[mod].eq(cond)
    seen = []

    async def bench(ctx):
        for insn in insns:
            ctx.set(word, insn.encode(CFG))
            seen.append([mod for mod, p in probes.items() if ctx.get(p)])

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert seen == [[insn.module] for insn in insns]


@pytest.mark.parametrize(
    ("cfg", "dsp_products"), [(CFG, None), (CFG, 0), (SMALL, None)], ids=["mixed", "lut", "small"]
)
def test_gemm_core_matches_numpy(cfg, dsp_products):
    rng = np.random.default_rng(3)
    n = 6
    inp = rng.integers(-128, 128, (n, cfg.batch, cfg.block_in), dtype=np.int8)
    wgt = rng.integers(-128, 128, (n, cfg.block_out, cfg.block_in), dtype=np.int8)
    inp[0], wgt[0] = -128, -128  # the extreme product, every lane
    got = pure.gemm_core(cfg, inp, wgt, dsp_products)
    want = np.einsum("nbk,nok->nbo", inp.astype(np.int32), wgt.astype(np.int32))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", list(isa.AluOp), ids=lambda o: o.name)
def test_alu_matches_sim(op):
    rng = np.random.default_rng(4 + int(op))
    lanes = CFG.batch * CFG.block_out
    a = rng.integers(-(2**31), 2**31, (4, lanes), dtype=np.int64).astype(np.int32)
    b = rng.integers(-(2**31), 2**31, (4, lanes), dtype=np.int64).astype(np.int32)
    b[1] = rng.integers(-40, 40, lanes)
    b[2, :6] = [31, 32, -31, -32, 0, -(2**31)]
    got = pure.alu(CFG, op, a, b)
    np.testing.assert_array_equal(got, alu_reference(op, a, b))


def test_alu_clip_matches_sim():
    """CLIP near its bounds: values in and around a byte, bounds in order, equal and reversed."""
    rng = np.random.default_rng(5)
    lanes = CFG.batch * CFG.block_out
    a = rng.integers(-300, 300, (6, lanes)).astype(np.int32)
    a[0, :4] = [-(2**31), 2**31 - 1, -129, 128]
    bounds = [(-128, 127), (0, 127), (-5, 5), (7, 7), (20, -20), (-128, -128)]
    b = np.array([[isa.clip_imm(lo, hi)] * lanes for lo, hi in bounds], np.int32)
    b[1, 0] |= 0x7FFF0000  # the operand's high half is ignored
    got = pure.alu(CFG, isa.AluOp.CLIP, a, b)
    np.testing.assert_array_equal(got, alu_reference(isa.AluOp.CLIP, a, b))
    want = [np.minimum(np.maximum(row, lo), hi) for row, (lo, hi) in zip(a, bounds, strict=True)]
    np.testing.assert_array_equal(got, np.array(want))


def test_alu_op_may_change_every_cycle():
    """The pipelined ALU keeps each pair's op with it (micro-ops of different instructions
    follow each other in the compute pipeline)."""
    rng = np.random.default_rng(9)
    lanes = CFG.batch * CFG.block_out
    ops = [isa.AluOp(int(o)) for o in rng.integers(0, len(isa.AluOp), 12)]
    a = rng.integers(-(2**31), 2**31, (12, lanes), dtype=np.int64).astype(np.int32)
    b = rng.integers(-40, 40, (12, lanes)).astype(np.int32)
    want = np.array([alu_reference(op, a[i : i + 1], b[i : i + 1])[0] for i, op in enumerate(ops)])
    np.testing.assert_array_equal(pure.alu(CFG, ops, a, b), want)


def test_burst_splitter_respects_axi_limits():
    requests = [(0, 1, 3), (4096 - 8, 3, 3), (8, 700, 3), (4, 9, 2), (4096 * 3 - 256, 64, 4)]
    for (addr, beats, size), bursts in zip(requests, pure.burst_split(requests), strict=True):
        next_addr, total = addr, 0
        for b_addr, b_len, b_size in bursts:
            n = b_len + 1
            assert b_addr == next_addr and b_size == size and n <= AXI_MAX_BURST_BEATS
            assert b_addr // AXI_BOUNDARY_BYTES == (b_addr + (n << size) - 1) // AXI_BOUNDARY_BYTES
            next_addr += n << size
            total += n
        assert total == beats


def test_token_queue_counts_and_saturates():
    ops = [(1, 0)] * 5 + [(1, 1), (0, 1), (0, 1), (0, 1), (0, 1), (0, 1), (1, 1)]
    assert pure.token_queue(ops, depth=4) == [1, 2, 3, 4, 4, 3, 2, 1, 0, 0, 0, 1]


def test_synth_report_parsing():
    from pyvta.hw.synth import parse_stat

    stat = {
        "modules": {
            "\\vta": {
                "num_cells_by_type": {
                    "LUT6": 10,
                    "LUT3": 5,
                    "RAM32M": 2,
                    "FDRE": 7,
                    "FDSE": 1,
                    "RAMB36E1": 3,
                    "RAMB18E1": 3,
                    "DSP48E1": 4,
                }
            }
        }
    }
    r = parse_stat(stat)
    assert (r.lut, r.ff, r.bram36, r.dsp, r.lutram) == (17, 8, 4.5, 4, 2)
    assert r.fits() and "BRAM36" in r.table()
