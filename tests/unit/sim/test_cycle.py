import json

import numpy as np
import pytest

from pyvta import sim
from pyvta.isa import FinishInsn, GemmInsn, HwConfig, Load, MemType, Uop
from pyvta.sim.builder import ProgramBuilder
from pyvta.sim.programs import matmul_program
from pyvta.sim.random_program import random_program


def _gemm_only(iters: int, timing: sim.Timing) -> sim.CycleReport:
    pb = ProgramBuilder(HwConfig(), dram_bytes=1 << 16)
    pb.load_uops([Uop(dst=0), Uop(dst=1)], 0)
    pb.emit(GemmInsn(uop_bgn=0, uop_end=2, iter_out=iters, iter_in=1))
    pb.emit(FinishInsn())
    return sim.run_cycles(pb.build(), timing)


def test_gemm_issues_one_uop_per_cycle():
    t = sim.Timing()
    small, big = _gemm_only(10, t), _gemm_only(1010, t)
    assert big.total_cycles - small.total_cycles == 2 * 1000 * t.gemm_cycles_per_uop
    assert big.gemm_cycles == 2 * 1010
    assert 0 < big.gemm_utilisation <= 1


def test_dram_bandwidth_sets_load_time():
    t = sim.Timing()
    cfg = HwConfig()

    def load_cycles(n_rows: int) -> int:
        pb = ProgramBuilder(cfg, dram_bytes=1 << 20)
        addr = pb.alloc(n_rows, "wgt")
        pb.emit(
            Load(
                MemType.WGT,
                dram_base=addr,
                y_size=1,
                x_size=n_rows,
                x_stride=n_rows,
                push_next_dep=True,
            )
        )
        pb.emit(FinishInsn(pop_prev_dep=True))
        return sim.run_cycles(pb.build(), t).total_cycles

    # 100 more WGT rows = 100 * 256 B over an 8-byte port, plus one burst overhead per 16 beats
    delta = load_cycles(200) - load_cycles(100)
    beats = 100 * 256 // cfg.bus_width_bytes
    assert delta == beats + beats // t.burst_max_beats * t.burst_overhead_cycles


def test_matmul_overlaps_modules_and_writes_trace(tmp_path):
    rng = np.random.default_rng(7)
    ex = matmul_program(
        rng.integers(-128, 128, (512, 256), dtype=np.int8),
        rng.integers(-128, 128, (256, 256), dtype=np.int8),
    )
    report = sim.run_cycles(ex.program, trace=True)
    busy = sum(s.busy_cycles for name, s in report.modules.items() if name != "fetch")
    assert busy > report.total_cycles  # modules ran concurrently
    assert report.macs == 512 * 256 * 256
    assert 0.2 < report.gemm_utilisation < 1
    path = tmp_path / "t.json"
    sim.write_trace(report, path)
    events = json.loads(path.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == ex.program.insn_count + 0
    loads = [(e["ts"], e["ts"] + e["dur"]) for e in spans if e["cat"] == "load"]
    gemms = [(e["ts"], e["ts"] + e["dur"]) for e in spans if e["name"] == "GEMM"]
    assert any(ls < ge and gs < le for ls, le in loads for gs, ge in gemms), (
        "no load overlaps a GEMM"
    )


@pytest.mark.parametrize("seed", range(10))
def test_cycle_model_runs_random_programs(seed):
    program = random_program(np.random.default_rng(seed))
    report = sim.run_cycles(program)
    assert report.total_cycles > 0
    assert sum(s.insns for n, s in report.modules.items() if n != "fetch") == program.insn_count


def _gemm_beside_alu(alu_row: int, overlap: bool, n: int = 200) -> sim.CycleReport:
    """A GEMM over ACC rows [0, n) (n micro-ops) and an ALU MAX (immediate) over rows
    [alu_row, alu_row + n), then FINISH."""
    from pyvta.isa import AluInsn, AluOp

    pb = ProgramBuilder(HwConfig(), dram_bytes=1 << 16)
    pb.load_uops([Uop(dst=0), Uop(dst=alu_row, src=alu_row)], 0)
    rows = dict(iter_out=n, iter_in=1, dst_factor_out=1, src_factor_out=1)
    pb.emit(GemmInsn(uop_bgn=0, uop_end=1, **rows))
    pb.emit(
        AluInsn(alu_opcode=AluOp.MAX, use_imm=True, uop_bgn=1, uop_end=2, overlap=overlap, **rows)
    )
    pb.emit(FinishInsn())
    return sim.run_cycles(pb.build())


def test_an_overlapped_alu_runs_beside_the_gemm_in_another_bank():
    n, half = 200, HwConfig().acc_depth // 2
    serial = _gemm_beside_alu(half, overlap=False, n=n).total_cycles
    beside = _gemm_beside_alu(half, overlap=True, n=n).total_cycles
    assert serial - beside == sim.Timing().alu_issue_cycles(n, True)  # the whole ALU hidden
    # in the GEMM's bank the ALU waits for the GEMM's micro-ops (rule 7): no gain
    assert _gemm_beside_alu(n, overlap=True, n=n).total_cycles == serial


def test_a_repeated_alu_src_row_costs_one_cycle():
    """Rule 8: the bias broadcast (src factor 0 in the inner loop) reads its src row once per
    outer iteration; the cycle model counts it with or without the micro-ops' contents."""
    from pyvta.isa import AluInsn, AluOp
    from pyvta.sim.cycle import alu_src_repeats

    t = sim.Timing()
    bias = AluInsn(
        alu_opcode=AluOp.ADD, uop_bgn=0, uop_end=1, iter_out=4, iter_in=49,
        dst_factor_out=49, src_factor_out=1, dst_factor_in=1,
    )  # fmt: skip
    fields = {"dst": np.array([0]), "src": np.array([1000])}
    assert alu_src_repeats(bias) == alu_src_repeats(bias, fields) == 4 * 48
    distinct = AluInsn(alu_opcode=AluOp.ADD, uop_bgn=0, uop_end=1, iter_out=196, iter_in=1,
                       dst_factor_out=1, src_factor_out=1)  # fmt: skip
    assert alu_src_repeats(distinct) == 0
    assert t.alu_issue_cycles(196, False, 4 * 48) == t.alu_setup_cycles + 4 * 2 + 4 * 48
    in_place = {"dst": np.array([0]), "src": np.array([0])}  # each micro-op writes its src row
    same_row = AluInsn(alu_opcode=AluOp.ADD, uop_bgn=0, uop_end=1, iter_out=5, iter_in=1)
    assert alu_src_repeats(same_row, in_place) == 0
