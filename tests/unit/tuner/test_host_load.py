"""``tuner.host_load``: the share of the host's CPUs the hypervisor kept (steal) and other
processes used while something was timed."""

from __future__ import annotations

import os

from pyvta.tuner import host_load
from pyvta.tuner.host_load import HostLoad, LoadMeter, _between, _Sample


def _ticks(**kw):
    return {k: kw.get(k, 0) for k in host_load.STAT_FIELDS}


def test_steal_and_other_processes_from_two_samples():
    """Two CPUs for 1 s (200 ticks at 100 a second): 40 ticks stolen, 100 busy of which 0.5 s
    were this process's: others 0.5 s of 2 s, steal 40 of 200 ticks."""
    hz = os.sysconf("SC_CLK_TCK")
    a = _Sample(_ticks(), 10.0, 0.0, 2)
    b = _Sample(_ticks(user=hz // 2 + hz // 5, system=3 * hz // 10, idle=3 * hz // 5,
                       steal=2 * hz // 5), 10.5, 1.0, 2)  # fmt: skip
    load = _between(a, b)
    assert load == HostLoad(steal=0.2, others=0.25, cpus=2, wall_s=1.0)
    assert str(load) == "steal 20.0%, other processes 25.0%"
    # this process's own time is never another's: more of it than the busy ticks gives 0
    assert _between(a, _Sample(b.ticks, 12.0, 1.0, 2)).others == 0.0
    assert _between(a, a) is None  # no tick passed


def test_the_meter_reads_this_host(monkeypatch, tmp_path):
    with LoadMeter() as m:
        sum(range(2_000_000))
    if os.path.exists("/proc/stat"):
        assert m.load is not None and m.load.cpus >= 1
        assert 0 <= m.load.steal <= 1 and 0 <= m.load.others <= 1
    monkeypatch.setattr(host_load, "PROC_STAT", tmp_path / "none")  # not Linux: nothing
    with LoadMeter() as m:
        pass
    assert m.load is None
