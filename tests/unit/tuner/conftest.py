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
