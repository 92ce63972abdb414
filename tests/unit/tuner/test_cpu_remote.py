"""Tuning a board's CPU kernels over ``pyvta serve --device cpu``: the host cross-compiles each
candidate into a shared object, the served CPU device times it (``measure_cpu``) and sends the
output back, checked here against the template's reference; the records name the CPU measured.

Here the served CPU is this x86 host (kernels cross-compiled for it as for a board); the slow
test serves the emulated armhf userland (qemu-arm) and tunes ``--target arm-a9`` through the CLI.
"""

import json
import subprocess
import time

import numpy as np
import pytest

from pyvta import driver
from pyvta.compiler.backend.llvm.target import CpuTarget
from pyvta.driver.device import DeviceError
from pyvta.driver.ops_cpu import CpuDevice
from pyvta.driver.remote.server import ServerThread
from pyvta.tuner.cpu import gemm_task
from pyvta.tuner.cpu_remote import (
    CpuDeviceBackend,
    board_cpu_of,
    board_measurer,
    board_task,
)
from pyvta.tuner.log import read_records
from pyvta.tuner.measure import InProcessMeasurer
from pyvta.tuner.tune import tune

SEED = 0
HOST = CpuTarget.host(1)  # this host's CPU as the "board" a kernel is cross-compiled for


def _gemm():
    return gemm_task(8, 32, 16)


def test_tuning_over_a_served_cpu_device_lands_in_the_log(tmp_path):
    """``board_measurer`` (the CLI's: builds in worker processes, one run worker holding the
    connection) over a served CPU device: every trial measured, none an error, all logged with
    the machine ``board_task`` names."""
    log = tmp_path / "t.jsonl"
    task = board_task(_gemm(), "cortex-a9")  # the records' machine; the code is for HOST here
    print(f"seed {SEED}")
    with ServerThread(CpuDevice(), None) as server:
        m = board_measurer([f"tcp://{server.address}"], HOST, repeats=2)
        with m:
            res = tune(task, 4, m, tuner="random", batch_size=2, log=str(log), seed=SEED)
    assert len(res.history) == 4 and res.n_errors == 0 and res.best_cost > 0
    records = read_records(log, task)
    assert len(records) == 4
    assert {r.target for r in records} == {"armv7a generic cortex-a9"}
    assert all(r.result.ok and len(r.result.costs) == 2 for r in records)


class _WrongCpu(CpuDevice):
    """A CPU device whose kernels' outputs come back off by one in one element."""

    def measure_cpu(self, *args, **kwargs):
        costs, number, outs = super().measure_cpu(*args, **kwargs)
        outs[0].reshape(-1)[0] += 1.0
        return costs, number, outs


def test_a_wrong_output_from_the_board_is_a_wrong_answer():
    task = _gemm()
    config = task.space.get(0)
    with ServerThread(CpuDevice(), None) as good, ServerThread(_WrongCpu(), None) as bad:
        results = [
            InProcessMeasurer(CpuDeviceBackend(f"tcp://{s.address}", HOST), 1).measure(
                task, [config]
            )[0]
            for s in (good, bad)
        ]
    assert results[0].ok, results[0].msg
    assert results[1].error == "wrong_answer" and "against the reference" in results[1].msg


def test_served_kernel_output_is_the_product_and_other_cpus_are_refused():
    backend = CpuDeviceBackend("cpu", HOST)
    task = _gemm()
    kernel = backend.build(task, task.space.get(0))
    rng = np.random.default_rng(SEED)
    a, b = (rng.standard_normal(p.shape).astype(np.float32) for p in kernel.sig.params[:2])
    c = np.zeros(kernel.sig.params[2].shape, np.float32)
    with ServerThread(CpuDevice(), None) as server, driver.open(f"tcp://{server.address}") as dev:
        costs, number, (out,) = dev.measure_cpu(
            kernel.triple, kernel.shared, kernel.sig, [a, b, c], 3
        )
        assert len(costs) == 3 and min(costs) > 0 and number >= 1
        assert np.allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
        with pytest.raises(DeviceError, match="aarch64.*do not run here"):
            dev.measure_cpu("aarch64-unknown-linux-gnu", kernel.shared, kernel.sig, [a, b, c], 1)
        with pytest.raises(DeviceError, match="no accelerator memory"):
            dev.alloc(64)
        with pytest.raises(DeviceError, match="repeats 0"):
            dev.measure_cpu(kernel.triple, kernel.shared, kernel.sig, [a, b, c], 0)


