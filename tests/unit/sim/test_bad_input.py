"""Public simulator entry points check their inputs: DRAM images are 1-D uint8 (never cast),
``matmul_program`` takes int8 only, ``--check-races`` reports an out-of-range SRAM base as the
plain simulator does, ``run_cycles`` refuses a program that passes a buffer's end."""

import numpy as np
import pytest

from pyvta import sim
from pyvta.isa import FinishInsn, GemmInsn, HwConfig, MemInsn, MemType, encode_insns
from pyvta.sim.errors import ArgumentError, OutOfBoundsError, ProgramError
from pyvta.sim.programs import matmul_program

CFG = HwConfig()


def _program(insns, dram_bytes=1 << 16):
    raw = encode_insns(insns, CFG)
    dram = np.zeros(dram_bytes, np.uint8)
    dram[: len(raw)] = np.frombuffer(raw, np.uint8)
    return sim.Program(dram, 0, len(insns))


@pytest.mark.parametrize(
    "dram",
    [
        np.zeros(64, np.float64),
        np.zeros(64, np.int32),
        np.zeros((4, 16), np.uint8),
        [0] * 64,
    ],
    ids=["float64", "int32", "2-D", "list"],
)
def test_dram_image_must_be_1d_uint8(dram):
    with pytest.raises(ProgramError, match="1-D uint8"):
        sim.Program(dram, 0, 1)


def test_dram_image_from_bytes_and_integer_fields():
    p = sim.Program(bytes(64), 16, 1)
    assert p.dram.dtype == np.uint8 and p.dram.size == 64
    with pytest.raises(ProgramError, match="insn_count must be an integer"):
        sim.Program(np.zeros(64, np.uint8), 0, 1.5)
    with pytest.raises(ProgramError, match="config"):
        sim.Program(np.zeros(64, np.uint8), 0, 1, config={"batch": 1})


def test_bundle_with_mistyped_fields_is_a_clean_error(tmp_path):
    path = tmp_path / "b.npz"
    np.savez(path, dram=np.zeros(64, np.float32), insn_addr=0, insn_count=1)
    with pytest.raises(ProgramError, match=r"b\.npz: .*1-D uint8"):
        sim.Program.load(path)
    np.savez(path, dram=np.zeros(64, np.uint8), insn_addr=np.array([0, 1]), insn_count=1)
    with pytest.raises(ProgramError, match="insn_addr must be an integer scalar"):
        sim.Program.load(path)
    path.write_bytes(b"")
    with pytest.raises(ProgramError, match="not a readable program bundle"):
        sim.Program.load(path)


@pytest.mark.parametrize("dtype", [np.int32, np.float64, np.uint8])
def test_matmul_program_takes_int8_only(dtype):
    a = np.ones((16, 16), dtype)
    b = np.ones((16, 16), np.int8)
    with pytest.raises(ArgumentError, match="a must be a 2-D int8 array"):
        matmul_program(a, b)
    with pytest.raises(ArgumentError, match="b must be a 2-D int8 array"):
        matmul_program(b, a)
    assert isinstance(matmul_program(b, b).program, sim.Program)


OOB = {
    "INP base": MemInsn(
        is_store=False,
        memory_type=MemType.INP,
        sram_base=CFG.inp_depth + 5,
        dram_base=256,
        y_size=1,
        x_size=1,
        x_stride=1,
    ),
    "ACC rows": MemInsn(
        is_store=False,
        memory_type=MemType.ACC,
        sram_base=CFG.acc_depth - 1,
        dram_base=256,
        y_size=1,
        x_size=4,
        x_stride=4,
    ),
    "STORE base": MemInsn(
        is_store=True,
        memory_type=MemType.OUT,
        sram_base=CFG.out_depth + 100,
        dram_base=256,
        y_size=1,
        x_size=1,
        x_stride=1,
    ),
    "DRAM": MemInsn(
        is_store=False,
        memory_type=MemType.INP,
        sram_base=0,
        dram_base=1 << 20,
        y_size=1,
        x_size=1,
        x_stride=1,
    ),
    "UOP range": GemmInsn(
        uop_bgn=CFG.uop_depth - 1, uop_end=CFG.uop_depth + 1, iter_out=1, iter_in=1
    ),
}


@pytest.mark.parametrize("kind", sorted(OOB))
def test_out_of_bounds_is_the_same_clean_error_with_or_without_race_checks(kind):
    program = _program([OOB[kind], FinishInsn()])
    with pytest.raises(OutOfBoundsError, match="instruction 0") as plain:
        sim.run(program)
    with pytest.raises(OutOfBoundsError) as raced:
        sim.run(program, check_races=True)
    assert str(raced.value) == str(plain.value)


@pytest.mark.parametrize("kind", sorted(OOB))
def test_run_cycles_refuses_an_out_of_bounds_program(kind):
    with pytest.raises(OutOfBoundsError, match="instruction 0"):
        sim.run_cycles(_program([OOB[kind], FinishInsn()]))
