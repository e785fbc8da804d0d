"""Unconditional simulation of Gaussian random fields for synthetic studies."""

from __future__ import annotations

import numpy as np

from geostat.data import Trend, prepare_coords
from geostat.distance import get_distance, warn_if_invalid_on_sphere
from geostat.kernels import get_kernel
from geostat.params import check_params
from geostat.solvers import DenseCholesky, one_blas_thread

__all__ = ["simulate"]


@one_blas_thread
def simulate(X, params, kernel="matern", n_samples=1, random_state=None, distance="euclidean"):
    """Draw zero-mean Gaussian random fields with the given covariance.

    Parameters
    ----------
    X : array-like of shape (n, d) or DataFrame
        Sites.
    params : dict
        ``variance``, ``range``, ``nugget`` (default 0) and the kernel's shape parameters
        (e.g. ``smoothness`` for Matern).
    kernel : str or Kernel, default "matern"
    n_samples : int, default 1
    random_state : int, numpy Generator or None
    distance : {"euclidean", "chordal", "great_circle", "auto"}, default "euclidean"

    Returns
    -------
    ndarray of shape (n,) when ``n_samples == 1``, else (n, n_samples)
        Samples in the row order of `X`. The nugget is added as independent noise.

    Raises
    ------
    tlrcore.NotPositiveDefiniteError
        If the covariance is numerically singular (e.g. a Gaussian kernel without nugget
        on closely spaced sites); add a small nugget.
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive integer; got {n_samples!r}.")
    kern = get_kernel(kernel)
    params = check_params(params, kern)
    data, distance_name = prepare_coords(X, Trend("none"), distance)
    dist = get_distance(distance_name)
    warn_if_invalid_on_sphere(distance_name, kern)
    shape = {k: params[k] for k in kern.shape_names}
    C = params["variance"] * kern.correlation(dist.cross(data.coords, data.coords), params["range"], **shape)
    C.flat[:: data.n + 1] += params["nugget"]
    chol = DenseCholesky(C, overwrite=True)
    rng = np.random.default_rng(random_state)
    samples = chol.L @ rng.standard_normal((data.n, n_samples))
    return samples[:, 0] if n_samples == 1 else samples
