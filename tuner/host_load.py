"""What else had the host's CPUs while something was timed: the share the hypervisor kept for
other guests (steal) and the share other processes used, from Linux's ``/proc/stat`` and this
process's CPU time (all its threads).

The hosts we measure on run in two speeds for whole minutes at a time (a MobileNetV2 descent's
default network: 2.14-2.40 ms in most passes, 2.97-3.22 ms in others; docs/measurements.md), and
what took the cores then was not seen. A confirmation in the network (``in_network_confirm``)
and ``benchmarks/cpu_network.py`` record it with their times, so a slow spell shows whether the
hypervisor or a neighbour process had the cores, or neither (the CPU itself ran slower).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")
# /proc/stat's "cpu" line, in order (proc(5)); guest times are inside user and nice
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class HostLoad:
    """Over a span: ``steal`` and ``others`` as fractions of all the host's CPUs' time
    (``cpus`` of them), and the span's wall seconds."""

    steal: float
    others: float
    cpus: int
    wall_s: float

    def to_json(self) -> dict:
        return {"steal": round(self.steal, 4), "others": round(self.others, 4), "cpus": self.cpus}

    def __str__(self) -> str:
        return f"steal {100 * self.steal:.1f}%, other processes {100 * self.others:.1f}%"


@dataclass(frozen=True)
class _Sample:
    ticks: dict  # STAT_FIELDS -> clock ticks, all CPUs together
    own_s: float  # this process's CPU seconds (user + system, every thread)
    at_s: float
    cpus: int


def _sample() -> _Sample | None:
    try:
        lines = PROC_STAT.read_text().splitlines()
    except OSError:
        return None  # not Linux
    head = lines[0].split()
    if head[0] != "cpu" or len(head) < 1 + len(STAT_FIELDS):
        return None
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    t = os.times()
    ticks = dict(zip(STAT_FIELDS, map(int, head[1 : 1 + len(STAT_FIELDS)]), strict=True))
    return _Sample(ticks, t.user + t.system, time.monotonic(), cpus)


class LoadMeter:
    """``with LoadMeter() as m: ...`` then ``m.load``: the :class:`HostLoad` over the block
    (None where ``/proc/stat`` cannot be read, or no tick passed)."""

    def __init__(self) -> None:
        self.load: HostLoad | None = None
        self._start: _Sample | None = None

    def __enter__(self) -> LoadMeter:
        self._start = _sample()
        return self

    def __exit__(self, *exc) -> None:
        end = _sample()
        if self._start is not None and end is not None:
            self.load = _between(self._start, end)


def _between(a: _Sample, b: _Sample) -> HostLoad | None:
    d = {k: b.ticks[k] - a.ticks[k] for k in STAT_FIELDS}
    total = sum(d.values())
    if total <= 0:
        return None
    tick_s = 1 / os.sysconf("SC_CLK_TCK")
    busy = total - d["idle"] - d["iowait"] - d["steal"]
    others = max(0.0, busy * tick_s - (b.own_s - a.own_s)) / (total * tick_s)
    return HostLoad(d["steal"] / total, min(1.0, others), b.cpus, b.at_s - a.at_s)
