import numpy as np
import pytest

from pyvta import sim
from pyvta.isa import AluOp, HwConfig, clip_imm
from pyvta.sim.alu import apply
from pyvta.sim.programs import (
    acc_load_program,
    alu_chain_program,
    matmul_program,
    padded_load_program,
)
from pyvta.sim.random_program import random_program
from pyvta.testing.naive import alu_op, execute

SEED = 20261130


def run(engine: str, program: sim.Program) -> sim.SimResult:
    return sim.run(program, engine=engine)


@pytest.fixture
def rng():
    print(f"seed {SEED}")
    return np.random.default_rng(SEED)


def test_matmul_256_cubed_exact(rng, engine):
    a = rng.integers(-128, 128, (256, 256), dtype=np.int8)
    b = rng.integers(-128, 128, (256, 256), dtype=np.int8)
    ex = matmul_program(a, b)
    result = run(engine, ex.program)
    got = ex.readback(result.dram)
    assert np.array_equal(got, a.astype(np.int32) @ b.astype(np.int32))
    assert result.counters.macs == 256**3
    assert result.leftover_tokens == {}


def test_matmul_with_2d_padding_on_the_input(rng, engine):
    # A is 250 x 224: the load pads one zero block before and after each row (x) and the last
    # tile's missing rows (y). B has 256 rows; the padded zeros must cancel its extra rows.
    a = rng.integers(-128, 128, (250, 224), dtype=np.int8)
    b = rng.integers(-128, 128, (256, 256), dtype=np.int8)
    ex = matmul_program(a, b, x_pad_blocks=(1, 1), tile_rows=64)
    result = run(engine, ex.program)
    assert np.array_equal(ex.readback(result.dram), ex.expected)
    assert np.array_equal(ex.expected, a.astype(np.int32) @ b[16:240].astype(np.int32))
    assert result.counters.pad_elems["INP"] > 0


def test_matmul_extreme_values_wrap_free(engine):
    a = np.full((64, 512), -128, np.int8)
    b = np.full((512, 16), -128, np.int8)
    ex = matmul_program(a, b)
    got = ex.readback(run(engine, ex.program).dram)
    assert (got == 512 * 128 * 128).all()


@pytest.mark.parametrize("pads", [(0, 0, 0, 0), (1, 2, 3, 1), (15, 0, 0, 15), (0, 3, 2, 0)])
def test_padded_inp_load(rng, pads, engine):
    data = rng.integers(-128, 128, (3, 5, 16), dtype=np.int8)
    ex = padded_load_program(data, pads)
    assert np.array_equal(ex.readback(run(engine, ex.program).dram), ex.expected)


@pytest.mark.parametrize("eight_bit", [False, True])
def test_padded_acc_loads(rng, eight_bit, engine):
    if eight_bit:
        data = rng.integers(-128, 128, (4, 3, 16), dtype=np.int8)
    else:
        data = rng.integers(-(2**31), 2**31, (4, 3, 16), dtype=np.int64).astype(np.int32)
    ex = acc_load_program(data, (2, 1, 1, 3), eight_bit=eight_bit)
    assert np.array_equal(ex.readback(run(engine, ex.program).dram), ex.expected)


def test_alu_chain_matches_scalar_reference(rng, engine):
    a = rng.integers(-(2**20), 2**20, (40, 16)).astype(np.int32)
    b = rng.integers(-(2**20), 2**20, (40, 16)).astype(np.int32)
    ex = alu_chain_program(a, b)
    got = ex.readback(run(engine, ex.program).dram)
    expected = a.astype(np.int64).copy()
    from pyvta.sim.programs import ALU_CHAIN

    for op, use_imm, imm in ALU_CHAIN:
        expected = np.vectorize(lambda x, y, op=op: alu_op(op, int(x), int(y)))(
            expected, imm if use_imm else b
        )
    assert np.array_equal(got, expected.astype(np.int8))


@pytest.mark.parametrize(
    "op, a, b, expected",
    [
        (AluOp.ADD, 2**31 - 1, 1, -(2**31)),
        (AluOp.MUL, 2**16, 2**16, 0),
        (AluOp.MUL, -3, 7, -21),
        (AluOp.SHR, -17, 2, -5),
        (AluOp.SHR, -1, 40, -1),
        (AluOp.SHR, 2**30, 31, 0),
        (AluOp.SHR, 3, -2, 12),
        (AluOp.SHR, 1, -31, -(2**31)),
        (AluOp.SHR, 1, -100, -(2**31)),
        (AluOp.MIN, -5, 3, -5),
        (AluOp.MAX, -5, 3, 3),
        (AluOp.CLIP, 300, clip_imm(-128, 127), 127),
        (AluOp.CLIP, -(2**31), clip_imm(-128, 127), -128),
        (AluOp.CLIP, -300, clip_imm(0, 127), 0),
        (AluOp.CLIP, -3, clip_imm(-5, 5), -3),
        (AluOp.CLIP, 0, clip_imm(9, -9), -9),  # lo > hi: hi, as MAX then MIN
        (AluOp.CLIP, 42, 0x7FFF0000 | clip_imm(0, 10), 10),  # bits 31..16 ignored
        (AluOp.CLIP, 42, -1, -1),  # a register operand of -1: lo = hi = -1
    ],
)
def test_alu_semantics(op, a, b, expected):
    got = apply(op, np.array([a], np.int32), np.array([b], np.int32))
    assert int(got[0]) == expected == alu_op(op, a, b)


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_match_naive_reference(seed, engine):
    print(f"seed {seed}")
    program = random_program(np.random.default_rng(seed), n_insns=(4, 25))
    fast = run(engine, program).dram
    slow = execute(program.insns(), program.dram, program.config)
    assert np.array_equal(fast, slow)


