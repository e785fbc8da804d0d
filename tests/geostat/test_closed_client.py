"""``client=``: a closed Dask client gives a ValueError that says the client is closed and
what to do (a new client, or ``client=None``), not Dask's bare ``RuntimeError: IOLoop is
closed``, from the functions and the estimator alike."""

import os

import numpy as np
import pytest

import geostat as gs

distributed = pytest.importorskip("distributed")

PARAMS = {"variance": 1.0, "range": 0.2, "smoothness": 0.5, "nugget": 0.1}
MESSAGE = r"client is a closed Dask client .*distributed\.Client\(\.\.\.\).*client=None"


@pytest.fixture
def closed_client():
    """A client of a cluster in this process, closed; the environment as it was before."""
    environment = dict(os.environ)
    client = distributed.Client(
        processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None
    )
    client.close()
    yield client
    os.environ.clear()
    os.environ.update(environment)


def test_a_closed_dask_client_is_named_with_the_fix(closed_client):
    X = np.random.default_rng(0).uniform(size=(100, 2))
    y = np.sin(4 * X[:, 0]) + X[:, 1]
    with pytest.raises(ValueError, match=MESSAGE):
        gs.log_likelihood(X, y, PARAMS, method="tlr", client=closed_client)
    with pytest.raises(ValueError, match=MESSAGE):
        gs.simulate(X, PARAMS, client=closed_client)
    with pytest.raises(ValueError, match=MESSAGE):
        gs.SpatialGP(method="tlr", client=closed_client).fit(X, y)
