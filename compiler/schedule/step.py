"""Schedule decisions as plain records.

A ``Step`` is ``kind`` + ``stage`` name + JSON-able ``args``; its JSON form is flat, e.g.
``{"kind": "split", "stage": "C", "axis": "i", "factor": 32}``. A schedule is the ordered list
of its steps, so a tuner can enumerate, featurize, store and replay it (``replay``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

STEP_KINDS = (
    "split",
    "tile",
    "reorder",
    "fuse",
    "compute_at",
    "compute_inline",
    "compute_root",
    "cache_read",
    "cache_write",
    "set_scope",
    "vectorize",
    "unroll",
    "parallel",
    "vthread",
    "bind",
    "tensorize",
)


@dataclass(frozen=True)
class Step:
    kind: str
    stage: str
    args: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in STEP_KINDS:
            raise ValueError(f"unknown step kind {self.kind!r} (allowed: {', '.join(STEP_KINDS)})")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "stage": self.stage, **self.args}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=False)

    @staticmethod
    def from_dict(d: dict) -> Step:
        d = dict(d)
        try:
            kind, stage = d.pop("kind"), d.pop("stage")
        except KeyError as e:
            raise ValueError(f"step record {d} lacks the {e.args[0]!r} field") from None
        return Step(kind, stage, d)

    @staticmethod
    def from_json(text: str) -> Step:
        return Step.from_dict(json.loads(text))


def steps_to_json(steps) -> str:
    return json.dumps([s.to_dict() for s in steps])


def steps_from_json(text: str) -> list[Step]:
    return [Step.from_dict(d) for d in json.loads(text)]


def apply_step(sch, step: Step, intrinsics: dict | None = None) -> None:
    """Apply one recorded ``step`` to schedule ``sch`` (which records it again)."""
    a = dict(step.args)
    if step.kind == "cache_read":
        sch.cache_read(sch.tensor(step.stage), a["scope"], [sch[r] for r in a["readers"]])
        return
    if step.kind == "cache_write":
        sch.cache_write(sch.tensor(step.stage), a["scope"])
        return
    st = sch[step.stage]
    if step.kind == "compute_at":
        st.compute_at(sch[a["target"]], a["axis"])
    elif step.kind == "tensorize":
        intrinsics = intrinsics or {}
        if a["intrin"] not in intrinsics:
            raise KeyError(
                f"step needs intrinsic {a['intrin']!r}; known: {sorted(intrinsics) or 'none'}"
            )
        st.tensorize(a["axis"], intrinsics[a["intrin"]])
    elif step.kind == "reorder":
        st.reorder(*a["axes"])
    elif step.kind == "fuse":
        st.fuse(*a["axes"])
    else:
        getattr(st, step.kind)(**a)


def replay(outputs, steps, intrinsics: dict | None = None):
    """A fresh schedule of ``outputs`` with ``steps`` applied in order."""
    from pyvta.compiler.schedule.schedule import create_schedule

    sch = create_schedule(outputs)
    for s in steps:
        apply_step(sch, s, intrinsics)
    return sch
