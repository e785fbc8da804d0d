"""Shared fixtures: array back ends and a small reproducible point set."""

import numpy as np
import pytest

from tlrcore.backends import cupy_available

BACKENDS = [
    pytest.param("numpy", id="numpy"),
    pytest.param("cupy", id="cupy", marks=pytest.mark.gpu),
]


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Name of an array back end; CuPy cases run only with ``-m gpu``."""
    if request.param == "cupy" and not cupy_available():
        pytest.skip("CuPy or a GPU is not available")
    return request.param


@pytest.fixture
def rng():
    """A seeded random generator."""
    return np.random.default_rng(20261121)
