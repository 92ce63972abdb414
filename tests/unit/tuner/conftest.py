import sys
from pathlib import Path

import numpy as np
import pytest

# pytest's default "prepend" import mode puts tests/unit on sys.path (for test_layering.py);
# its test folders compiler/ and sim/ (no __init__.py) would then shadow the packages of the same
# name as namespace packages for any import that happens later. Bind the real packages now.
_ROOT = str(Path(__file__).resolve().parents[3])
if sys.path[:1] != [_ROOT]:
    sys.path.insert(0, _ROOT)
import compiler  # noqa: E402, F401
import sim  # noqa: E402, F401

SEED = 20261130


@pytest.fixture
def seed():
    print(f"tuner test seed {SEED}")
    return SEED


@pytest.fixture
def rng(seed):
    return np.random.default_rng(seed)
