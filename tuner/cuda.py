"""GPU adapter: the compiler's GPU schedule templates (``compiler.ops.cuda``) as tuning tasks.

Targets: ``cuda`` (built to PTX and timed with CUDA events on GPU 0; needs a GPU) and
``cuda-emulated`` (built for the CPU emulator, run in both thread orders and checked against
numpy). Without a GPU, ``cuda-emulated`` searches correctness-checked candidates only: its cost
is the emulator's CPU time, which says nothing about speed on a GPU.

Tasks: ``gpu_gemm_task(m, n, k, target)`` (``C = A @ B`` float32) and ``gpu_conv2d_task(c, h,
w, o, kernel, stride, padding, target)`` (NCHW, batch 1, OIHW weights).
"""

from __future__ import annotations

import time

import numpy as np

from pyvta.compiler.targets.gpu.devices import NAMES, gpu_device
from pyvta.tuner.measure import Backend
from pyvta.tuner.space import BoolKnob, ChoiceKnob, ConfigSpace, TileKnob
from pyvta.tuner.task import InvalidConfig, Task, Template, WrongAnswer

TARGETS = NAMES  # the GPU devices (compiler.targets.gpu.devices): each builds its kernels
_BLOCKS = [(x, y) for x in (4, 8, 16, 32) for y in (2, 4, 8, 16, 32) if 32 <= x * y <= 1024]
_REGS = [(a, b) for a in (1, 2, 4, 8) for b in (1, 2, 4, 8)]


def _gemm_space(m, n, k) -> ConfigSpace:
    return ConfigSpace(
        [
            TileKnob("threads", ("threads_x", "threads_y"), _BLOCKS),
            TileKnob("regs", ("reg_m", "reg_n"), _REGS),
            ChoiceKnob("tile_k", [4, 8, 16, 32]),
            TileKnob("vthreads", ("vthread_m", "vthread_n"), [(1, 1), (1, 2), (2, 1), (2, 2)]),
            BoolKnob("unroll"),
        ]
    )


def _conv2d_space(c, h, w, o, kernel, stride, padding) -> ConfigSpace:
    blocks = [(x, y, z) for x in (4, 7, 8, 14, 16) for y in (1, 2, 4) for z in (2, 4, 8)]
    return ConfigSpace(
        [
            TileKnob("threads", ("threads_x", "threads_y", "threads_z"), blocks),
            TileKnob("regs", ("reg_x", "reg_o"), [(a, b) for a in (1, 2, 4) for b in (1, 2, 4, 8)]),
            ChoiceKnob("tile_c", [d for d in (4, 8, 16) if d <= c] or [c]),
            BoolKnob("unroll"),
        ]
    )


_PARTS = {  # a TileKnob's components, per knob record
    "GpuGemmKnobs": {
        "threads": ("threads_x", "threads_y"),
        "regs": ("reg_m", "reg_n"),
        "vthreads": ("vthread_m", "vthread_n"),
    },
    "GpuConv2dKnobs": {
        "threads": ("threads_x", "threads_y", "threads_z"),
        "regs": ("reg_x", "reg_o"),
    },
}


def _knobs(config, cls):
    parts = _PARTS[cls.__name__]
    out = {}
    for name, value in dict(config).items():
        if name in parts:
            out.update(zip(parts[name], value, strict=True))
        else:
            out[name] = value
    return cls(**out)


def gpu_gemm_knobs(config):
    from pyvta.compiler.ops.cuda import GpuGemmKnobs

    return _knobs(config, GpuGemmKnobs)


def gpu_conv2d_knobs(config):
    from pyvta.compiler.ops.cuda import GpuConv2dKnobs

    return _knobs(config, GpuConv2dKnobs)


def _gemm_instantiate(config, m, n, k):
    from pyvta.compiler.ops.cuda import gemm

    kn = gpu_gemm_knobs(config)
    if (kn.block_m + kn.block_n) * kn.tile_k * 4 > 48 * 1024:
        raise InvalidConfig("shared tiles exceed 48 KiB")
    return gemm(m, n, k, kn)


