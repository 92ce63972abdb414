"""Fixtures of the graph tests (helpers: ``pyvta.compiler.graph.reference`` and ``zoo``)."""

import numpy as np
import pytest

SEED = 1234


@pytest.fixture
def rng() -> np.random.Generator:
    print(f"seed {SEED}")
    return np.random.default_rng(SEED)
