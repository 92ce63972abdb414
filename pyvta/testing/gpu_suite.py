"""The GPU kernel suite: every GPU template at small, odd sizes, with inputs and a float64
numpy reference. The tests assemble each with ptxas and run each through ``cuda-emulated``;
``benchmarks/gpu_check.py --prepare`` writes their PTX, inputs and expected outputs for a GPU.

``SUITE`` maps a name to a ``SuiteKernel``; ``make()`` returns ``(schedule, args)`` (the last
argument is the output, zero-initialised by ``inputs``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from pyvta.compiler.ops.conv2d import conv2d_nchw_numpy as conv2d_reference

RTOL, ATOL = 1e-4, 1e-4  # float32 results against float64 references of these sizes


def max_pool_reference(data, kernel: int, stride: int, padding: int) -> np.ndarray:
    x = np.pad(data, ((0, 0), (0, 0), (padding,) * 2, (padding,) * 2), constant_values=-np.inf)
    win = sliding_window_view(x, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride]
    return win.max(axis=(-1, -2))


def depthwise_reference(data, weight, stride: int, padding: int) -> np.ndarray:
    """Depthwise (group = C) conv2d of NCHW ``data`` with ``[C, 1, K, K]`` weights."""
    chans = [conv2d_reference(data[:, i : i + 1], weight[i : i + 1], stride, padding) for i in
             range(data.shape[1])]  # fmt: skip
    return np.concatenate(chans, axis=1)


def avg_pool_reference(data, kernel: int, stride: int, padding: int) -> np.ndarray:
    x = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (padding,) * 2, (padding,) * 2))
    win = sliding_window_view(x, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride]
    return win.mean(axis=(-1, -2))


def softmax_reference(x) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class SuiteKernel:
    name: str
    make: Callable  # () -> (schedule, args)
    reference: Callable  # inputs (numpy, without the output) -> expected output

    def inputs(self, args, seed: int = 0) -> list[np.ndarray]:
        """Standard-normal float32 inputs for ``args`` (the schedule's tensors) and a zeroed
        output, from ``seed``."""
        rng = np.random.default_rng(seed)
        arrays = [rng.standard_normal(a.shape, dtype=np.float32) for a in args[:-1]]
        return [*arrays, np.zeros(args[-1].shape, np.float32)]


def _suite() -> dict[str, SuiteKernel]:
    from pyvta.compiler.ops import cuda as g

    _BIAS_RELU = g.Epilogue(bias=True, clip=(0.0, float("inf")))  # noqa: N806
    small = g.GpuGemmKnobs(threads_x=8, threads_y=8, reg_m=2, reg_n=4, tile_k=4)
    conv = g.GpuConv2dKnobs(threads_x=4, threads_y=2, threads_z=4, reg_x=3, reg_o=2, tile_c=4)
    items = [
        ("gemm_37x45x29", lambda: g.gemm(37, 45, 29), lambda a, b: a.astype(np.float64) @ b),
        ("gemm_67x131x50", lambda: g.gemm(67, 131, 50, small), lambda a, b: a @ b.astype(float)),
        ("gemm_1x77x33", lambda: g.gemm(1, 77, 33, small), lambda a, b: a @ b.astype(float)),
        (
            "gemm_vthread_53x70x29",
            lambda: g.gemm(53, 70, 29, replace(small, reg_m=2, reg_n=2, vthread_m=2, vthread_n=2)),
            lambda a, b: a @ b.astype(float),
        ),
        ("dense_29x53x41", lambda: g.dense_gpu(29, 53, 41), lambda x, w: x @ w.T.astype(float)),
        (
            "conv_3x3_s1",
            lambda: g.conv2d_gpu(5, 11, 13, 7, 3, 1, 1),
            lambda x, w: conv2d_reference(x, w, 1, 1),
        ),
        (
            "conv_3x3_s2",
            lambda: g.conv2d_gpu(6, 9, 10, 9, 3, 2, 1, conv),
            lambda x, w: conv2d_reference(x, w, 2, 1),
        ),
        (
            "conv_1x1_s2",
            lambda: g.conv2d_gpu(6, 9, 10, 9, 1, 2, 0),
            lambda x, w: conv2d_reference(x, w, 2, 0),
        ),
        (
            "conv_7x7_s2",
            lambda: g.conv2d_gpu(3, 19, 17, 8, 7, 2, 3, replace(conv, unroll=False)),
            lambda x, w: conv2d_reference(x, w, 2, 3),
        ),
        (
            "conv_igemm_3x3_s2",
            lambda: g.conv2d_implicit_gemm(6, 9, 10, 9, 3, 2, 1, small),
            lambda x, w: conv2d_reference(x, w, 2, 1).reshape(9, -1),
        ),
        (
            "bias_relu",
            lambda: g.bias_relu_gpu((2, 3, 5, 7)),
            lambda x, b: np.maximum(x + b[None, :, None, None], 0),
        ),
        (
            "max_pool_3x3_s2",
            lambda: g.max_pool2d_gpu((1, 3, 9, 11), 3, 2, 1),
            lambda x: max_pool_reference(x, 3, 2, 1),
        ),
        ("softmax_13x37", lambda: g.softmax_gpu(13, 37), softmax_reference),
        (
            "conv_3x3_bias_res_relu6",
            lambda: g.conv2d_gpu(
                5, 11, 13, 7, 3, 1, 1, conv, epilogue=g.Epilogue(True, True, (0, 6))
            ),
            lambda x, w, b, r: np.clip(conv2d_reference(x, w, 1, 1) + b[:, None, None] + r, 0, 6),
        ),
        (
            "depthwise_3x3_s2_bias_relu",
            lambda: g.depthwise_conv2d_gpu(6, 9, 11, 3, 2, 1, epilogue=_BIAS_RELU),
            lambda x, w, b: np.maximum(depthwise_reference(x, w, 2, 1) + b[:, None, None], 0),
        ),
        (
            "dense_1x13x37_bias",
            lambda: g.dense_gpu(1, 13, 37, small, epilogue=g.Epilogue(bias=True)),
            lambda x, w, b: x @ w.T.astype(float) + b,
        ),
        ("add_101", lambda: g.elementwise_gpu("add", 101), lambda a, b: a + b.astype(float)),
        (
            "clip_101",
            lambda: g.elementwise_gpu("clip", 101, (-0.5, 0.5)),
            lambda a: np.clip(a, -0.5, 0.5),
        ),
        (
            "global_avg_pool_7x5x3",
            lambda: g.global_avg_pool_gpu((1, 7, 5, 3)),
            lambda x: x.astype(np.float64).mean(axis=(2, 3), keepdims=True),
        ),
        (
            "avg_pool_3x3_s2",
            lambda: g.avg_pool2d_gpu((1, 3, 9, 11), 3, 2, 1),
            lambda x: avg_pool_reference(x, 3, 2, 1),
        ),
    ]
    return {n: SuiteKernel(n, make, ref) for n, make, ref in items}


SUITE = _suite()


def ptxas_or_skip():
    """``compiler.backend.cuda.ptxas``, or a pytest skip naming what is missing (the pinned
    ``nvidia-cuda-nvcc`` wheel of the ``gpu-check`` extra)."""
    import pytest

    from pyvta.compiler.backend.cuda import ptxas

    try:
        ptxas.ptxas_path()
    except ptxas.ToolchainMissing as e:
        pytest.skip(f"needs ptxas: {e}")
    return ptxas
