"""Shared fixtures: array back ends, a seeded random generator and a 2-worker Dask cluster.

The test folders mirror the packages and have no ``__init__.py``: pytest imports each test
module by its base name (base names are unique across the tree) with its folder put first on
``sys.path``, and this file's folder, ``tests/``, puts the helper modules (``strategies``,
``standin``, ``model_files``, ``problems``) on it.
"""

import importlib.util
import sys

import numpy as np
import pytest
from clusters import local_cluster

from tlrcore.backends import cupy_available

# tests/tlrcore/distributed/ is on ``sys.path`` as a folder named "distributed": where Dask is
# not installed, ``import distributed`` would find it as an empty namespace package. Mark the
# name absent instead, so that the tests that need Dask skip and tlrcore.distributed raises
# its ImportError naming the extra.
if importlib.util.find_spec("distributed") is None:
    sys.modules["distributed"] = None

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


@pytest.fixture(autouse=True)
def _no_idle_worker_processes():
    """Stop the worker processes a test left waiting idle for the next fit
    (``tlrcore.concurrency.processes.IDLE_TIMEOUT``), so that the next test forks its
    own, with its own settings."""
    yield
    from tlrcore.concurrency import processes as worker_processes

    worker_processes.shutdown()


@pytest.fixture
def rng():
    """A seeded random generator."""
    return np.random.default_rng(20261121)


@pytest.fixture(scope="module")
def client():
    """A client of a ``LocalCluster`` of 2 worker processes with 1 thread each, one per
    test module (:func:`clusters.local_cluster`)."""
    pytest.importorskip("distributed")
    with local_cluster(2) as client:
        yield client
