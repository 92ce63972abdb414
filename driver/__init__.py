"""One Device interface; backends found by name (``ops_<kind>.py``): ``open("sim")``, ``open("rtl")``."""

from pyvta.driver.device import Device, DeviceError, RunResult
from pyvta.driver.ops_sim import SimDevice
from pyvta.driver.registry import device_kinds, open_device
from pyvta.driver.stats import Stats

open = open_device  # noqa: A001 - driver.open(name) is the public name

__all__ = ["Device", "DeviceError", "RunResult", "SimDevice", "Stats", "device_kinds", "open"]
