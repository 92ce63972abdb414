"""A default config per shape: the fitting point of the space with the lowest analytic estimate
(``cost.conv_cost``: the lowering's instructions costed with the cycle model's ``Timing``,
without running it); the tuner measures for real.
"""

from __future__ import annotations

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

    Without ``measure`` the analytic estimate (on ``timing``, default ``Timing()``) decides. With it (e.g. the cycle model:
    ``lambda insns: sim.cycles_of(insns, hw).total_cycles``), the best ``candidates`` by estimate
    are lowered and measured, plus ``explore`` configs drawn at random (``seed``) from the rest
    of the fitting space, and the fastest wins. (The tuner searches the space properly.)
    """
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
