"""Measurement fan-out on Dask (tuner.distributed): two sim-backed device servers on 127.0.0.1, one
in-process Dask worker per device; the costs equal the local simulator's, both devices take work,
and a device that dies mid-run loses only its in-flight candidate, the other takes the rest."""

import json
import threading
import time

import pytest

from pyvta.driver import SimDevice
from pyvta.driver.remote.server import ServerThread
from pyvta.isa import HwConfig
from pyvta.testing.remote import KEY
from pyvta.tuner.cli_support import parse_workload
from pyvta.tuner.measure import InProcessMeasurer
from pyvta.tuner.vta import VtaDeviceBackend

pytest.importorskip("distributed", reason="needs the distributed extra (pyvta[distributed])")

from pyvta.tuner.distributed import DaskMeasurer  # noqa: E402

N_CONFIGS = 6


class _DyingSim(SimDevice):
    """A simulator whose server is stopped during its ``die_at``-th launch (its board unplugged)."""

    def __init__(self, die_at: int):
        super().__init__(HwConfig())
        self.die_at, self.launches, self.server = die_at, 0, None

    def launch(self, insn_addr, insn_count):
        self.launches += 1
        if self.launches == self.die_at:
            threading.Thread(target=self.server.stop).start()
            time.sleep(0.5)  # the session is cancelled meanwhile: no answer goes back
        return super().launch(insn_addr, insn_count)


@pytest.fixture(scope="module")
def task_and_reference():
    task = parse_workload("vta:8,8,32,32,3,1,1")
    configs = task.prior(N_CONFIGS)
    ref = InProcessMeasurer(VtaDeviceBackend("sim"), repeats=1).measure(task, configs)
    assert all(r.ok for r in ref)
    return task, configs, [r.costs for r in ref]


def test_fanout_over_two_servers_equals_local(task_and_reference):
    task, configs, want = task_and_reference
    with (
        ServerThread(SimDevice(HwConfig()), KEY) as a,
        ServerThread(SimDevice(HwConfig()), KEY) as b,
    ):
        devices = [f"tcp://{a.address}", f"tcp://{b.address}"]
        seen = []
        with DaskMeasurer(devices, {"key": KEY}) as m:
            got = m.measure(task, configs, lambda pos, res: seen.append(pos))
            summary = m.summary()
    print(summary)
    assert [r.costs for r in got] == want
    assert sorted(seen) == list(range(N_CONFIGS))  # each reported once
    assert [s.measured for s in m.shares] and all(s.measured > 0 for s in m.shares)
    assert sum(s.measured for s in m.shares) == N_CONFIGS and "lost" not in summary


def test_a_device_dying_mid_run_moves_its_share(task_and_reference):
    task, configs, want = task_and_reference
    dying = _DyingSim(die_at=2)
    with ServerThread(SimDevice(HwConfig()), KEY) as a, ServerThread(dying, KEY) as b:
        dying.server = b
        devices = [f"tcp://{a.address}", f"tcp://{b.address}"]
        seen = []
        with DaskMeasurer(devices, {"key": KEY}) as m:
            got = m.measure(task, configs, lambda pos, res: seen.append(pos))
            summary = m.summary()
    print(summary)
    assert sorted(seen) == list(range(N_CONFIGS))  # nothing lost, nothing repeated
    errors = [r for r in got if not r.ok]
    assert len(errors) == 1 and "lost while measuring" in errors[0].msg
    assert all(r.costs == w for r, w in zip(got, want, strict=True) if r.ok)
    alive, lost = m.shares
    assert lost.lost and lost.measured == 2 and lost.errors == 1
    assert alive.lost is None and alive.measured == N_CONFIGS - 2
    assert "lost:" in summary


def test_cli_tune_with_devices(tmp_path, capsys):
    from pyvta.cli import main

    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    log = tmp_path / "log.jsonl"
    with (
        ServerThread(SimDevice(HwConfig()), KEY) as a,
        ServerThread(SimDevice(HwConfig()), KEY) as b,
    ):
        argv = ["tune", "vta:8,8,32,32,3,1,1", "--trials", "6", "--tuner", "random"]
        argv += ["--device", f"tcp://{a.address},tcp://{b.address}", "--key-file", str(key_file)]
        assert main([*argv, "--log", str(log), "--no-progress", "--first", "0"]) == 0
    out = capsys.readouterr().out
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len({r["index"] for r in records}) == len(records) == 6
    assert f"tcp://{a.address}" in out and "measured" in out
    assert main(["tune", "vta:C9", "--device", "sim", "--devices", "tcp://x:1"]) == 2
    capsys.readouterr()
    assert main(["tune", "gemm:8,8,8", "--devices", "tcp://x:1"]) == 2  # old spelling, CPU task
    err = capsys.readouterr().err
    assert "notice: --devices tcp://x:1 is the old spelling of --device tcp://x:1" in err
    assert "--device(s) measure VTA workloads" in err


def test_an_existing_cluster_by_scheduler_address(task_and_reference):
    from distributed import LocalCluster

    from pyvta.tuner.distributed import resource_name

    task, configs, want = task_and_reference
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=False,
            protocol="tcp://",
            host="127.0.0.1",
            dashboard_address=None,
            resources={resource_name(0): 1},
        ) as cluster,
        ServerThread(SimDevice(HwConfig()), KEY) as a,
        DaskMeasurer(
            [f"tcp://{a.address}"], {"key": KEY}, scheduler=cluster.scheduler_address
        ) as m,
    ):
        got = m.measure(task, configs[:3])
    assert [r.costs for r in got] == want[:3] and m.shares[0].measured == 3
