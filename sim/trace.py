"""Chrome / Perfetto trace export of the cycle model's module activity."""

from __future__ import annotations

import json
from pathlib import Path

from pyvta.sim.cycle import CycleReport

_TRACKS = ("fetch", "load", "compute", "store")


def trace_json(report: CycleReport) -> dict:
    """Trace Event Format: one track per module, one complete event per instruction (us at clock)."""
    mhz = report.timing.clock_mhz
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "pyvta accelerator"}}
    ]
    for tid, name in enumerate(_TRACKS):
        events.append(
            {"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}
        )
    tids = {name: tid for tid, name in enumerate(_TRACKS)}
    for e in report.events:
        events.append(
            {
                "name": e.name,
                "cat": e.module,
                "ph": "X",
                "pid": 1,
                "tid": tids[e.module],
                "ts": e.start_cycle / mhz,
                "dur": e.dur_cycles / mhz,
                "args": {"insn": e.index, "start_cycle": e.start_cycle, "cycles": e.dur_cycles},
            }
        )
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def write_trace(report: CycleReport, path: str | Path) -> None:
    """Write a trace file that ui.perfetto.dev and chrome://tracing open."""
    Path(path).write_text(json.dumps(trace_json(report)))
