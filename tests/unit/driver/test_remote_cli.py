"""The command line over a device server on 127.0.0.1: ``pyvta run A.npz --device tcp://...``
equals ``--device sim`` bit for bit, ``pyvta sim BUNDLE --device tcp://...`` equals the local
simulator, and ``pyvta tune vta:... --device tcp://...`` measures the same cycles as the local
simulator."""

import json

import numpy as np
import pytest

from pyvta.cli import main
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.zoo import save_model
from pyvta.driver import SimDevice
from pyvta.driver.remote.server import ServerThread
from pyvta.isa import HwConfig
from pyvta.testing.remote import KEY

SEED = 5


@pytest.fixture
def served(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY + b"\n")
    with ServerThread(SimDevice(HwConfig()), KEY) as s:
        yield s, str(key_file)


def test_run_artifact_through_tcp_equals_local_sim(served, tmp_path):
    server, key_file = served
    onnx_path = tmp_path / "r18.onnx"
    print(f"seed {SEED}")
    save_model("resnet18", str(onnx_path), size=32, classes=10, width=16, seed=SEED)
    artifact = compile_model(onnx_path, "vta").save(tmp_path / "r18.npz")
    outs = {}
    for device, extra in (
        ("sim", []),
        (f"tcp://{server.address}", ["--key-file", key_file]),
    ):
        out = tmp_path / f"{len(outs)}.npy"
        argv = ["run", str(artifact), "--target", "vta", "--device", device]
        argv += ["--save-output", str(out), *extra]
        assert main([*argv, "--seed", str(SEED)]) == 0
        outs[device] = np.load(out)
    local, remote = outs.values()
    assert local.shape == (1, 10) and np.array_equal(local, remote)
    assert server.server.sessions_served == 1


def test_tune_through_tcp_measures_the_local_cycles(served, tmp_path):
    server, key_file = served
    logs = {}
    for device in ("sim", f"tcp://{server.address}"):
        log = tmp_path / f"{len(logs)}.jsonl"
        argv = ["tune", "vta:8,8,32,32,3,1,1", "--trials", "4", "--tuner", "random"]
        argv += ["--device", device, "--log", str(log), "--no-progress"]
        argv += ["--key-file", key_file] if device.startswith("tcp") else []
        assert main(argv) == 0
        logs[device] = [json.loads(line) for line in log.read_text().splitlines()]
    local, remote = logs.values()
    key = [(r["config"], r["costs"]) for r in local]
    assert key == [(r["config"], r["costs"]) for r in remote] and len(key) == 4
    assert any(r["costs"] and r["costs"][0] > 0 for r in remote)


def test_serve_refuses_unsafe_or_unclear_requests(tmp_path, capsys):
    assert main(["serve", "--listen", "0.0.0.0:0"]) == 2
    assert "refusing to listen on 0.0.0.0 without a key" in capsys.readouterr().err
    assert main(["serve", "--allow-bitstream-upload"]) == 2
    assert "--allow-bitstream-upload needs --key-file" in capsys.readouterr().err
    assert main(["serve", "--listen", "nowhere"]) == 2
    assert "give HOST:PORT" in capsys.readouterr().err
    short = tmp_path / "k"
    short.write_bytes(b"short")
    assert main(["serve", "--key-file", str(short)]) == 2
    assert "a key has at least 16" in capsys.readouterr().err


def test_sim_runs_a_bundle_through_tcp_like_the_simulator(served, tmp_path, capsys):
    from pyvta import sim
    from pyvta.sim.directed import directed_programs

    server, key_file = served
    program = directed_programs()["matmul_tiled_xpad"]  # it stores: its final image differs
    bundle, out = tmp_path / "p.npz", tmp_path / "r.npz"
    program.save(bundle)
    argv = ["sim", str(bundle), "--device", f"tcp://{server.address}", "--key-file", key_file]
    assert main([*argv, "--out", str(out)]) == 0
    assert f"tcp://{server.address}: " in capsys.readouterr().out
    expected = sim.run(program).dram
    assert not np.array_equal(expected, program.dram)
    assert np.array_equal(sim.Program.load(out).dram, expected)
    assert server.server.sessions_served == 1
