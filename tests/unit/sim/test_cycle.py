import json

import numpy as np
import pytest

from pyvta import sim
from pyvta.isa import FinishInsn, GemmInsn, HwConfig, Load, MemType, Store, Uop
from pyvta.sim.builder import ProgramBuilder
from pyvta.sim.programs import matmul_program
from pyvta.sim.random_program import random_program


def _gemm_only(iters: int, timing: sim.Timing) -> sim.CycleReport:
    pb = ProgramBuilder(HwConfig(), dram_bytes=1 << 16)
    pb.load_uops([Uop(dst=0), Uop(dst=1)], 0)
    pb.emit(GemmInsn(uop_bgn=0, uop_end=2, iter_out=iters, iter_in=1, dst_factor_out=2))
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

    # 100 more WGT rows = 100 * 256 B over an 8-byte port: one cycle a beat (the bursts'
    # requests run ahead of the data)
    delta = load_cycles(200) - load_cycles(100)
    assert delta == 100 * 256 // cfg.bus_width_bytes


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


def _one_transfer(store: bool, y_size: int, x_size: int, pads=(0, 0, 0, 0), t=None):
    cfg = HwConfig()
    pb = ProgramBuilder(cfg, dram_bytes=1 << 20)
    addr = pb.alloc(y_size * 2 * x_size, "out" if store else "inp")
    y0, y1, x0, x1 = pads
    kind = Store if store else Load
    kw = {} if store else {"memory_type": MemType.INP}
    if not store:
        kw |= {"y_pad_0": y0, "y_pad_1": y1, "x_pad_0": x0, "x_pad_1": x1}
    pb.emit(kind(dram_base=addr, y_size=y_size, x_size=x_size, x_stride=2 * x_size, **kw))
    pb.emit(FinishInsn())
    module = "store" if store else "load"
    return sim.run_cycles(pb.build(), t or sim.Timing()).modules[module].busy_cycles


@pytest.mark.parametrize("store", [False, True])
def test_narrow_rows_run_at_the_dma_request_rate(store):
    """hw.dma requests one burst per DRAM row, one every row_request + burst_split cycles: rows
    of fewer beats (a 1- or 2-pixel INP/OUT row: 2 or 4 beats) cost that, wider ones their beats."""
    t = sim.Timing()
    per_row = t.row_request_cycles + t.burst_split_cycles
    assert per_row == 4
    for x_size, cycles in [(1, per_row), (2, per_row), (4, 8), (8, 16)]:  # INP/OUT: 2 beats each
        delta = _one_transfer(store, 17, x_size) - _one_transfer(store, 1, x_size)
        assert delta == 16 * cycles, (x_size, delta)


def test_padding_before_the_first_beat_is_written_while_the_data_is_on_its_way():
    t = sim.Timing.rtl_testbench()
    slack = t.load_setup_cycles + t.dram_latency_cycles
    plain = _one_transfer(False, 2, 3, t=t)
    # x_pad_0 elements, one a cycle: the first row's before the first beat (free), the second's
    assert _one_transfer(False, 2, 3, (0, 0, slack, 0), t=t) - plain == slack
    assert _one_transfer(False, 2, 3, (0, 0, 0, slack), t=t) - plain == 2 * slack  # after data
    assert _one_transfer(False, 2, 3, (0, 0, 1, 0), t=t) - plain == 1  # only between the rows


def test_a_store_does_not_wait_for_a_load_on_the_read_channel():
    cfg = HwConfig()
    pb = ProgramBuilder(cfg, dram_bytes=1 << 22)
    w = pb.alloc(256, "wgt")
    o = pb.alloc(64, "out")
    pb.emit(Load(MemType.WGT, dram_base=w, y_size=1, x_size=256, x_stride=256))
    pb.emit(Store(dram_base=o, y_size=1, x_size=64, x_stride=64))
    pb.emit(FinishInsn())
    report = sim.run_cycles(pb.build())
    assert report.modules["store"].dram_stall_cycles == 0


def test_raw_stall_cycles_hold_a_reader_until_its_row_is_written():
    from pyvta.sim.timing import raw_stall_cycles

    gap = sim.Timing().acc_dst_raw_cycles
    rows = np.array([0, 1, 0, 1, 0, 1])  # each row two micro-ops apart: 2 cycles a micro-op
    assert raw_stall_cycles(rows, [(rows, gap)], 1) == 2 * (gap - 2)  # pairs 2-3 and 4-5 wait
    distinct = np.arange(8)
    assert raw_stall_cycles(distinct, [(distinct, gap)], 1) == 0
    same = np.zeros(3, int)  # back to back on one row: gap cycles each
    assert raw_stall_cycles(same, [(same, gap)], 1) == 2 * (gap - 1)
    # a wider period absorbs the hold; -1 reads nothing
    assert raw_stall_cycles(rows, [(rows, gap)], 2) == 0
    assert raw_stall_cycles(same, [(np.full(3, -1), gap)], 1) == 0


def test_a_gemm_with_its_pixels_two_apart_runs_at_two_cycles_a_micro_op():
    """The 2-pixel-wide tile with its output pixels innermost (gemm_loops oh, co): each
    micro-op accumulates into the row of the one two before it, so ISSUE holds it
    (acc_dst_raw_cycles). Seen only with the micro-ops' contents (run_cycles replays them)."""
    t = sim.Timing()

    def gemm(uops):
        pb = ProgramBuilder(HwConfig(), dram_bytes=1 << 16)
        pb.load_uops(uops, 0)
        pb.emit(GemmInsn(uop_bgn=0, uop_end=len(uops), iter_out=50, iter_in=1, dst_factor_out=2))
        pb.emit(FinishInsn())
        return sim.run_cycles(pb.build(), t).total_cycles

    alternating = [Uop(dst=k % 2, src=k) for k in range(8)]  # pixel innermost, 4 channels
    by_pixel = [Uop(dst=k // 4, src=k) for k in range(8)]  # each row's 4 micro-ops in a row...
    spread = [Uop(dst=k, src=k) for k in range(8)]
    # per kernel: pairs 2 and 3, 4 and 5, 6 and 7 each wait gap - 2 cycles for the pair before
    assert gemm(alternating) - gemm(spread) == 50 * 3 * (t.acc_dst_raw_cycles - 2)
    assert gemm(by_pixel) > gemm(alternating)
