import numpy as np
import pytest

from pyvta import sim
from pyvta.isa import FinishInsn, GemmInsn, HwConfig, Load, MemType, Uop
from pyvta.sim.builder import ProgramBuilder
from pyvta.sim.programs import matmul_program
from pyvta.sim.random_program import random_program


def test_well_tokened_programs_have_no_races():
    rng = np.random.default_rng(11)
    ex = matmul_program(
        rng.integers(-128, 128, (256, 64), dtype=np.int8),
        rng.integers(-128, 128, (64, 32), dtype=np.int8),
    )
    sim.run(ex.program, check_races=True)
    for seed in range(20):
        sim.run(random_program(np.random.default_rng(seed)), check_races=True)


def test_missing_token_is_a_race_even_when_the_result_is_right():
    cfg = HwConfig()
    pb = ProgramBuilder(cfg, dram_bytes=1 << 20)
    data = pb.put(np.ones((4, 16), np.int8), "inp")
    pb.load_uops([Uop(dst=0, src=0, wgt=0)], 0)
    pb.emit(Load(MemType.INP, dram_base=data, y_size=1, x_size=4, x_stride=4))  # no push
    pb.emit(
        GemmInsn(uop_bgn=0, uop_end=1, iter_out=4, iter_in=1, dst_factor_out=1, src_factor_out=1)
    )
    pb.emit(FinishInsn())
    program = pb.build()
    sim.run(program)  # the default interleaving happens to load first
    with pytest.raises(
        sim.RaceError,
        match=r"instruction 2 \(compute\) reads inp \[0, 4\) which"
        r" instruction 1 \(load\) also accesses",
    ):
        sim.run(program, check_races=True)
