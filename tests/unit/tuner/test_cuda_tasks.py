"""GPU tuning tasks: knob decoding, correctness-checked measurement under cuda-emulated,
invalid and wrong candidates recorded as such, the CLI's --target."""

import pytest

from pyvta.tuner.cli_support import parse_workload
from pyvta.tuner.cuda import GpuBackend, gpu_conv2d_task, gpu_gemm_knobs, gpu_gemm_task
from pyvta.tuner.measure import InProcessMeasurer


def test_knob_points_decode_to_template_knobs():
    task = gpu_gemm_task(40, 50, 30)
    cfg = task.space.config(
        {"threads": (8, 4), "regs": (2, 4), "tile_k": 16, "vthreads": (1, 2), "unroll": False}
    )
    kn = gpu_gemm_knobs(cfg)
    assert (kn.threads_x, kn.threads_y, kn.reg_m, kn.reg_n, kn.tile_k, kn.unroll) == (
        8, 4, 2, 4, 16, False,
    )  # fmt: skip
    assert (kn.vthread_m, kn.vthread_n, kn.block_n) == (1, 2, 64)
    assert task.key == "cuda-emulated.gemm[40, 50, 30]@cuda-emulated"


def test_emulated_measurement_checks_results_and_limits():
    task = gpu_gemm_task(40, 50, 30)
    ok = task.space.config(
        {"threads": (8, 8), "regs": (2, 2), "tile_k": 8, "vthreads": (2, 1), "unroll": False}
    )
    big = task.space.config(
        {"threads": (32, 32), "regs": (8, 8), "tile_k": 32, "vthreads": (1, 1), "unroll": False}
    )
    res = InProcessMeasurer(GpuBackend(), repeats=1).measure(task, [ok, big])
    print([(r.error, r.msg) for r in res])
    assert res[0].error is None and res[0].cost > 0
    assert res[1].error == "invalid" and "48 KiB" in res[1].msg


def test_cli_picks_gpu_tasks_by_target():
    assert parse_workload("gemm:8,9,10", "cuda-emulated").target == "cuda-emulated"
    t = parse_workload("C2", "cuda")
    assert (t.name, t.args) == ("cuda.conv2d", (64, 56, 56, 64, 3, 1, 1))
    assert parse_workload("gemm:8,9,10").target == "llvm"
    with pytest.raises(ValueError, match="GPU target 'opencl'"):
        gpu_conv2d_task(8, 8, 8, 8, 3, target="opencl")
