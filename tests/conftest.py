"""tests/board runs under the board's Python only (``make board-test``: Python 3.10, numpy 1.26,
on fixtures the host makes); the host's test run leaves it to that step."""

import sys

collect_ignore = ["board"] if sys.version_info[:2] != (3, 10) else []

import os  # noqa: E402

import pytest  # noqa: E402

_CPU_LEVELS: dict[str, str] = {}  # x86 feature level -> "ran" / "assembled only (...)"


@pytest.fixture(scope="session")
def cpu_levels():
    """Which CPU feature levels the session's tests ran and which they only assembled (the
    closing summary prints it)."""
    return _CPU_LEVELS


def pytest_sessionfinish(session):
    """An xdist worker hands its levels to the controller, which prints the summary."""
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["cpu_levels"] = dict(_CPU_LEVELS)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: the board's Python runs without xdist
def pytest_testnodedown(node):
    """The controller (``make test`` runs two workers) gathers each worker's levels."""
    _CPU_LEVELS.update(getattr(node, "workeroutput", {}).get("cpu_levels", {}))


HW_TESTS = "tests/hw/"  # node IDs of the hardware tests start so (relative to the checkout)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` (``make test``: two workers) with the hardware tests as one group:
    one worker runs them all, so the session's Verilog build is made once, not on both workers
    (2 x 2 minutes on 2 cores). Grouped by folder, not by ``xdist_group`` marks: xdist 3.8
    carries a mark's group in the test's node ID, which pytest 9.2 no longer lets a plugin
    change (pytest-xdist issue 1386), so there marks group nothing."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class HardwareTogether(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "hw" if nodeid.startswith(HW_TESTS) else super()._split_scope(nodeid)

    return HardwareTogether(config, log)


def pytest_terminal_summary(terminalreporter):
    level = os.environ.get("PYVTA_CPU_FEATURES") or "host"
    terminalreporter.write_line(f"CPU feature level of this run: {level} (PYVTA_CPU_FEATURES)")
    if _CPU_LEVELS:
        rows = ", ".join(f"{lv}: {how}" for lv, how in sorted(_CPU_LEVELS.items()))
        terminalreporter.write_line(f"CPU feature levels forced by tests: {rows}")
