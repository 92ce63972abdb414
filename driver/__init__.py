"""One Device interface; backends found by name (``ops_<kind>.py``): ``open("sim")``, ``open("rtl")``.

``SimDevice`` (the simulator's backend) is imported when first used (PEP 562): importing the
driver, e.g. for ``driver.kernel`` from the compiler, does not load the simulator.
"""

from pyvta.driver.device import Device, DeviceError, RunResult
from pyvta.driver.registry import device_class, device_kinds, device_options, open_device
from pyvta.driver.stats import Stats

open = open_device  # noqa: A001 - driver.open(name) is the public name

__all__ = [
    "Device",
    "DeviceError",
    "RunResult",
    "SimDevice",
    "Stats",
    "device_kinds",
    "device_class",
    "device_options",
    "open",
]


def __getattr__(name: str):
    if name == "SimDevice":
        from pyvta.driver.ops_sim import SimDevice

        return SimDevice
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
