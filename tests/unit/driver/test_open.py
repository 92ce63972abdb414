"""Devices by name: driver.open finds ops_<kind>.py backends; every backend fills one Stats record."""

import numpy as np
import pytest

from pyvta import driver, isa
from pyvta.driver import DeviceError, SimDevice, Stats
from pyvta.driver.registry import parse_name


def test_parse_name():
    assert parse_name("sim") == ("sim", None)
    assert parse_name("rtl:icarus") == ("rtl", "icarus")
    assert parse_name("tcp://127.0.0.1:9190") == ("tcp", "127.0.0.1:9190")


def test_open_sim_by_name():
    cfg = isa.HwConfig()
    dev = driver.open("sim", config=cfg)
    assert isinstance(dev, SimDevice) and dev.config == cfg
    assert "sim" in driver.device_kinds()


def test_unknown_device_names_the_known_ones():
    with pytest.raises(DeviceError, match=r"unknown device 'nope'.*sim"):
        driver.open("nope")
    with pytest.raises(DeviceError, match="no variants"):
        driver.open("sim:fast")
    with pytest.raises(DeviceError, match="non-empty string"):
        driver.open("")


def test_backpressure_is_the_cocotb_testbenchs_option():
    """The Verilated harness's AXI never stalls: asked for stalls, ``rtl`` names the device that
    has them (before building anything), not a TypeError of its constructor."""
    with pytest.raises(DeviceError, match="needs the cocotb testbench: rtl:cocotb"):
        driver.open("rtl", backpressure=True)


def test_device_options_are_what_open_takes():
    """A command checks its device flags against ``driver.device_options`` (each backend's
    constructor, derived): the simulator's trace, a board's bitstream, a server's key file."""
    sim, pynq = driver.device_options("sim"), driver.device_options("pynq")
    tcp, rtl = driver.device_options("tcp://127.0.0.1:9"), driver.device_options("rtl")
    assert "trace" in sim and "trace" not in pynq | tcp | rtl
    assert "bitstream" in pynq and "bitstream" not in sim | tcp | rtl
    assert {"key_file", "key"} <= tcp and "address" not in tcp and "key_file" not in sim | pynq
    assert "backpressure" in driver.device_options("rtl:cocotb") and "backpressure" not in rtl
    with pytest.raises(DeviceError, match=r"unknown device 'nope'.*sim"):
        driver.device_options("nope")


def test_only_a_server_is_remote():
    """``pyvta serve`` serves a device of its own host, never another server: it asks the
    backend (``Device.remote``), not the name's spelling."""
    local = [k for k in driver.device_kinds() if k != "tcp"]
    assert local and not any(driver.device_class(k).remote for k in local)
    assert driver.device_class("tcp://127.0.0.1:9").remote
    with pytest.raises(DeviceError, match=r"unknown device 'nope'"):
        driver.device_class("nope")


def test_sim_launch_fills_stats():
    from pyvta.sim.programs import matmul_program

    rng = np.random.default_rng(0)
    print("seed 0")
    a = rng.integers(-8, 8, (16, 32), dtype=np.int8)
    b = rng.integers(-8, 8, (32, 16), dtype=np.int8)
    ex = matmul_program(a, b)
    prog = ex.program
    dev = driver.open("sim", config=prog.config, dram_bytes=len(prog.dram))
    dev.write(0, prog.dram)
    res = dev.launch(prog.insn_addr, prog.insn_count)
    assert isinstance(res.stats, Stats) and res.stats.source == "cycle model"
    assert res.cycles == res.stats.cycles > 0
    assert res.stats.insns_fetched == prog.insn_count
    assert res.stats.gemm_uops > 0 and set(res.stats.busy_cycles) == {"load", "compute", "store"}
    assert res.stats.to_dict()["cycles"] == res.cycles
    got = ex.readback(dev.read(0, len(prog.dram)))
    assert np.array_equal(got, a.astype(np.int32) @ b.astype(np.int32))


def test_stats_rejects_unknown_module():
    with pytest.raises(ValueError, match="unknown modules"):
        Stats(1, 1, 0, 0, busy_cycles={"gemm": 1})


def test_stats_registers_round_trip():
    s = Stats(
        100,
        7,
        40,
        9,
        {"load": 5, "compute": 60, "store": 3},
        {"load": 1, "compute": 2, "store": 0},
        "rtl",
    )
    assert Stats.from_registers(s.to_registers()) == s
