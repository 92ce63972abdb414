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


def pytest_terminal_summary(terminalreporter):
    level = os.environ.get("PYVTA_CPU_FEATURES") or "host"
    terminalreporter.write_line(f"CPU feature level of this run: {level} (PYVTA_CPU_FEATURES)")
    if _CPU_LEVELS:
        rows = ", ".join(f"{lv}: {how}" for lv, how in sorted(_CPU_LEVELS.items()))
        terminalreporter.write_line(f"CPU feature levels forced by tests: {rows}")
