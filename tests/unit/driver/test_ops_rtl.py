"""The RTL backend's parts that need no Verilator build: its name, variants and build keys."""

import pytest

from pyvta import driver
from pyvta.driver import rtl_build
from pyvta.isa import HwConfig


def test_rtl_is_a_device_kind_with_known_variants():
    assert "rtl" in driver.device_kinds()
    with pytest.raises(driver.DeviceError, match="allowed: rtl, rtl:cocotb, rtl:icarus"):
        driver.open("rtl:bogus")


def test_builds_are_keyed_by_config_and_cached_per_user(tmp_path):
    a = rtl_build.library_path(HwConfig(), tmp_path)
    b = rtl_build.library_path(HwConfig(LOG_ACC_BUFF_SIZE=16), tmp_path)
    assert a != b and a.parent.parent == tmp_path
    assert HwConfig().tag in a.parent.name
    assert rtl_build.library_path(HwConfig(), tmp_path) == a  # deterministic
    assert not a.exists()
