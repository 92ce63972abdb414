import numpy as np
import pytest

from pyvta import sim
from pyvta.driver import SimDevice
from pyvta.isa import (
    AluInsn,
    AluOp,
    FinishInsn,
    HwConfig,
    Load,
    MemType,
    Store,
    Uop,
    encode_uops,
)
from pyvta.sim import native
from pyvta.sim.programs import matmul_program


def test_run_alu_program_through_the_device():
    dev = SimDevice(dram_bytes=1 << 20)
    cfg = dev.config
    rows = np.arange(-8, 8, dtype=np.int32)[:, None].repeat(cfg.block_out, axis=1)
    src = dev.put(rows)
    dst = dev.alloc(16 * cfg.out_elem_bytes)
    uop = dev.put(np.frombuffer(encode_uops([Uop(dst=0, src=0)], cfg), np.uint8))
    result = dev.run(
        [
            Load(MemType.UOP, dram_base=uop // 4, y_size=1, x_size=1, x_stride=1),
            Load(
                MemType.ACC, dram_base=src // cfg.acc_elem_bytes, y_size=1, x_size=16, x_stride=16
            ),
            AluInsn(
                alu_opcode=AluOp.MAX,
                use_imm=True,
                imm=0,
                uop_bgn=0,
                uop_end=1,
                iter_out=16,
                iter_in=1,
                dst_factor_out=1,
                src_factor_out=1,
                push_next_dep=True,
            ),
            Store(
                dram_base=dst // cfg.out_elem_bytes,
                y_size=1,
                x_size=16,
                x_stride=16,
                pop_prev_dep=True,
                push_prev_dep=True,
            ),
            FinishInsn(pop_next_dep=True),
        ]
    )
    out = dev.read(dst, 16 * cfg.out_elem_bytes).view(np.int8).reshape(16, cfg.block_out)
    assert np.array_equal(out, np.maximum(rows, 0).astype(np.int8))
    assert result.cycles and result.cycles > 0
    assert result.counters["alu_lane_ops"] == 16 * cfg.block_out


def test_engines_run_in_place_with_the_same_results():
    if not native.available():
        pytest.skip("the native engine needs llvmlite (not installed here)")
    rng = np.random.default_rng(2)
    print("seed 2")
    ex = matmul_program(
        rng.integers(-128, 128, (64, 64), np.int8), rng.integers(-128, 128, (64, 32), np.int8)
    )
    images = {}
    for engine in ("numpy", "native"):
        dev = SimDevice(dram_bytes=ex.program.dram.size, cycles=False, engine=engine)
        dev.write(0, ex.program.dram)
        dram = dev.dram.data
        dev.launch(ex.program.insn_addr, ex.program.insn_count)
        assert dev.dram.data is dram  # in place: no image copied
        assert np.array_equal(ex.readback(dram), ex.expected)
        images[engine] = dram
    assert np.array_equal(images["numpy"], images["native"])
    with pytest.raises(ValueError, match="unknown engine 'gpu'"):
        SimDevice(engine="gpu")
    assert sim.ENGINES == ("auto", "native", "numpy")


def test_scrub_zeroes_all_of_dram_in_place_and_forgets_allocations():
    """What any earlier user left (inside an allocation or where a launch stored it) reads as zero
    after ``scrub``; the buffer is the same (a harness's pointer stays valid)."""
    dev = SimDevice(HwConfig(), dram_bytes=1 << 22)
    buffer = dev.dram.data
    a = dev.alloc(4096)
    dev.write(a, np.full(4096, 0xA5, np.uint8))
    dev.dram.data[(1 << 21) + 3 : (1 << 21) + 9000] = 7  # stored outside every allocation
    dev.dram.data[-5:] = 9
    dev.scrub()
    assert dev.dram.data is buffer and not buffer.any()
    assert dev.alloc(4096) == a and not dev.read(a, 4096).any()
