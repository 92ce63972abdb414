"""The launch routine (``isa.launch``) and its sync driver (``driver.launch``) against a register
model of the accelerator in Python: the sequence, the deadline, the stuck report, the ID check.
The same routine runs on the RTL in tests/hw/test_rtl_device.py."""

import pytest

from pyvta import driver, sim
from pyvta.driver import launch as host
from pyvta.isa import DEFAULT_CONFIG, DecodeError, HwConfig, PyvtaError, regmap
from pyvta.isa import launch as protocol


class FakeAccelerator:
    """Registers of ``isa.regmap``; a started program is DONE after ``run_cycles`` (never if None),
    with STATUS.ERROR and ERROR_INDEX = ``fault`` ((kind, index)) when one is given."""

    def __init__(self, run_cycles, config=DEFAULT_CONFIG, fault=None):
        self.run_cycles, self.config, self.fault = run_cycles, config, fault
        self.regs = {r.name: 0 for r in regmap.REGISTERS}
        self.regs["ID"], self.regs["CONFIG_HASH"] = regmap.id_value(), config.config_hash
        self.log, self.elapsed, self.started = [], 0, None

    def read32(self, offset):
        name = next(r.name for r in regmap.REGISTERS if r.offset == offset)
        self.log.append(("read", name))
        return self.regs[name]

    def write32(self, offset, value):
        name = next(r.name for r in regmap.REGISTERS if r.offset == offset)
        self.log.append(("write", name, value))
        if name == "CTRL" and regmap.register("CTRL").decode(value)["START"]:
            self.started, self.regs["STATUS"] = self.elapsed, 0
        elif name not in ("CTRL", "STATUS"):
            self.regs[name] = value

    def wait(self, cycles):
        self.elapsed += cycles
        if self.started is None:
            return cycles
        ran = self.elapsed - self.started
        if self.run_cycles is not None and ran >= self.run_cycles:
            error = int(self.fault is not None)
            self.regs["STATUS"] = regmap.register("STATUS").encode(DONE=1, ERROR=error)
            self.regs |= {"CYCLES": self.run_cycles, "FETCHED": 7, "GEMM_UOPS": 40}
            if self.fault:
                kind, index = self.fault
                self.regs["ERROR_INDEX"] = regmap.register("ERROR_INDEX").encode(
                    INDEX=index, KIND=kind
                )
        else:  # compute waits on l2c; nothing moves
            self.regs["TOKENS"] = regmap.register("TOKENS").encode(S2C=1)
            self.regs["QUEUES"] = regmap.register("QUEUES").encode(
                STALLED_COMPUTE=1, IDLE_LOAD=1, IDLE_STORE=1, FETCH_DONE=1, LEVEL_STORE=2
            )
        return cycles


def test_launch_writes_the_sequence_and_reads_counters_into_stats():
    dev = FakeAccelerator(run_cycles=1234)
    stats = host.launch(dev, insn_addr=0x1000, insn_count=7, clear_cycles=None, poll_cycles=100)
    writes = [e[1:] for e in dev.log if e[0] == "write"]
    start = regmap.register("CTRL").encode(START=1, IRQ_EN=1)
    assert writes == [("INSN_COUNT", 7), ("INSN_ADDR", 0x1000), ("CTRL", start)]
    assert stats.cycles == 1234 and stats.insns_fetched == 7 and stats.gemm_uops == 40
    assert set(stats.busy_cycles) == {"load", "compute", "store"} and stats.source == "rtl"


def test_clear_comes_first_when_asked():
    dev = FakeAccelerator(run_cycles=10)
    host.launch(dev, 64, 2, clear_cycles=2048)
    first = next(e for e in dev.log if e[0] == "write")
    assert first == ("write", "CTRL", regmap.register("CTRL").encode(CLEAR=1))


def test_deadlock_is_reported_within_the_watchdog_window():
    dev = FakeAccelerator(run_cycles=None)
    with pytest.raises(host.DeviceStuck) as err:
        host.launch(dev, 64, 2, watchdog_cycles=1000, poll_cycles=100)
    outcome = err.value.outcome
    assert outcome.status == "deadlock" and outcome.waited_cycles <= 1200
    assert outcome.stuck.waits() == {"compute": ("l2c",)}
    assert "compute waits for a token on l2c (pushed by load)" in str(err.value)
    assert outcome.stuck.levels["store"] == 2 and outcome.stuck.fetch_done


def test_timeout_is_the_deadline():
    dev = FakeAccelerator(run_cycles=None)
    routine = protocol.launch(64, 2, max_cycles=500, watchdog_cycles=10**9, poll_cycles=100)
    outcome = host.run(routine, dev)
    assert outcome.status == "timeout" and outcome.waited_cycles == 500


def test_id_check_refuses_another_config():
    host.check_id(FakeAccelerator(1), HwConfig())
    with pytest.raises(host.WrongHardware, match="another HwConfig"):
        host.check_id(FakeAccelerator(1, HwConfig(LOG_ACC_BUFF_SIZE=16)), HwConfig())


@pytest.mark.parametrize(
    ("kind", "simulator_error"),
    [
        (regmap.Fault.DECODE, DecodeError),
        (regmap.Fault.DEP_QUEUE, sim.QueueUsageError),
        (regmap.Fault.STORE_PAD, sim.ProgramError),
        (regmap.Fault.OUT_OF_BOUNDS, sim.OutOfBoundsError),
    ],
)
def test_done_with_error_raises_the_simulators_kind_naming_the_instruction(kind, simulator_error):
    dev = FakeAccelerator(run_cycles=300, fault=(kind, 5))
    with pytest.raises(host.DeviceFault) as err:
        host.launch(dev, 64, 9, poll_cycles=100)
    assert isinstance(err.value, simulator_error) and isinstance(err.value, driver.DeviceError)
    assert str(err.value).startswith(f"instruction 5: {kind.description}")
    outcome = err.value.outcome
    assert outcome.status == "fault" and outcome.fault == protocol.FaultReport(kind, 5)
    assert outcome.stuck is None and outcome.counters["CYCLES"] == 300
    assert ("read", "ERROR_INDEX") in dev.log
    assert host.fault_kind(simulator_error("instruction 5: ...")) is kind


def test_clean_done_does_not_read_error_index():
    dev = FakeAccelerator(run_cycles=300)
    host.launch(dev, 64, 9, poll_cycles=100)
    assert ("read", "ERROR_INDEX") not in dev.log


def test_unknown_fault_kind_is_a_clear_error():
    word = regmap.register("ERROR_INDEX").encode(INDEX=3, KIND=max(regmap.Fault) + 1)
    with pytest.raises(PyvtaError, match="fault kind 5 is none this host knows"):
        protocol.FaultReport.from_register(word)
    assert host.fault_kind(sim.DeadlockError("deadlock")) is None
