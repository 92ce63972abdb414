"""The board-side tests run under the board's Python (``make board-test``: Python 3.10, numpy
1.26, pyvta installed without extras) on artifacts the host made (``pyvta.testing.board``)."""

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def fixtures() -> Path:
    where = os.environ.get("PYVTA_BOARD_FIXTURES")
    if not where or not (Path(where) / "expected.npz").exists():
        pytest.fail(
            "PYVTA_BOARD_FIXTURES must name a folder made by `python -m pyvta.testing.board DIR`"
            " (make board-test does both steps)"
        )
    return Path(where)
