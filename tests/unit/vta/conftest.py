import numpy as np
import pytest

from compiler.backend.vta.reference import reference_conv  # noqa: F401 - used by the tests


@pytest.fixture
def rng(request):
    seed = 1234
    print(f"seed {seed}")
    return np.random.default_rng(seed)
