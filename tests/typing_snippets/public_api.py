"""What a type checker infers for the public API: checked by mypy in ``tests/test_typing.py``,
never run.

``assert_type`` fails the check when the inferred type differs; a line that must be rejected
carries ``# type: ignore[code]``, which fails the check (``warn_unused_ignores``) when mypy
accepts the line.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from typing_extensions import assert_type

import geostat as gs
import tlrcore as tlr
from geostat.plotting import plot_ranks

X = np.random.default_rng(0).uniform(size=(50, 2))
y = np.sin(X[:, 0])
params = {"variance": 1.0, "range": 0.1, "smoothness": 1.5, "nugget": 0.01}

# geostat: the estimator
est = gs.SpatialGP(kernel="matern", nugget=True, trend="constant", method="exact", random_state=0)
assert_type(est.fit(X, y), gs.SpatialGP)
assert_type(gs.load("model.npz"), gs.SpatialGP)
assert_type(est.params_, dict[str, float])
assert_type(est.loglik_, float)
assert_type(est.predict(X), NDArray[np.float64])
assert_type(est.predict(X, return_std=True), tuple[NDArray[np.float64], NDArray[np.float64]])
frame: pd.DataFrame = pd.DataFrame(X, columns=["lon", "lat"])
assert_type(est.predict(frame), "pd.Series[Any] | pd.DataFrame")
assert_type(est.sample_y(frame, n_samples=3), pd.DataFrame)
assert_type(est.sample_y(X), NDArray[np.float64])
assert_type(est.score(X, y), float)
assert_type(est.log_likelihood(params), float)
assert_type(est.confidence_intervals(level=0.9, method="log-wald"), pd.DataFrame)
est.save("model.npz")

# geostat: functions and modules
assert_type(gs.log_likelihood(X, y, params, kernel=gs.Matern(smoothness=1.5)), float)
assert_type(gs.simulate(X, params, n_samples=2, random_state=1), NDArray[np.float64])
assert_type(gs.datasets.load("north_american_rainfall"), pd.DataFrame)
assert_type(gs.datasets.names(), list[str])
assert_type(gs.distance.chordal(X), NDArray[np.float64])
assert_type(gs.Matern().correlation(np.linspace(0, 1, 5), 0.2, smoothness=1.5), NDArray[np.float64])

# tlrcore
A = tlr.TLRMatrix.from_dense(np.eye(8), 4, accuracy=1e-10)
B = tlr.TLRMatrix.from_generator(
    lambda rows, cols: np.eye(8)[np.ix_(rows, cols)], 8, 4, method="aca"
)
assert_type(A, tlr.TLRMatrix)
assert_type(A.ranks, NDArray[np.int64])
assert_type(A.nbytes, int)
assert_type(A.to_dense(), NDArray[np.float64])
F = tlr.cholesky(A, safeguard="schur+modified", shift=0.0)
assert_type(tlr.cholesky(A).logdet(), float)
assert_type(F.perturbation, float)
assert_type(F.ranks, NDArray[np.int64])
assert_type(tlr.ldl(A, pivoting="rook").inertia(), tuple[int, int, int])
assert_type(tlr.dense.ldl(np.eye(3)), tlr.dense.LDL)
assert_type(tlr.dense.modified_cholesky(np.eye(3), method="cheng-higham").E_norm, float)
assert_type(tlr.batched.cholesky([np.eye(2), np.eye(3)]), list[Any])
assert_type(tlr.summary(A), dict[str, float])
plot_ranks(A)  # a TLRMatrix has what plot_ranks reads

# misuse the hints reject
gs.SpatialGP(method="fast")  # type: ignore[arg-type]
gs.SpatialGP(ordering="random")  # type: ignore[arg-type]
est.confidence_intervals(method="bootstrap")  # type: ignore[arg-type]
tlr.cholesky(np.eye(4))  # type: ignore[arg-type]
tlr.dense.ldl(np.eye(3), pivoting="partial")  # type: ignore[arg-type]
tlr.TLRMatrix.from_generator(np.eye(8), 8, 4)  # type: ignore[arg-type]
