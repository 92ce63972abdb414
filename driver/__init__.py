"""One Device interface; backends: the simulator now, RTL co-simulation and PYNQ boards next."""

from driver.device import Device, RunResult
from driver.sim_device import SimDevice

__all__ = ["Device", "RunResult", "SimDevice"]
