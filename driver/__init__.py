"""One Device interface; backends: the simulator now, RTL co-simulation and PYNQ boards next."""

from pyvta.driver.device import Device, RunResult
from pyvta.driver.sim_device import SimDevice

__all__ = ["Device", "RunResult", "SimDevice"]
