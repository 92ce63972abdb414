"""Tuning CPU kernels for a board's CPU (``pyvta tune ... --target arm-a9 --device tcp://BOARD``):
the host cross-compiles each candidate for the board's CPU (``compiler.backend.llvm.target.
BOARD_CPUS``, by name or alias) into a shared object, and ``pyvta serve --device cpu`` on the
board times it (``driver.ops_cpu``, the device server's ``measure_cpu``: one protocol for every
device). The board needs no compiler: ctypes loads the kernel there.

    task = board_task(conv2d_task(...), "cortex-a9")     # records say "armv7a generic cortex-a9"
    backend = CpuDeviceBackend("tcp://board:9190", "cortex-a9")

The spaces are the templates' own (their register tiles are planned for this host's vector
width; every point is valid code on the board, the best ones for it may be missing). The
board's output is checked against the template's reference (``wrong_answer`` otherwise).
Costs are seconds per call there (under emulation: no figure of the board's).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from pyvta.tuner.cpu_measure import check_output
from pyvta.tuner.measure import Backend, LocalMeasurer
from pyvta.tuner.task import Task


def board_cpu_of(target: str | None):
    """The board CPU (``BoardCpu``) a ``--target`` names (``arm-a9``, ``cortex-a53``, a
    triple), or None for a compile target's name (``cpu``, ``vta``, ...)."""
    from pyvta.compiler.backend.llvm.target import BOARD_CPUS, board_cpu

    names = {n for c in BOARD_CPUS.values() for n in (c.name, c.alias)}
    if target is None or (target not in names and "-linux-" not in target):
        return None
    return board_cpu(target)


def board_measured_on(cpu: str) -> str:
    """What a record measured on the board CPU ``cpu`` names as its machine
    (``CpuTarget.description``: ``armv7a generic cortex-a9``)."""
    from pyvta.compiler.backend.llvm.target import CpuTarget

    return CpuTarget.cross(cpu).description


def board_nearness(cpu: str, machine: str) -> float:
    """4 for a record of this board CPU, 1 for another CPU of its architecture, else 0."""
    here = board_measured_on(cpu)
    if machine == here:
        return 4.0
    return 1.0 if machine.split()[:1] == here.split()[:1] else 0.0


def board_task(task: Task, cpu: str) -> Task:
    """``task`` (a CPU template's) measured on the board CPU ``cpu``: the same workload and
    space, its records naming that CPU."""
    template = dataclasses.replace(
        task.template,
        measured_on_fn=functools.partial(board_measured_on, cpu),
        nearness_fn=functools.partial(board_nearness, cpu),
    )
    return Task(template, task.args, task.space)


@dataclass(frozen=True)
class CrossKernel:
    """A candidate built for the board: the shared object for ``triple`` and its kernel."""

    triple: str
    shared: bytes
    sig: object  # runtime.cpu_code.KernelSig


def _inputs(sig, seed: int = 0) -> list[np.ndarray]:
    """Seeded arrays for ``sig``'s parameters (standard normal floats, small integers)."""
    rng = np.random.default_rng(seed)
    out = []
    for p in sig.params:
        if np.dtype(p.dtype).kind == "f":
            out.append(rng.standard_normal(p.shape).astype(p.dtype))
        else:
            out.append(rng.integers(-8, 8, p.shape).astype(p.dtype))
    return out


class CpuDeviceBackend(Backend):
    """``build``: the candidate lowered and cross-compiled for the board CPU ``cpu`` (a
    ``BOARD_CPUS`` name, or a ``compiler.backend.llvm.CpuTarget`` of one thread, e.g. this
    host's) into a shared object; ``run``: timed by the device ``device`` (``tcp://HOST:PORT`` served with
    ``--device cpu``, or ``cpu`` itself when host and board CPU are one architecture), its
    output checked against the template's reference. ``device_kwargs`` go to ``driver.open``
    (``key_file=``)."""

    def __init__(
        self, device: str, cpu: str, min_repeat_ms: float = 20.0, check: bool = True, **kwargs
    ):
        self.device_name, self.cpu = device, cpu
        self.min_repeat_ms, self.check, self.device_kwargs = min_repeat_ms, check, kwargs
        self._device = None
        self._refs: dict = {}

    def __getstate__(self):
        return {**self.__dict__, "_device": None}  # a device stays in the process that opened it

    def build(self, task, config):
        from pyvta import compiler
        from pyvta.compiler.backend.llvm.shared import for_llvm, shared_object
        from pyvta.compiler.backend.llvm.target import CpuTarget
        from pyvta.compiler.graph.cpu_cross import kernel_sig

        target = self.cpu if isinstance(self.cpu, CpuTarget) else CpuTarget.cross(self.cpu)
        sch, args = task.instantiate(config)  # InvalidConfig for a point that does not fit
        func = for_llvm(compiler.lower(sch, args, name="pyvta_tune_kernel"))
        return CrossKernel(target.triple, shared_object([func], target), kernel_sig(func))

    def run(self, task, config, artifact, repeats):
        from pyvta import driver

        if self._device is None:
            self._device = driver.open(self.device_name, **self.device_kwargs)
        values = task.template.inputs(_inputs(artifact.sig), task.args)
        costs, _, outs = self._device.measure_cpu(
            artifact.triple, artifact.shared, artifact.sig, values, repeats, 0, self.min_repeat_ms
        )
        if self.check and task.template.reference_fn is not None:
            written = iter(outs)
            names = set(artifact.sig.written)
            arrays = [next(written) if p.name in names else v
                      for p, v in zip(artifact.sig.params, values, strict=True)]  # fmt: skip
            check_output(self._refs, task, arrays)
        return costs


def board_measurer(devices: list[str], cpu: str, repeats: int, scheduler=None, **device_kwargs):
    """The measurer of a board CPU's candidates: one device (builds in parallel here, one run
    worker holding the connection), or several fanned out with Dask (``DaskMeasurer``)."""
    if len(devices) > 1 or scheduler:
        from pyvta.tuner.distributed import DaskMeasurer

        backend_cls = functools.partial(CpuDeviceBackend, cpu=cpu)
        return DaskMeasurer(devices, device_kwargs, scheduler=scheduler, backend_cls=backend_cls)
    backend = CpuDeviceBackend(devices[0], cpu, **device_kwargs)
    return LocalMeasurer(
        backend, repeats=repeats, build_timeout_s=300.0, run_timeout_s=900.0, n_run_workers=1
    )