def test_an_accelerator_server_refuses_cpu_kernels():
    backend = CpuDeviceBackend("sim", HOST)
    task = _gemm()
    kernel = backend.build(task, task.space.get(0))
    arrays = [np.zeros(p.shape, np.float32) for p in kernel.sig.params]
    with (
        ServerThread(driver.open("sim"), None) as server,
        driver.open(f"tcp://{server.address}") as dev,
        pytest.raises(DeviceError, match="SimDevice measures no CPU kernels"),
    ):
        dev.measure_cpu(kernel.triple, kernel.shared, kernel.sig, arrays, 1)


def test_board_targets_and_the_cli_refusals(capsys, tmp_path):
    from pyvta.cli import main

    assert board_cpu_of("arm-a9").name == "cortex-a9"
    assert board_cpu_of("arm-a53").triple.startswith("aarch64")
    assert board_cpu_of("cpu") is None and board_cpu_of(None) is None
    assert main(["tune", "gemm:8,32,16", "--target", "arm-a9"]) == 2
    assert "give --device tcp://BOARD:PORT" in capsys.readouterr().err
    assert main(["tune", "vta:C6", "--target", "arm-a9", "--device", "tcp://h:1"]) == 2
    assert "tunes CPU operators, not vta.conv2d" in capsys.readouterr().err
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")
    assert main(["tune", str(model), "--target", "arm-a53", "--device", "tcp://h:1"]) == 2
    assert "not yet a network's layers" in capsys.readouterr().err


def test_two_served_cpus_share_a_run_through_dask(tmp_path):
    """``--device A,B`` for a board CPU: the candidates fan out over both servers (Dask)."""
    pytest.importorskip("distributed", reason="needs pyvta[distributed]")
    task = _gemm()
    with ServerThread(CpuDevice(), None) as s1, ServerThread(CpuDevice(), None) as s2:
        m = board_measurer([f"tcp://{s1.address}", f"tcp://{s2.address}"], HOST, repeats=1)
        with m:
            results = m.measure(task, [task.space.get(i) for i in range(6)])
        print(m.summary())
        assert all(r.ok for r in results), [r.msg for r in results if not r.ok]
        assert [s.measured for s in m.shares] and sum(s.measured for s in m.shares) == 6


@pytest.mark.slow
def test_tune_arm_a9_over_serve_on_the_emulated_armhf(tmp_path):
    """``pyvta serve --device cpu`` under qemu-arm (Debian armhf, pyvta's wheel without extras)
    and ``pyvta tune gemm:... --target arm-a9 --device tcp://...`` here: every trial measured
    there, none an error, the records naming the Cortex-A9. (Emulated times: no figure.)"""
    import os

    from pyvta.cli import main
    from pyvta.testing.arm import arm_python, pyvta_site

    try:
        python = arm_python("armhf")
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        pytest.skip(f"needs the armhf userland (scripts/arm_userland.sh armhf: qemu-user): {e}")
    site = pyvta_site(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(site)}
    cmd = [str(python), "-m", "pyvta.cli", "serve", "--device", "cpu", "--listen", "127.0.0.1:0"]
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=tmp_path
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on"), line
        print(f"armhf server up in {time.monotonic() - t0:.0f} s: {line.strip()}")
        log = tmp_path / "arm.jsonl"
        argv = ["tune", "gemm:16,32,16", "--target", "arm-a9", "--device"]
        argv += [f"tcp://{line.split()[-1]}", "--trials", "4", "--batch", "2", "--repeats", "2"]
        argv += ["--final-check", "0", "--tuner", "random", "--log", str(log), "--no-progress"]
        assert main(argv) == 0
    finally:
        proc.terminate()
        proc.wait(60)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    print(f"{len(records)} records, e.g. {records[0]}")
    assert len(records) == 4
    assert all(r["error"] is None and r["target"] == "armv7a generic cortex-a9" for r in records)
