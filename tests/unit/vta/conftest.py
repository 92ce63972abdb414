import numpy as np
import pytest


@pytest.fixture
def rng(request):
    seed = 1234
    print(f"seed {seed}")
    return np.random.default_rng(seed)
