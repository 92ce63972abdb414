"""VTA adapter: the VTA conv2d template (``compiler.backend.vta``) as a tuning task, measured
by the simulator's cycle model (``sim.cycles_of``). Costs are cycles (deterministic: one repeat
is enough).

``vta_conv2d_task(h, w, ic, oc, k, stride, pad)``: batch 1, fused epilogue with bias, on the
default ``isa.HwConfig`` (the PYNQ-Z1 build). ``vta_layer_task(workload, epilogue)``: one layer
of a network exactly as it runs there (padding, block, fused epilogue with its lowering choices;
see ``tuner.network``); its arguments are the two dataclasses' fields. Knobs: ``tile_h``, ``tile_w`` (output pixels),
``tile_ci``, ``tile_co`` (16-channel blocks), ``vthreads`` and ``gemm_loops`` (which two
dimensions the GEMM's hardware loops take). Points that do not fit the on-chip buffers are
``InvalidConfig`` (recorded, never retried).
The template has a ``lower_fn`` (the loop IR of its tensor-expression schedule), so the
``curve`` / ``loop`` IR features work on it.

This module is the tuner's only coupling to the VTA backend; it follows that backend's API as of
this writing (``ConvWorkload``, ``Epilogue``, ``ConvConfig``, ``check_fit``, ``config_space``,
``lower_conv2d``, ``DramMap.disjoint``, ``default_config``).
"""

from __future__ import annotations

from tuner.measure import Backend
from tuner.space import ChoiceKnob, ConfigSpace
from tuner.task import InvalidConfig, Task, Template


def _workload(*args):
    """``(ConvWorkload, Epilogue)`` from a task's arguments: ``(h, w, ic, oc, k, stride, pad)``
    or ``(workload fields, epilogue fields)`` (two dicts) for a network layer."""
    from compiler.backend.vta.workload import ConvWorkload, Epilogue

    if len(args) == 2:
        return ConvWorkload(**args[0]), Epilogue(**args[1])
    h, w, ic, oc, k, stride, pad = args
    return ConvWorkload(h, w, ic, oc, k, k, stride, pad), Epilogue(bias=True)


def _loops_key(loops) -> str:
    return ",".join(loops)


def _space(*args) -> ConfigSpace:
    from compiler.backend.vta.config import config_space

    wl, _ = _workload(*args)
    knobs = []
    for name, values in config_space(wl).items():
        if name == "gemm_loops":
            knobs.append(ChoiceKnob(name, [_loops_key(v) for v in values]))
        else:
            knobs.append(ChoiceKnob(name, list(values)))
    return ConfigSpace(knobs)


def _instantiate(config, *args):
    """``(workload, epilogue, ConvConfig, HwConfig)``; ``InvalidConfig`` if it does not fit."""
    from compiler.backend.vta.config import FitError, check_fit
    from isa import HwConfig

    wl, ep = _workload(*args)
    cfg = conv_config(config)
    hw = HwConfig()
    try:
        check_fit(wl, ep, cfg, hw)
    except FitError as e:
        raise InvalidConfig(str(e)) from None
    return wl, ep, cfg, hw


def _lower(config, *args):
    """Loop IR of the template's tensor-expression schedule for ``config``
    (``compiler.backend.vta.te_template.conv2d_schedule`` lowered with ``compiler.lower``): the
    loop program the instruction stream follows, for IR features (``tuner.features``).
    ``InvalidConfig`` if the point does not fit."""
    from compiler import lower
    from compiler.backend.vta.te_template import conv2d_schedule

    wl, _, cfg, hw = _instantiate(config, *args)
    sch, tensors = conv2d_schedule(wl, cfg, hw)
    return lower(sch, tensors)


CONV2D = Template(
    "vta.conv2d", _space, _instantiate, target="vta-sim", cost_unit="cycles", lower_fn=_lower
)


def vta_conv2d_task(h, w, ic, oc, k, stride=1, pad=0) -> Task:
    return CONV2D.task(h, w, ic, oc, k, stride, pad)


def vta_layer_task(workload, epilogue) -> Task:
    """A network layer (``compiler.backend.vta`` ``ConvWorkload`` and lowering ``Epilogue``)."""
    import dataclasses

    return CONV2D.task(dataclasses.asdict(workload), dataclasses.asdict(epilogue))


def task_layer(task: Task):
    """``(ConvWorkload, Epilogue)`` a VTA task measures."""
    return _workload(*task.args)


def ranked_vta_configs(task: Task, n: int):
    """The backend's ``n`` best configs by its analytic estimate, as points of the space."""
    from compiler.backend.vta.default import ranked_configs
    from isa import HwConfig

    wl, ep = _workload(*task.args)
    return [space_point(task, c) for _, c in ranked_configs(wl, ep, HwConfig())[:n]]


def conv_config(config):
    """The backend's ``ConvConfig`` of a point of a VTA task's space."""
    from compiler.backend.vta.config import ConvConfig

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
    from compiler.backend.vta.default import default_config
    from isa import HwConfig

    wl, ep = _workload(*task.args)
    return space_point(task, default_config(wl, ep, HwConfig()))


class VtaCycleBackend(Backend):
    """``build``: lower to a VTA instruction stream (``FitError`` -> invalid); ``run``: the cycle
    model's total for that stream (no execution, no data)."""

    def build(self, task, config):
        from compiler.backend.vta.config import FitError
        from compiler.backend.vta.conv2d import DramMap, lower_conv2d

        wl, ep, cfg, hw = task.instantiate(config)
        try:
            return lower_conv2d(wl, ep, cfg, hw, DramMap.disjoint(wl, hw)).insns
        except FitError as e:
            raise InvalidConfig(str(e)) from None

    def run(self, task, config, artifact, repeats):
        import sim

        hw = task.instantiate(config)[3]
        cycles = float(sim.cycles_of(list(artifact), hw).total_cycles)
        return [cycles]  # deterministic: repeats add nothing
