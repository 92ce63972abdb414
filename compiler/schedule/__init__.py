"""Schedules: loop transformations as recorded, replayable steps."""

from pyvta.compiler.schedule.intrin import TensorIntrin, TensorRegion
from pyvta.compiler.schedule.schedule import LoopAxis, Schedule, Stage, create_schedule
from pyvta.compiler.schedule.scope import ScopeInfo, ScopeTable
from pyvta.compiler.schedule.step import Step, apply_step, replay, steps_from_json, steps_to_json

__all__ = [
    "LoopAxis",
    "Schedule",
    "ScopeInfo",
    "ScopeTable",
    "Stage",
    "Step",
    "TensorIntrin",
    "TensorRegion",
    "apply_step",
    "create_schedule",
    "replay",
    "steps_from_json",
    "steps_to_json",
]
