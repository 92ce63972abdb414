import numpy as np
import pytest

SEED = 20261130


@pytest.fixture
def seed():
    print(f"tuner test seed {SEED}")
    return SEED


@pytest.fixture
def rng(seed):
    return np.random.default_rng(seed)


@pytest.fixture
def fitting_tile():
    """``fitting_tile(task, rows, cols)``: the register tile ``(rows, cols)`` where it is a point
    of the task's ``tile`` knob at the feature level this process compiles for, else ``rows``
    rows and the widest narrower column count that is (``(4, 16)`` with AVX2 or AVX-512; with
    SSE's 4 float lanes 4 x 16 needs 16 accumulators of 12 free registers, so ``(4, 8)``)."""

    def pick(task, rows: int, cols: int) -> tuple[int, int]:
        tiles = [t for t in task.space.knob("tile").values if t[0] == rows and t[1] <= cols]
        if not tiles:
            raise LookupError(f"{task.name}: no register tile of {rows} rows and <= {cols} columns")
        return max(tiles, key=lambda t: t[1])

    return pick