def _conv2d_instantiate(config, c, h, w, o, kernel, stride, padding):
    from pyvta.compiler.ops.cuda import conv2d_gpu

    return conv2d_gpu(c, h, w, o, kernel, stride, padding, gpu_conv2d_knobs(config))


def _gemm_reference(arrays, m, n, k):
    return arrays[0].astype(np.float64) @ arrays[1]


def _conv2d_reference(arrays, c, h, w, o, kernel, stride, padding):
    from pyvta.compiler.ops.conv2d import conv2d_nchw_numpy

    return conv2d_nchw_numpy(arrays[0], arrays[1], stride, padding)


def _gemm_lower(config, *args):
    from pyvta.compiler import lower

    return lower(*_gemm_instantiate(config, *args))


def _conv2d_lower(config, *args):
    from pyvta.compiler import lower

    return lower(*_conv2d_instantiate(config, *args))


TEMPLATES = {}
for _t in TARGETS:
    TEMPLATES[f"{_t}.gemm"] = Template(
        f"{_t}.gemm",
        _gemm_space,
        _gemm_instantiate,
        target=_t,
        lower_fn=_gemm_lower,
        reference_fn=_gemm_reference,
    )
    TEMPLATES[f"{_t}.conv2d"] = Template(
        f"{_t}.conv2d",
        _conv2d_space,
        _conv2d_instantiate,
        target=_t,
        lower_fn=_conv2d_lower,
        reference_fn=_conv2d_reference,
    )


def _check_target(target: str) -> None:
    if target not in TARGETS:
        raise ValueError(f"GPU target {target!r} is not one of {TARGETS}")


def gpu_gemm_task(m: int, n: int, k: int, target: str = "cuda-emulated") -> Task:
    _check_target(target)
    return TEMPLATES[f"{target}.gemm"].task(m, n, k)


def gpu_conv2d_task(c, h, w, o, kernel, stride=1, padding=0, target="cuda-emulated") -> Task:
    _check_target(target)
    return TEMPLATES[f"{target}.conv2d"].task(c, h, w, o, kernel, stride, padding)


class GpuBackend(Backend):
    """Build with ``compiler.build(target=task.target)``, run on seeded inputs, check against
    the template's reference (a mismatch, or a race between thread orders, is a
    ``wrong_answer``). Costs: seconds per call — CUDA-event time on the GPU, the emulator's CPU
    wall time under ``cuda-emulated``."""

    def build(self, task, config):
        from pyvta.compiler import lower
        from pyvta.compiler.backend.cuda import LaunchError, prepare

        sch, args = task.instantiate(config)
        try:
            prepare(lower(sch, args))  # launch limits, barrier placement
        except LaunchError as e:
            raise InvalidConfig(str(e)) from None
        return None  # modules do not cross processes: run() builds again

    def run(self, task, config, artifact, repeats):
        from pyvta.compiler import build
        from pyvta.compiler.backend.cuda_emulated import RaceError

        sch, args = task.instantiate(config)
        mod = build(sch, args, target=task.target)
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal(t.shape).astype(t.dtype) for t in args]
        arrays[-1][...] = 0
        try:
            t0 = time.perf_counter()
            mod(*arrays)
            first_s = time.perf_counter() - t0
        except RaceError as e:
            raise WrongAnswer(str(e)) from None
        want = task.template.reference_fn(arrays, *task.args)
        err = float(np.max(np.abs(arrays[-1] - want)) / (np.max(np.abs(want)) + 1e-30))
        if not err < 1e-4:
            raise WrongAnswer(f"relative error {err:.3g} against the reference (max 1e-4)")
        if gpu_device(task.target).on_gpu:  # CUDA events; the emulator: its CPU time
            return [mod.time_ms(*arrays, number=10, repeat=1) * 1e-3 for _ in range(repeats)]
        return [first_s] * repeats
