"""A default config per shape: the fitting point of the space with the lowest analytic estimate
(``cost.conv_cost``: the lowering's instructions costed with the cycle model's ``Timing``,
without running it); the tuner measures for real.

Ranking a layer's space costs 0.1-0.7 s (ResNet-18's 20 layers: about 7 s, each ``pyvta run
--target vta`` of it), so the analytic choice is kept on disk (``pyvta.cache`` folder
``vta-configs``), keyed by the layer, its epilogue, the hardware config, the timing and the
sources of the compiler and the simulator (whose ``Timing`` the estimate reads).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from pyvta.compiler.backend.vta.config import ConvConfig, FitError, all_configs
from pyvta.compiler.backend.vta.cost import ConvCost, conv_cost
from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue
from pyvta.isa import HwConfig, Insn
from pyvta.sim.timing import Timing


def estimate_cycles(
    wl: ConvWorkload, ep: Epilogue, c: ConvConfig, hw: HwConfig, timing: Timing | None = None
) -> float:
    return estimate_parts(wl, ep, c, hw, timing).total_cycles


def estimate_parts(
    wl: ConvWorkload, ep: Epilogue, c: ConvConfig, hw: HwConfig, timing: Timing | None = None
) -> ConvCost:
    """The pieces of ``estimate_cycles`` (``FitError`` if the config does not fit)."""
    return conv_cost(wl, ep, c, hw, timing)


def ranked_configs(
    wl: ConvWorkload,
    ep: Epilogue,
    hw: HwConfig,
    vthreads: int | None = None,
    timing: Timing | None = None,
) -> list[tuple[float, ConvConfig]]:
    """Every fitting config (with ``vthreads`` threads, if given) with its estimate on
    ``timing`` (default ``Timing()``), best first."""
    timing = timing or Timing()
    scored = []
    for c in all_configs(wl):
        if vthreads is not None and c.vthreads != vthreads:
            continue
        try:
            scored.append((estimate_cycles(wl, ep, c, hw, timing), c))
        except FitError:
            continue
    scored.sort(key=lambda t: (t[0], -t[1].tile_h * t[1].tile_w * t[1].tile_co))
    return scored


def default_config(
    wl: ConvWorkload,
    ep: Epilogue,
    hw: HwConfig,
    vthreads: int | None = None,
    measure: Callable[[list[Insn]], float] | None = None,
    candidates: int = 12,
    explore: int = 0,
    seed: int = 0,
    timing: Timing | None = None,
) -> ConvConfig:
    """The best config that also lowers (no micro-op overflow or hazard).

    Without ``measure`` the analytic estimate (on ``timing``, default ``Timing()``) decides
    (kept on disk: :func:`analytic_default`). With it (e.g. the cycle model:
    ``lambda insns: sim.cycles_of(insns, hw).total_cycles``), the best ``candidates`` by estimate
    are lowered and measured, plus ``explore`` configs drawn at random (``seed``) from the rest
    of the fitting space, and the fastest wins. (The tuner searches the space properly.)
    """
    if measure is None:
        return analytic_default(wl, ep, hw, vthreads, timing)
    return _chosen_config(wl, ep, hw, vthreads, measure, candidates, explore, seed, timing)


def analytic_default(
    wl: ConvWorkload,
    ep: Epilogue,
    hw: HwConfig,
    vthreads: int | None = None,
    timing: Timing | None = None,
) -> ConvConfig:
    """:func:`default_config` without a measurement: the best estimate that lowers, from the
    disk cache where an earlier process ranked the same layer (module docstring)."""
    from pyvta import cache

    path = _kept_at(wl, ep, hw, vthreads, timing)
    try:
        return ConvConfig.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        pass  # none yet, or damaged: ranked again
    config = _chosen_config(wl, ep, hw, vthreads, None, 1, 0, 0, timing)
    cache.write_atomic(path, config.to_json().encode())
    return config


def _kept_at(wl, ep, hw, vthreads=None, timing=None):
    """Where :func:`analytic_default` keeps a layer's choice."""
    from pyvta import cache
    from pyvta.compiler.backend.llvm.cache import source_digest

    what = repr((wl, ep, hw, vthreads, timing or Timing()))
    return cache.keyed_file("vta-configs", what, source_digest("compiler", "sim"), ".json")


PARALLEL_MIN_LAYERS = 2
"""Layers to rank below which they are ranked in this process (a worker takes about 0.3 s to
start; ranking a layer 0.3-1.5 s)."""


def rank_missing(layers) -> int:
    """Rank in worker processes (``pyvta.workers``, one per CPU) the ``layers`` (``(wl, ep,
    hw)`` each, as :func:`analytic_default` takes them) whose choice is not on disk yet, the
    largest first; each worker keeps its choices there. Returns the workers started (0: none,
    the layers are ranked as they are asked for). A layer a worker did not rank is ranked when
    it is asked for, so the workers never decide a choice."""
    from pyvta.workers import in_workers

    missing = {}
    for wl, ep, hw in layers:
        path = _kept_at(wl, ep, hw)
        if not path.exists():
            missing.setdefault(path, (wl, ep, hw))
    order = sorted(missing.values(), key=lambda t: -t[0].out_h * t[0].out_w * t[0].out_channels)
    return in_workers([(analytic_default, layer) for layer in order], PARALLEL_MIN_LAYERS, 600.0)


def _chosen_config(wl, ep, hw, vthreads, measure, candidates, explore, seed, timing):
    from pyvta.compiler.backend.vta.conv2d import DramMap, lower_conv2d
    from pyvta.compiler.backend.vta.operator import config_epilogue

    ranked = ranked_configs(wl, ep, hw, vthreads, timing)
    if measure is not None:
        chosen = candidate_configs(ranked, candidates)
        if explore:
            import numpy as np

            rest = [t for t in ranked if t not in chosen]
            picks = np.random.default_rng(seed).permutation(len(rest))[:explore]
            chosen += [rest[i] for i in sorted(picks)]
        ranked = chosen
        candidates = len(ranked)
    lowered = []
    for _, c in ranked[: max(64, candidates)]:
        try:
            low = lower_conv2d(wl, config_epilogue(wl, ep, c, hw), c, hw, DramMap.disjoint(wl, hw))
        except FitError:
            continue
        if measure is None:
            return c
        lowered.append((measure(low.insns), c))
        if len(lowered) >= candidates:
            break
    if lowered:
        return min(lowered, key=lambda t: t[0])[1]
    raise FitError(
        f"no config of the conv2d template fits {wl} on {hw.tag}"
        f" ({len(ranked)} fit the buffers, none of the best 64 lowers)"
    )


def candidate_configs(ranked: list, n: int = 12) -> list[tuple[float, ConvConfig]]:
    """The configs worth measuring first, from ``ranked_configs``' list: per thread count (more
    threads first), the best estimates alternated with the largest tiles (the estimate
    under-rates their weight reuse), ``max(n // 2, 4)`` of each count."""
    lists = []
    for v in sorted({c.vthreads for _, c in ranked}, reverse=True):
        mine = [t for t in ranked if t[1].vthreads == v]
        big = sorted(
            mine, key=lambda t: (-t[1].tile_h * t[1].tile_w * t[1].tile_co, -t[1].tile_ci, t[0])
        )
        lists.append(_interleave(mine, big)[: max(n // 2, 4)])
    return [t for group in lists for t in group]


def _interleave(a: list, b: list) -> list:
    seen, out = set(), []
    for pair in zip(a, b, strict=False):
        for item in pair:
            if item[1] not in seen:
                seen.add(item[1])
                out.append(item)
    return out
