"""VTA adapter: the VTA conv2d template (``compiler.backend.vta``) as a tuning task, measured
by the simulator's cycle model (``sim.cycles_of``). Costs are cycles (deterministic: one repeat
is enough).

``vta_conv2d_task(h, w, ic, oc, k, stride, pad)``: batch 1, fused epilogue with bias, on the
default ``isa.HwConfig`` (the PYNQ-Z1 build). ``vta_layer_task(workload, epilogue)``: one layer
of a network exactly as it runs there (padding, block, fused epilogue with its lowering choices;
see ``tuner.network``); its arguments are the two dataclasses' fields. Knobs: ``tile_h``, ``tile_w`` (output pixels),
``tile_ci``, ``tile_co`` (16-channel blocks), ``vthreads`` and ``gemm_loops`` (which two
dimensions the GEMM's hardware loops take), and the schedule's other choices
(``config.schedule_space``): ``overlap`` (the epilogue beside the other threads' GEMMs or after
them), ``tile_order`` and ``chunk_order`` (loop orders of the output tiles and of the reduction
over input-channel chunks), ``uop_mode`` (micro-op kernels resident or loaded into a ring), with
``vthreads`` up to 4; records logged before those knobs read as their defaults
(``ChoiceKnob.default``, ``ConfigSpace.legacy``). Points that do not fit the on-chip buffers, and points whose
knobs cannot change their program (``_same_program_as``), are ``InvalidConfig`` (recorded,
never retried).
The template has a ``lower_fn`` (the loop IR of its tensor-expression schedule), so the
``curve`` / ``loop`` IR features work on it, and a ``context_fn`` (``CONTEXT_NAMES``): workload-
relative features from the fit check and the analytic estimate, without lowering, the same width
for every layer (the ``context`` features, for transfer between layers).

This module is the tuner's only coupling to the VTA backend; it follows that backend's API as of
this writing (``ConvWorkload``, ``Epilogue``, ``ConvConfig``, ``check_fit``, ``config_space``,
``lower_conv2d``, ``DramMap.disjoint``, ``default_config``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

from pyvta.tuner.measure import Backend
from pyvta.tuner.space import ChoiceKnob, ConfigSpace
from pyvta.tuner.task import InvalidConfig, Task, Template


def _workload(*args):
    """``(ConvWorkload, Epilogue)`` from a task's arguments: ``(h, w, ic, oc, k, stride, pad)``
    or ``(workload fields, epilogue fields)`` (two dicts) for a network layer."""
    from pyvta.compiler.backend.vta.workload import ConvWorkload, Epilogue

    if len(args) == 2:
        return ConvWorkload(**args[0]), Epilogue(**args[1])
    h, w, ic, oc, k, stride, pad = args
    return ConvWorkload(h, w, ic, oc, k, k, stride, pad), Epilogue(bias=True)


def _loops_key(loops) -> str:
    return ",".join(loops)


def _space(*args) -> ConfigSpace:
    """The schedule's choices (``config.schedule_space``). The knobs it gained after records
    were logged default to their first value (what those records mean), and a knob that gained
    values (``vthreads``) keeps the ones it offered before (``ConfigSpace.legacy``)."""
    from pyvta.compiler.backend.vta.config import config_space, schedule_space

    wl, _ = _workload(*args)
    before = config_space(wl)
    knobs = []
    for name, values in schedule_space(wl).items():
        if name == "gemm_loops":
            values = [_loops_key(v) for v in values]
        if name not in before:
            knobs.append(ChoiceKnob(name, list(values), default=values[0]))
        elif name != "gemm_loops" and list(values) != list(before[name]):
            knobs.append(ChoiceKnob(name, list(values), before=before[name]))
        else:
            knobs.append(ChoiceKnob(name, list(values)))
    return ConfigSpace(knobs)


def _instantiate(config, *args):
    """``(workload, epilogue, ConvConfig, HwConfig)``; ``InvalidConfig`` if it does not fit."""
    from pyvta.compiler.backend.vta.config import FitError, check_fit
    from pyvta.isa import HwConfig

    wl, ep = _workload(*args)
    cfg = conv_config(config)
    hw = HwConfig()
    try:
        check_fit(wl, ep, cfg, hw)
    except FitError as e:
        raise InvalidConfig(str(e)) from None
    same = _same_program_as(wl, cfg)
    if same is not None:
        raise InvalidConfig(f"config {cfg.to_dict()} lowers as {same} does (a duplicate point)")
    return wl, ep, cfg, hw


def _same_program_as(wl, c):
    """For a point whose knobs cannot change its program (one thread: nothing for the epilogue
    to overlap; one input-channel chunk: nothing to reorder), the knob that says so; else
    None. Such duplicates are invalid points, so a search does not spend trials on them."""
    if c.vthreads == 1 and not c.overlap:
        return "overlap=True"
    if c.chunk_order != "up" and wl.red_blocks == c.tile_ci:
        return "chunk_order='up'"
    return None


def _lower(config, *args):
    """Loop IR of the template's tensor-expression schedule for ``config``
    (``compiler.backend.vta.te_template.conv2d_schedule`` lowered with ``compiler.lower``): the
    loop program the instruction stream follows, for IR features (``tuner.features``).
    ``InvalidConfig`` if the point does not fit."""
    from pyvta.compiler import lower
    from pyvta.compiler.backend.vta.te_template import conv2d_schedule

    wl, _, cfg, hw = _instantiate(config, *args)
    sch, tensors = conv2d_schedule(wl, cfg, hw)
    return lower(sch, tensors)


CONTEXT_NAMES = (
    # the workload (constant within a task)
    "log2_kernel_elems",  # kh * kw: how much one input row is reused
    "stride",  # > 1: loaded input windows hold pixels the kernel skips
    # the tiles relative to the workload
    "log2_frac_h",  # tile_h / out_h (0: the whole dimension)
    "log2_frac_w",
    "log2_frac_ci",
    "log2_frac_co",
    "log2_tiles",  # output tiles: channel tiles x spatial tiles (DMA/instruction rounds)
    "log2_chunks",  # input-channel chunks per tile (weight reloads when > 1)
    # on-chip buffers (rows used by all threads and constants / depth)
    "inp_occupancy",
    "wgt_occupancy",
    "acc_occupancy",
    "uop_occupancy",  # the GEMM micro-op kernels of all threads / UOP depth (> 1: reloaded)
    "log2_kernel_uops",  # micro-ops per GEMM kernel (the two hardware loops take the rest)
    # DRAM traffic (the estimate's counting) per block MAC (one GEMM micro-op)
    "inp_bytes_per_mac",
    "wgt_bytes_per_mac",
    "out_bytes_per_mac",
    "log2_inp_reload",  # input bytes loaded / input size (halos, channel tiles)
    "log2_wgt_reload",  # weight bytes loaded / weight size (chunks, spatial tiles)
    "log2_dma_per_mac",  # DMA transfers per GEMM micro-op
    "alu_per_gemm",  # ALU row-op cycles / GEMM micro-ops (the epilogue's share of compute)
    # the analytic estimate (compiler.backend.vta.cost.conv_cost: the lowering's instructions
    # costed per module with the cycle model's Timing)
    "est_compute_share",  # compute / (compute + load + store)
    "est_load_share",
    "est_store_share",
    "log2_est_over_gemm",  # estimate / ideal GEMM cycles (1: GEMM-bound, no overhead)
    # each module's busy time (less DRAM port waits) / ideal GEMM cycles
    "log2_compute_over_gemm",  # GEMM/ALU instructions with their setup and pipeline fill
    "log2_load_over_gemm",  # the load module: a latency per transfer, beats, bursts, padding
    "log2_store_over_gemm",
    "log2_port_over_gemm",  # the one DRAM port all transfers share (beats, bursts)
    "log2_bound_over_gemm",  # in sequence (1 thread), else the busiest (no fill and drain)
    "dma_latency_share",  # per-transfer setup and latency / the DMA modules' time
    # the schedule
    "vthreads",
    "gemm_loops_ci_co",
    "gemm_loops_oh_co",
    "gemm_loops_ci_oh",
    # the schedule's other choices (``config.schedule_space``), which the estimate ignores
    "overlap",  # the epilogue beside the other threads' GEMMs (1) or after them (0)
    "tile_order_sp",  # spatial tiles outer: inputs kept across channel tiles
    "chunk_order_snake",  # the reduction alternating direction: a chunk kept between tiles
    "uop_ring",  # micro-op kernels loaded at first use into a ring
    "log2_co_tiles_per_thread",  # channel tiles a thread computes per spatial tile
    "log2_sp_tiles",  # spatial tiles (inputs kept across the co tiles with "sp")
)


def _gemm_hazard(c, dims: dict) -> bool:
    """Whether consecutive GEMM micro-ops write one ACC row (the lowering's FitError): in the
    loop nest (two hardware loops, then the kernel's dimensions), an increment of some counter
    with its inner counters wrapping moves the destination by zero rows. ``dims``: the
    lowering's ``gemm_dims`` (dimension -> extent, dst stride, ...)."""
    from pyvta.compiler.backend.vta.conv2d_tile import KERNEL_ORDER

    order = list(c.gemm_loops) + [d for d in KERNEL_ORDER if d not in c.gemm_loops]
    inner_span = 0  # destination rows the inner counters move from all-zero to all-max
    for d in reversed(order):
        extent, dst_stride = dims[d][0], dims[d][1]
        if extent > 1 and dst_stride - inner_span == 0:
            return True
        inner_span += (extent - 1) * dst_stride
    return False


@functools.lru_cache(maxsize=1 << 16)
def _tiling_estimate(wl, ep, c, hw):
    from pyvta.compiler.backend.vta.config import FitError
    from pyvta.compiler.backend.vta.default import estimate_parts

    try:
        return estimate_parts(wl, ep, c, hw)
    except FitError:
        return None


def _estimate(wl, ep, c, hw):
    """The analytic estimate's parts (``default.estimate_parts``) of ``c``, None if it does not
    fit; it does not read the loop orders or the micro-op mode, so it is computed once per
    tiling (and thread count, overlap) in this process: most of a context row's time (about
    5 ms), which a search over a large space asks for again and again, seed after seed."""
    from pyvta.compiler.backend.vta.config import CHUNK_ORDERS, TILE_ORDERS, UOP_MODES

    tiling = dataclasses.replace(
        c, tile_order=TILE_ORDERS[0], chunk_order=CHUNK_ORDERS[0], uop_mode=UOP_MODES[0]
    )
    return _tiling_estimate(wl, ep, tiling, hw)


def _context(config, *args) -> np.ndarray:
    """``float32 [len(CONTEXT_NAMES)]``: workload-relative features of ``config`` (see
    ``CONTEXT_NAMES``), zeros for a point that does not lower (buffers, GEMM hazard, a micro-op
    kernel larger than the UOP buffer). About 0.1 ms; no lowering and no cycle model."""
    from pyvta.compiler.backend.vta.config import (
        GEMM_LOOPS,
        gemm_dims,
        geometry,
        reserved_rows,
    )
    from pyvta.isa import HwConfig

    wl, ep = _workload(*args)
    c = conv_config(config)
    hw = HwConfig()
    out = np.zeros(len(CONTEXT_NAMES), np.float32)
    if _same_program_as(wl, c) is not None:
        return out
    est = _estimate(wl, ep, c, hw)
    if est is None:
        return out
    g = geometry(wl, ep, c)
    if _gemm_hazard(c, gemm_dims(wl, c, g)) or est.kernel_uops > hw.uop_depth:
        return out
    kk = wl.kernel_h * wl.kernel_w
    v = c.vthreads
    fixed = reserved_rows(wl, ep)
    macs = est.gemm_cycles
    inp_size = wl.ci_blocks * wl.height * wl.width * hw.inp_elem_bytes
    wgt_size = wl.co_blocks * wl.red_blocks * kk * hw.wgt_elem_bytes
    modules = (est.compute_cycles, est.load_cycles, est.store_cycles)
    parts = sum(modules)
    bound = parts if v == 1 else max(*modules, est.port_cycles, est.fetch_cycles)
    vals = [
        math.log2(kk),
        wl.stride,
        math.log2(c.tile_h / wl.out_h),
        math.log2(c.tile_w / wl.out_w),
        math.log2(c.tile_ci / wl.red_blocks),
        math.log2(c.tile_co / wl.co_blocks),
        math.log2(est.tiles),
        math.log2(est.chunks),
        (v * g.inp_rows + fixed["inp"]) / hw.inp_depth,
        (v * g.wgt_rows + fixed["wgt"]) / hw.wgt_depth,
        (v * g.acc_rows + fixed["acc"]) / hw.acc_depth,
        v * est.kernel_uops / hw.uop_depth,
        math.log2(est.kernel_uops),
        est.inp_bytes / macs,
        est.wgt_bytes / macs,
        est.out_bytes / macs,
        math.log2(est.inp_bytes / inp_size),
        math.log2(est.wgt_bytes / wgt_size),
        math.log2((est.inp_loads + est.wgt_loads + est.stores) / macs),
        est.alu_cycles / macs,
        *(m / parts for m in modules),
        math.log2(est.total_cycles / macs),
        *(math.log2(x / macs) for x in (*modules, est.port_cycles, bound)),
        est.dma_latency_cycles / (est.load_cycles + est.store_cycles),
        v,
        *(float(c.gemm_loops == loops) for loops in GEMM_LOOPS),
        float(c.overlap),
        float(c.tile_order == "sp"),
        float(c.chunk_order == "snake"),
        float(c.uop_mode == "ring"),
        math.log2(max(1.0, wl.co_blocks / c.tile_co / v)),
        math.log2(est.tiles * c.tile_co / wl.co_blocks),
    ]
    out[:] = vals
    return out


def valid_point_count(task: Task) -> tuple[int, int]:
    """``(valid points, those of them in the space before the schedule knobs)`` of a VTA
    task's space (the second: ``config.config_space``, e.g. two thread counts, the schedule
    knobs at their defaults): points that lower (the context features' fit check: buffers,
    GEMM hazard, micro-op kernel) and are no duplicate (``_same_program_as``). The fit check
    runs once per tiling (the schedule knobs at their defaults: they change no buffer, loop or
    kernel size); about 3 ms a tiling."""
    from pyvta.compiler.backend.vta.config import config_space

    defaults = {k.name: k.default for k in task.space.knobs if k.default is not None}
    wl, _ = _workload(*task.args)
    before = {
        k: [_loops_key(x) if k == "gemm_loops" else x for x in v]
        for k, v in config_space(wl).items()
    }
    fits: dict[tuple, bool] = {}
    total = at_defaults = 0
    for i in range(len(task.space)):
        point = dict(task.space.get(i))
        tiling = {**point, **defaults}
        key = tuple(sorted(tiling.items()))
        if key not in fits:
            fits[key] = bool(task.context(task.space.config(tiling)).any())
        if fits[key] and _same_program_as(wl, conv_config(point)) is None:
            total += 1
            at_defaults += point == tiling and all(point[k] in v for k, v in before.items())
    return total, at_defaults


def ranked_vta_configs(task: Task, n: int):
    """The backend's ``n`` most promising configs, as points of the space: the candidates its
    measured default would try (``candidate_configs``: per thread count, the best analytic
    estimates alternated with the largest tiles, best estimate first), then the rest of the
    estimate's ranking."""
    from pyvta.compiler.backend.vta.default import candidate_configs, ranked_configs
    from pyvta.isa import HwConfig

    if n <= 0:
        return []
    wl, ep = _workload(*task.args)
    ranked = ranked_configs(wl, ep, HwConfig())
    out = []
    for _, c in candidate_configs(ranked, n) + ranked:
        if c not in out:
            out.append(c)
        if len(out) == n:
            break
    return [space_point(task, c) for c in out]


CONV2D = Template(
    "vta.conv2d",
    _space,
    _instantiate,
    target="vta-sim",
    cost_unit="cycles",
    lower_fn=_lower,
    context_fn=_context,
    prior_fn=ranked_vta_configs,
)


def vta_conv2d_task(h, w, ic, oc, k, stride=1, pad=0) -> Task:
    return CONV2D.task(h, w, ic, oc, k, stride, pad)


def vta_layer_task(workload, epilogue) -> Task:
    """A network layer (``compiler.backend.vta`` ``ConvWorkload`` and lowering ``Epilogue``)."""

    return CONV2D.task(workload.to_dict(), epilogue.to_dict())


def task_layer(task: Task):
    """``(ConvWorkload, Epilogue)`` a VTA task measures."""
    return _workload(*task.args)


def conv_config(config):
    """The backend's ``ConvConfig`` of a point of a VTA task's space."""
    from pyvta.compiler.backend.vta.config import ConvConfig

    d = dict(config)
    d["gemm_loops"] = tuple(d["gemm_loops"].split(","))
    return ConvConfig(**d)


def space_point(task: Task, conv):
    """The point of a VTA task's space for a backend ``ConvConfig`` (``conv_config``'s inverse)."""
    d = conv.to_dict()
    d["gemm_loops"] = _loops_key(d["gemm_loops"])
    return task.space.config(d)


def default_vta_config(task: Task):
    """The backend's analytic default for this workload, as a point of the task's space."""
    from pyvta.compiler.backend.vta.default import default_config
    from pyvta.isa import HwConfig

    wl, ep = _workload(*task.args)
    return space_point(task, default_config(wl, ep, HwConfig()))


@dataclass(frozen=True, eq=False)
class LoweredStream:
    """A candidate's instruction stream (iterating gives it) and a DRAM image holding only its
    micro-ops (``cost.uop_image``), from which the cycle model sees its kernels' rows: a tile
    whose GEMM micro-ops wait on each other's ACC rows measures as slow as the RTL runs it."""

    insns: list
    dram: np.ndarray

    def __iter__(self):
        return iter(self.insns)

    def __len__(self) -> int:
        return len(self.insns)


class VtaCycleBackend(Backend):
    """``build``: lower to a VTA instruction stream (``FitError`` -> invalid) with the
    config's epilogue as the network lowers it (``operator.config_epilogue``: the GEMM or ALU
    bias), and its micro-ops (``LoweredStream``); ``run``: the cycle model's total for that
    stream (no execution, no data)."""

    def build(self, task, config):
        from pyvta.compiler.backend.vta.config import FitError
        from pyvta.compiler.backend.vta.conv2d import DramMap, lower_conv2d
        from pyvta.compiler.backend.vta.cost import uop_image
        from pyvta.compiler.backend.vta.operator import config_epilogue

        wl, ep, cfg, hw = task.instantiate(config)
        try:
            ep = config_epilogue(wl, ep, cfg, hw)
            dram = DramMap.disjoint(wl, hw)
            low = lower_conv2d(wl, ep, cfg, hw, dram)
        except FitError as e:
            raise InvalidConfig(str(e)) from None
        return LoweredStream(low.insns, uop_image(dram.uops, low.uops, hw))

    def run(self, task, config, artifact, repeats):
        from pyvta import sim

        hw = task.instantiate(config)[3]
        image = getattr(artifact, "dram", None)
        cycles = float(sim.cycles_of(list(artifact), hw, dram=image).total_cycles)
        return [cycles]  # deterministic: repeats add nothing


class VtaDeviceBackend(Backend):
    """Measures candidates on a ``driver.Device`` opened by name (``"rtl"``, ``"sim"``, a board):
    ``build`` lowers the candidate's relocatable kernel (zero constants); ``run`` loads it onto the
    device and launches it once, and its cost is the launch's ``Stats.cycles`` (the RTL's CYCLES
    register; the simulator's cycle model). One device per run worker, opened at its first run."""

    def __init__(self, device: str, **device_kwargs):
        self.device_name, self.device_kwargs = device, device_kwargs
        self._device = None

    def __getstate__(self):
        return {**self.__dict__, "_device": None}  # a device stays in the process that opened it

    def build(self, task, config):
        from pyvta.compiler.backend.vta.config import FitError
        from pyvta.compiler.backend.vta.operator import measurement_kernel

        wl, ep, cfg, hw = task.instantiate(config)
        try:
            return measurement_kernel(wl, ep, cfg, hw)
        except FitError as e:
            raise InvalidConfig(str(e)) from None

    def run(self, task, config, artifact, repeats):
        from pyvta import driver
        from pyvta.driver.kernel import RegionKind, load_kernel

        hw = task.instantiate(config)[3]
        if self._device is None or self._device.config != hw:
            self._device = driver.open(self.device_name, config=hw, **self.device_kwargs)
        self._device.reset()
        loaded = load_kernel(self._device, artifact)
        zeros = {
            r.name: np.zeros(r.nbytes, np.uint8) for r in artifact.regions_of(RegionKind.INPUT)
        }
        _, result = loaded.run(zeros, recurring=True)  # a remote device gets them once
        if result.stats is None:
            raise RuntimeError(f"device {self.device_name!r} reports no cycle counts")
        return [float(result.stats.cycles)]
