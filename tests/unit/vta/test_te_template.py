import numpy as np
import pytest

from pyvta import compiler
from pyvta.compiler.backend.vta import ConvConfig, ConvWorkload, Epilogue
from pyvta.compiler.backend.vta.packing import pack_bias, pack_data, pack_weights, unpack_data
from pyvta.compiler.backend.vta.reference import reference_conv
from pyvta.compiler.backend.vta.te_template import (
    build_conv2d,
    config_from_steps,
    conv2d_schedule,
    gemm_intrin,
    vta_scopes,
)
from pyvta.compiler.schedule import replay
from pyvta.driver import SimDevice
from pyvta.isa import HwConfig

HW = HwConfig()


@pytest.mark.parametrize("loops", [("ci", "co"), ("oh", "co"), ("ci", "oh")])
def test_schedule_records_the_config_and_replays(loops):
    wl = ConvWorkload(14, 14, 64, 64, 3, 3, 1, 1)
    c = ConvConfig(7, 7, 2, 2, 2, loops)
    sch, args = conv2d_schedule(wl, c, HW)
    assert config_from_steps(sch.steps) == c
    sp = ConvConfig(7, 7, 2, 2, 2, loops, tile_order="sp")  # spatial tiles outer
    assert config_from_steps(conv2d_schedule(wl, sp, HW)[0].steps) == sp
    again = replay([args[2]], sch.steps, intrinsics={"vta.gemm": gemm_intrin(HW)})
    assert str(compiler.lower(again, args)) == str(compiler.lower(sch, args))


def test_lowered_loop_program_has_scopes_dma_and_gemm_calls():
    wl = ConvWorkload(14, 14, 64, 64, 3, 3, 1, 1)
    sch, args = conv2d_schedule(wl, ConvConfig(7, 7, 2, 2, 2), HW)
    text = str(compiler.lower(sch, args))
    for scope in ("'local.inp_buffer'", "'local.wgt_buffer'", "'local.acc_buffer'"):
        assert f"in {scope}" in text
    assert "vthread" in text and "vta.gemm(" in text
    assert "select(" in text  # the zero padding, which the DMA folds into its pad fields
    assert set(vta_scopes(HW).names()) >= {"local.inp_buffer", "local.wgt_buffer"}
    assert vta_scopes(HW).get("local.wgt_buffer").max_bytes == HW.wgt_buff_bytes


def test_build_from_schedule_is_exact(rng):
    wl = ConvWorkload(10, 10, 32, 32, 3, 3, 1, 1)
    ep = Epilogue.requant(shift=8, relu=True)
    c = ConvConfig(5, 10, 1, 1, 2, ("oh", "co"))
    sch, _ = conv2d_schedule(wl, c, HW)
    x = rng.integers(-128, 128, (1, 32, 10, 10), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 32, 3, 3), dtype=np.int8)
    b = rng.integers(-999, 999, 32).astype(np.int32)
    op = build_conv2d(sch, wl, ep, pack_weights(w), pack_bias(b), SimDevice(dram_bytes=1 << 24))
    assert op.config == c
    got = unpack_data(op(pack_data(x)).output, 32)
    assert np.array_equal(got, reference_conv(x, w, b, ep, wl))
