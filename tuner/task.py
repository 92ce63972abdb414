"""Tuning tasks: a workload (template + arguments) and its configuration space.

A ``Template`` is a pair of module-level functions, so tasks pickle into worker processes:

- ``space_fn(*args) -> ConfigSpace``: the knobs for this workload;
- ``instantiate_fn(config, *args) -> instance``: something a measurement backend can build
  (for compiler templates a ``(schedule, tensors)`` pair). It raises ``InvalidConfig`` for a
  point that does not fit (the tuner records it and never retries it).

Optional: ``lower_fn(config, *args)`` (loop IR, for IR features), ``reference_fn`` and
``context_fn(config, *args) -> float32 [width]``: cheap workload-aware ("context") features of a
point, the same width for every workload of the template (tile fractions, buffer occupancy, DMA
bytes per MAC, ...; no lowering), so a cost model trained on some workloads transfers to
others; an all-zero row for a point that does not fit. ``prior_fn(task, n) -> [Config]``: the
backend's own ``n`` most promising points (for VTA: the candidates its measured default tries,
then its analytic ranking), its analytic default first; ``pyvta tune`` measures them first
(``--first``), so a run starts from what the compiler would pick untuned.

VTA templates plug in the same way: their ``instantiate_fn`` returns a schedule for the VTA
backend and their measurer counts cycles (``cost_unit="cycles"``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pyvta.isa.errors import PyvtaError
from pyvta.tuner.space import Config, ConfigSpace


class InvalidConfig(PyvtaError, ValueError):
    """A point of the space that cannot be instantiated (does not fit the buffers, ...)."""


class WrongAnswer(RuntimeError):
    """A candidate that built and ran but computed a wrong result."""


@dataclass(frozen=True)
class Template:
    """``name`` e.g. ``"cpu.gemm"``; ``target`` the backend it is written for."""

    name: str
    space_fn: Callable[..., ConfigSpace]
    instantiate_fn: Callable[..., object]
    target: str = "llvm"
    cost_unit: str = "s"
    lower_fn: Callable[..., object] | None = None  # (config, *args) -> loop IR, for features
    reference_fn: Callable[..., object] | None = None  # (arrays, *args) -> expected output
    # (arrays, *args) -> the seeded arrays made what the kernel assumes of its inputs before
    # it is measured (a grouped conv: its packed weights zero past its groups' blocks)
    inputs_fn: Callable[..., list] | None = None
    context_fn: Callable[..., np.ndarray] | None = None  # (config, *args) -> float32 [width]
    prior_fn: Callable[..., list] | None = None  # (task, n) -> the backend's n best points
    # () -> the machine a measurement is made on (a tuning record's ``target``), and
    # (machine) -> how near a record's machine is to this one (higher: nearer)
    measured_on_fn: Callable[[], str] | None = None
    nearness_fn: Callable[[str], float] | None = None
    # the XGB tuner's linear-trend weight for this template's tasks (None: ``tuner.tuners.TREND``)
    trend: float | None = None

    def task(self, *args) -> Task:
        return Task(self, tuple(args), self.space_fn(*args))

    def inputs(self, arrays: list, args: tuple) -> list:
        """The arrays a measurement of a task with ``args`` runs on, made of the seeded
        ``arrays`` (``inputs_fn``; unchanged without one)."""
        return arrays if self.inputs_fn is None else self.inputs_fn(arrays, *args)


@dataclass(frozen=True)
class Task:
    """One workload to tune: ``template`` applied to JSON-able ``args``."""

    template: Template
    args: tuple
    space: ConfigSpace = field(compare=False)

    @property
    def name(self) -> str:
        return self.template.name

    @property
    def target(self) -> str:
        return self.template.target

    @property
    def cost_unit(self) -> str:
        return self.template.cost_unit

    @property
    def key(self) -> str:
        """Identifies the workload in logs: name, arguments and target."""
        return f"{self.name}{json.dumps(list(self.args))}@{self.target}"

    def measured_on(self) -> str:
        """The machine this task's measurements are made on ("" if the template does not
        say): what its tuning records name as their ``target``."""
        return self.template.measured_on_fn() if self.template.measured_on_fn else ""

    def nearness(self, machine: str) -> float:
        """How near ``machine`` (a record's ``target``) is to the one measured on here."""
        return self.template.nearness_fn(machine) if self.template.nearness_fn else 0.0

    def instantiate(self, config: Config):
        return self.template.instantiate_fn(config, *self.args)

    def lower(self, config: Config):
        """Loop IR of ``config`` (for IR features); None if the template has no ``lower_fn``."""
        if self.template.lower_fn is None:
            return None
        return self.template.lower_fn(config, *self.args)

    def context(self, config: Config) -> np.ndarray | None:
        """Context features of ``config`` (``float32 [width]``, zeros if it does not fit); None if
        the template has no ``context_fn``."""
        if self.template.context_fn is None:
            return None
        return self.template.context_fn(config, *self.args)

    def prior(self, n: int) -> list[Config]:
        """The backend's ``n`` most promising points, most promising first; empty if the
        template has no ``prior_fn``."""
        if self.template.prior_fn is None or n <= 0:
            return []
        return list(self.template.prior_fn(self, n))

    def __repr__(self):
        return f"Task({self.key}, {self.space})"


TEMPLATE_MODULES = ("vta", "cpu", "synthetic")  # the tuner's modules that define templates


def known_templates() -> dict[str, Template]:
    """The tuner's templates by name (those ``TEMPLATE_MODULES`` define or import, in that
    order; a module that does not import here is left out): what a log's task keys are rebuilt
    into, and what an error names as the templates that have something."""
    import importlib

    out: dict[str, Template] = {}
    for mod in TEMPLATE_MODULES:
        try:
            m = importlib.import_module(f"pyvta.tuner.{mod}")
        except ImportError:
            continue
        for v in vars(m).values():
            if isinstance(v, Template):
                out.setdefault(v.name, v)
    return out
