"""Every public Device method given each wrong type (issue 39): the package's error naming the
argument (DeviceArgumentError, a DeviceError and a TypeError), on every backend that runs here
(sim, tcp, the pynq model board), and nothing is allocated or written."""

import numpy as np
import pytest

from pyvta import driver
from pyvta.driver import DeviceError, SimDevice
from pyvta.driver.device import DeviceArgumentError
from pyvta.driver.remote.server import ServerThread
from pyvta.isa import HwConfig
from pyvta.testing.board_model import ModelBoard, write_model_bitstream
from pyvta.testing.remote import KEY

WRONG = {
    "str": "64",
    "float": 64.0,
    "bool": True,
    "None": None,
    "list": [64],
    "array": np.array([64]),
}
DATA_WRONG = {
    "str": "abcd",
    "int": 5,
    "list": [1, 2],
    "None": None,
    "object": np.array([b"x"], object),
}


@pytest.fixture(params=["sim", "tcp", "pynq"])
def dev(request, tmp_path):
    if request.param == "sim":
        yield SimDevice(HwConfig(), dram_bytes=1 << 20)
    elif request.param == "tcp":
        served = SimDevice(HwConfig(), dram_bytes=1 << 20)
        with ServerThread(served, KEY) as s, driver.open(f"tcp://{s.address}", key=KEY) as d:
            yield d
    else:
        bit = write_model_bitstream(tmp_path / "bit", HwConfig())
        yield driver.open("pynq", bitstream=bit, pynq=ModelBoard(memory_bytes=1 << 24).pynq)


CALLS = [
    ("alloc", "nbytes", lambda d, v: d.alloc(v)),
    ("alloc", "align_bytes", lambda d, v: d.alloc(64, v)),
    ("write", "addr", lambda d, v: d.write(v, b"abcd")),
    ("read", "addr", lambda d, v: d.read(v, 4)),
    ("read", "nbytes", lambda d, a: d.read(d.alloc(64), a)),
]
CASES = [(m, arg, call, kind, value) for m, arg, call in CALLS for kind, value in WRONG.items()]


@pytest.mark.parametrize(
    "method, arg, call, kind, value", CASES, ids=[f"{m}-{a}-{k}" for m, a, _, k, _ in CASES]
)
def test_integer_arguments_of_the_wrong_type_are_refused_naming_them(
    dev, method, arg, call, kind, value
):
    with pytest.raises(DeviceArgumentError, match=f"^{arg} must be an integer") as e:
        call(dev, value)
    assert isinstance(e.value, DeviceError) and isinstance(e.value, TypeError)


@pytest.mark.parametrize("kind", DATA_WRONG)
def test_data_of_the_wrong_type_is_refused_naming_it(dev, kind):
    addr = dev.alloc(64)
    with pytest.raises(DeviceArgumentError, match="^data must be bytes"):
        dev.write(addr, DATA_WRONG[kind])
    assert not dev.read(addr, 64).any()  # nothing written


@pytest.mark.parametrize("value, why", [(-1, "must be >= 0"), (3, "power of two")])
def test_out_of_range_sizes_are_refused(dev, value, why):
    with pytest.raises(DeviceArgumentError, match=why):
        dev.alloc(64, value) if why == "power of two" else dev.alloc(value)


def test_run_put_run_program_and_config_check_their_arguments():
    dev = SimDevice(HwConfig(), dram_bytes=1 << 20)
    with pytest.raises(DeviceArgumentError, match="insns must be bytes or a sequence"):
        dev.run("FINISH")
    with pytest.raises(DeviceArgumentError, match="data must be bytes"):
        dev.put("abc")
    with pytest.raises(DeviceArgumentError, match="program must be a sim.Program"):
        dev.run_program("p.npz")
    with pytest.raises(DeviceArgumentError, match="config must be an isa.HwConfig, got str"):
        driver.open("sim", config="1x16_i8w8a32")
    with pytest.raises(DeviceError, match="a device name is a non-empty string"):
        driver.open(3)
