"""The tuner measures VTA candidates through a driver.Device opened by name: the relocatable
kernel of each candidate, loaded and launched; its cost is the launch's Stats.cycles."""

from pyvta.tuner.measure import InProcessMeasurer
from pyvta.tuner.vta import VtaCycleBackend, VtaDeviceBackend, vta_conv2d_task


def test_device_cycles_equal_the_cycle_model_on_the_simulator():
    task = vta_conv2d_task(14, 14, 64, 64, 3, 1, 1)
    configs = task.prior(4)
    print(f"configs {[c.to_dict() for c in configs]}")
    on_device = InProcessMeasurer(VtaDeviceBackend("sim"), repeats=1).measure(task, configs)
    estimate = InProcessMeasurer(VtaCycleBackend(), repeats=1).measure(task, configs)
    assert all(r.ok for r in on_device)
    # the same stream at other DRAM addresses costs the same
    for d, e in zip(on_device, estimate, strict=True):
        assert d.cost == e.cost


def test_unknown_device_is_a_measurement_error():
    task = vta_conv2d_task(14, 14, 64, 64, 3, 1, 1)
    (res,) = InProcessMeasurer(VtaDeviceBackend("nope"), repeats=1).measure(task, task.prior(1))
    assert not res.ok and "unknown device 'nope'" in res.msg
