"""The pilot stage of the fit: explorations on a subsample that stop once they join an
earlier exploration's optimum (``geostat.optimize.search.JOINED``)."""

import numpy as np
import pytest

import geostat as gs
from geostat.optimize import search

TRUTH = {"variance": 1.0, "range": 0.15, "smoothness": 1.5, "nugget": 0.1}


@pytest.fixture(scope="module")
def field():
    rng = np.random.default_rng(5)
    X = rng.uniform(size=(900, 2))  # above the pilot's 500 sites
    return X, 1.0 + gs.simulate(X, TRUTH, random_state=2, method="exact")


def fit(X, y):
    return gs.SpatialGP(smoothness=1.5, method="exact").fit(X, y)


def test_explorations_that_join_an_optimum_stop_early_and_the_fit_is_unchanged(field, monkeypatch):
    X, y = field
    joined = fit(X, y)
    monkeypatch.setattr(search, "JOINED", -1.0)  # no exploration ever joins another
    separate = fit(X, y)
    assert joined.result_.n_pilot_evaluations < separate.result_.n_pilot_evaluations
    # the same optimum from a start that differs within the pilot's tolerance
    assert joined.loglik_ == pytest.approx(separate.loglik_, abs=1e-8)
    for name in ("variance", "range", "nugget"):
        assert joined.params_[name] == pytest.approx(separate.params_[name], rel=1e-4)
