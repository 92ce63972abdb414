"""Synthetic tasks and backends for tests and search benchmarks (no compiler, no hardware).

``tiled_gemm_task(m, n, k)``: a GEMM-like space (3-level splits of ``i`` and ``j``, a 2-level
split of ``k``, a loop order, an unroll depth, vectorize on/off) whose cost is an analytic
model: register-tile pressure, cache footprint of the middle tile, vector use and loop order.
Points whose register tile exceeds 256 elements are invalid (``InvalidConfig``). The optimum
moves with the shape, so tasks of different shapes form a family for transfer learning.

``SyntheticBackend`` returns that cost (seconds-like units, deterministic, optional noise);
``FaultyBackend`` wraps it and crashes (``os._exit``) or hangs for chosen indices, to test
isolation in ``LocalMeasurer``.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

from pyvta.tuner.measure import Backend
from pyvta.tuner.space import BoolKnob, ChoiceKnob, ConfigSpace, ReorderKnob, SplitKnob
from pyvta.tuner.task import InvalidConfig, Template


def _space(m: int, n: int, k: int) -> ConfigSpace:
    return ConfigSpace(
        [
            SplitKnob("tile_i", m, 3, max_inner=64),
            SplitKnob("tile_j", n, 3, max_inner=64),
            SplitKnob("tile_k", k, 2),
            ReorderKnob("order", ("io", "jo", "ko")),
            ChoiceKnob("unroll", [1, 2, 4, 8]),
            BoolKnob("vectorize"),
        ]
    )


def _instantiate(config, m, n, k):
    ri, rj = config["tile_i"][2], config["tile_j"][2]
    if ri * rj > 256:
        raise InvalidConfig(f"register tile {ri}x{rj} exceeds 256 elements")
    return dict(config)


def gemm_model_cost(config, m: int, n: int, k: int) -> float:
    """Modelled seconds of one GEMM for ``config`` (see the module docstring)."""
    _, ti, ri = config["tile_i"]
    _, tj, rj = config["tile_j"]
    _, bk = config["tile_k"]
    flops = 2.0 * m * n * k
    lanes = 8
    # registers: ri x rj accumulators in vector registers (16 of them)
    vec_regs = ri * math.ceil(rj / lanes)
    reg_eff = min(1.0, vec_regs / 12.0) if vec_regs <= 16 else 16.0 / vec_regs * 0.7
    simd = (min(rj, lanes) / lanes) if config["vectorize"] else 1.0 / lanes
    # cache: middle tile footprint in bytes against 32 KiB L1, 1 MiB L2
    bi, bj = ti * ri, tj * rj
    foot = 4.0 * (bi * bk + bk * bj + bi * bj)
    cache_eff = 1.0 / (1.0 + 0.4 * max(0.0, foot / (32 << 10) - 1.0) ** 0.5)
    cache_eff /= 1.0 + 2.0 * max(0.0, foot / (1 << 20) - 1.0)
    # loop overhead per register-tile step, and edge effects of small middle tiles
    body = ri * rj * config["unroll"]
    loop_eff = body / (body + 6.0) * (bi * bj) / (bi * bj + 64.0)
    order_eff = {"io": 1.0, "jo": 0.9, "ko": 0.55}[config["order"][-1]]
    if config["order"][0] == "ko":
        order_eff *= 0.8
    unroll_eff = {1: 0.75, 2: 0.9, 4: 1.0, 8: 0.95 if vec_regs <= 8 else 0.7}[config["unroll"]]
    eff = reg_eff * simd * cache_eff * order_eff * unroll_eff * loop_eff
    return flops / (50e9 * max(eff, 1e-3))


TILED_GEMM = Template("synthetic.tiled_gemm", _space, _instantiate, target="synthetic")


def tiled_gemm_task(m: int = 256, n: int = 256, k: int = 256):
    return TILED_GEMM.task(m, n, k)


class SyntheticBackend(Backend):
    """Cost = ``gemm_model_cost`` times ``1 + noise * N(0, 1)`` (seeded by the index);
    ``delay_s``: sleep per run, to imitate a real measurement; ``build_delay_s``: per build
    (a slow lowering)."""

    def __init__(self, noise: float = 0.0, delay_s: float = 0.0, build_delay_s: float = 0.0):
        self.noise, self.delay_s, self.build_delay_s = noise, delay_s, build_delay_s

    def build(self, task, config):
        if self.build_delay_s:
            time.sleep(self.build_delay_s)
        return task.instantiate(config)

    def run(self, task, config, artifact, repeats):
        if self.delay_s:
            time.sleep(self.delay_s)
        base = gemm_model_cost(config, *task.args)
        if not self.noise:
            return [base] * repeats
        rng = np.random.default_rng(config.index)
        return [base * (1.0 + self.noise * rng.standard_normal()) for _ in range(repeats)]


class FaultyBackend(SyntheticBackend):
    """Crashes the run (or build) process for ``crash`` indices, sleeps ``hang_s`` for
    ``hang`` indices, raises for ``raise_`` indices."""

    def __init__(self, crash=(), hang=(), raise_=(), in_build: bool = False, hang_s: float = 600):
        super().__init__()
        self.crash, self.hang, self.raise_ = set(crash), set(hang), set(raise_)
        self.in_build, self.hang_s = in_build, hang_s

    def _fault(self, config) -> None:
        if config.index in self.crash:
            os._exit(77)
        if config.index in self.hang:
            time.sleep(self.hang_s)
        if config.index in self.raise_:
            raise RuntimeError(f"injected failure at index {config.index}")

    def build(self, task, config):
        if self.in_build:
            self._fault(config)
        return super().build(task, config)

    def run(self, task, config, artifact, repeats):
        if not self.in_build:
            self._fault(config)
        return super().run(task, config, artifact, repeats)
