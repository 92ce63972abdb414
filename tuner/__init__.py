"""pyvta tuner: search spaces, features, cost models, search, measurement and tuning logs
(AutoTVM style).

    from pyvta.tuner import tune, apply_best
    from pyvta.tuner.cpu import gemm_task
    res = tune(gemm_task(512, 512, 512), 200, log="gemm.jsonl", plot="gemm.png")
    cfg = apply_best("gemm.jsonl", gemm_task(512, 512, 512))

Modules, in data-flow order:

- ``space``: knobs (split, reorder, choice, bool) and ``ConfigSpace`` (index <-> config, JSON,
  sampling, neighbour moves, knob features);
- ``task``: ``Template`` (space + instantiate + optional lower for features) and ``Task``;
- ``features`` / ``irfeatures``: knob, loop and fixed-length curve features of the loop IR;
- ``model``: XGBoost cost model (``rank:pairwise`` or regression) plus a linear trend that
  extrapolates past the best point measured (weighted per template, ``Template.trend``: the
  CPU templates rank with the trees alone), transfer via a global base;
- ``search``: parallel simulated annealing on model scores;
- ``tuners``: ``ModelTuner`` (XGB + SA, eps-greedy, diversity), ``RandomTuner``, ``GATuner``;
- ``measure`` / ``workers``: backends, isolated parallel builds and lone runs with timeouts;
- ``log``: append-only JSON-lines log, ``apply_best``, resume, data for transfer learning;
- ``tune``: the loop with progress bar and tuning-curve plot; ``cli_support``: ``pyvta tune``; ``comparison``: the search and transfer benchmarks' measurers;
- ``cpu``: the compiler's CPU templates and the llvmlite backend (compiler adapter);
- ``synthetic``: analytic tasks and fault-injecting backends for tests and benchmarks.

A VTA template is a ``Template`` whose ``instantiate_fn`` returns a VTA schedule, with a
``Backend`` whose ``run`` returns cycle counts (``cost_unit="cycles"``).
"""

from pyvta.tuner.log import apply_best
from pyvta.tuner.space import (
    BoolKnob,
    ChoiceKnob,
    Config,
    ConfigSpace,
    ReorderKnob,
    SplitKnob,
    TileKnob,
)
from pyvta.tuner.task import InvalidConfig, Task, Template
from pyvta.tuner.tune import TuneResult, tune

__all__ = [
    "BoolKnob",
    "ChoiceKnob",
    "Config",
    "ConfigSpace",
    "InvalidConfig",
    "ReorderKnob",
    "SplitKnob",
    "TileKnob",
    "Task",
    "Template",
    "TuneResult",
    "apply_best",
    "tune",
]