def test_alu_reading_rows_written_earlier_in_the_same_instruction(engine):
    # Accumulate a running sum: row d = row d + row d-1, iterations in order (a prefix sum).
    from pyvta.isa import AluInsn, FinishInsn, Load, MemType, Store, Uop
    from pyvta.sim.builder import ProgramBuilder

    cfg = HwConfig()
    pb = ProgramBuilder(cfg)
    rows = np.arange(1, 9, dtype=np.int32)[:, None].repeat(16, axis=1)
    a_addr = pb.put(rows, "acc")
    o_addr = pb.alloc(8, "out")
    pb.load_uops([Uop(dst=1, src=0)], 0)
    pb.emit(Load(MemType.ACC, dram_base=a_addr, y_size=1, x_size=8, x_stride=8))
    pb.emit(
        AluInsn(
            alu_opcode=AluOp.ADD,
            uop_bgn=0,
            uop_end=1,
            iter_out=7,
            iter_in=1,
            dst_factor_out=1,
            src_factor_out=1,
            push_next_dep=True,
        )
    )
    pb.emit(
        Store(
            dram_base=o_addr, y_size=1, x_size=8, x_stride=8, pop_prev_dep=True, push_prev_dep=True
        )
    )
    pb.emit(FinishInsn(pop_next_dep=True))
    result = run(engine, pb.build())
    got = pb.read(result.dram, o_addr, "out", 8).view(np.int8).reshape(8, 16)[:, 0]
    # Row 0 was only loaded, never written by the ALU, so its OUT row stays 0.
    assert list(got) == [0] + list(np.cumsum(np.arange(1, 9))[1:])


def test_counters(rng, engine):
    a = rng.integers(-128, 128, (64, 32), dtype=np.int8)
    b = rng.integers(-128, 128, (32, 16), dtype=np.int8)
    ex = matmul_program(a, b)
    c = run(engine, ex.program).counters
    assert c.dram_read_bytes["INP"] == 64 * 32
    assert c.dram_read_bytes["WGT"] == 32 * 16
    assert c.dram_write_bytes["OUT"] == 4 * 64 * 16
    assert c.macs == 64 * 32 * 16
    assert c.alu_lane_ops == 3 * 64 * 16
    assert c.insns_by_opcode["FINISH"] == 1
    assert sum(c.insns_by_module.values()) == ex.program.insn_count


def test_bundle_round_trip(tmp_path, rng, engine):
    program = random_program(rng)
    path = tmp_path / "p.npz"
    program.save(path)
    loaded = sim.Program.load(path)
    assert np.array_equal(loaded.dram, program.dram)
    assert (loaded.insn_addr, loaded.insn_count, loaded.config) == (
        program.insn_addr,
        program.insn_count,
        program.config,
    )
    assert np.array_equal(run(engine, loaded).dram, run(engine, program).dram)


def test_bundle_without_config_uses_default(tmp_path):
    path = tmp_path / "p.npz"
    np.savez(path, dram=np.zeros(64, np.uint8), insn_addr=0, insn_count=0)
    assert sim.Program.load(path).config == HwConfig()


def test_bad_bundles(tmp_path):
    (tmp_path / "x.npz").write_bytes(b"not a zip")
    with pytest.raises(sim.ProgramError, match="not a readable program bundle"):
        sim.Program.load(tmp_path / "x.npz")
    np.savez(tmp_path / "y.npz", dram=np.zeros(4, np.uint8))
    with pytest.raises(sim.ProgramError, match=r"lacks keys \['insn_addr', 'insn_count'\]"):
        sim.Program.load(tmp_path / "y.npz")
    with pytest.raises(sim.ProgramError, match="run past the end of DRAM"):
        sim.Program(np.zeros(32, np.uint8), 16, 2)
    with pytest.raises(sim.ProgramError, match="must be a non-negative multiple of 16"):
        sim.Program(np.zeros(64, np.uint8), 8, 1)


def test_dram_allocator():
    d = sim.Dram(1024)
    a = d.alloc(10)
    b = d.alloc(10, align_bytes=256)
    assert a == 64 and b == 256
    with pytest.raises(sim.OutOfBoundsError, match="DRAM full: cannot allocate 2000 bytes"):
        d.alloc(2000)
    with pytest.raises(ValueError, match="alignment must be a power of two"):
        d.alloc(1, 3)
