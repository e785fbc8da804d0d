"""Unconditional simulation of Gaussian random fields for synthetic studies."""

from __future__ import annotations

import numpy as np

import tlrcore as tlr
from geostat.data import Trend, prepare_coords
from geostat.distance import get_distance, warn_if_invalid_on_sphere
from geostat.kernels import get_kernel
from geostat.loglik import resolve_method
from geostat.params import check_params
from geostat.solvers import DenseCholesky, one_blas_thread, tlr_covariance

__all__ = ["simulate"]


@one_blas_thread
def simulate(X, params, kernel="matern", n_samples=1, random_state=None, distance="euclidean", method="auto",
             accuracy=1e-8, tile_size=None, ordering="kdtree"):
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
    method : {"auto", "exact", "tlr"}, default "auto"
        ``"tlr"`` draws through a tile low-rank Cholesky factor (memory and time far
        below dense for 10^5 sites); ``"auto"`` uses it from
        :data:`geostat.loglik.TLR_FROM` sites on.
    accuracy : float, default 1e-8
        Relative accuracy of the TLR covariance and factor (the samples then have
        covariance ``L L^T``, within that accuracy of the model's).
    tile_size : int, optional
    ordering : {"kdtree", "morton", "none"}, default "kdtree"

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
    resolve_method(method, 0)
    kern = get_kernel(kernel)
    params = check_params(params, kern)
    data, distance_name = prepare_coords(X, Trend("none"), distance)
    dist = get_distance(distance_name)
    warn_if_invalid_on_sphere(distance_name, kern)
    rng = np.random.default_rng(random_state)
    if resolve_method(method, data.n) == "tlr":
        A, perm = tlr_covariance(data.coords, kern, params, dist, accuracy=accuracy, tile_size=tile_size,
                                 ordering=ordering)
        factor = tlr.cholesky(A, overwrite_a=True)
        samples = np.empty((data.n, n_samples))
        samples[perm] = factor.multiply_lower(rng.standard_normal((data.n, n_samples)))
        return samples[:, 0] if n_samples == 1 else samples
    shape = {k: params[k] for k in kern.shape_names}
    C = params["variance"] * kern.correlation(dist.cross(data.coords, data.coords), params["range"], **shape)
    C.flat[:: data.n + 1] += params["nugget"]
    chol = DenseCholesky(C, overwrite=True)
    samples = chol.L @ rng.standard_normal((data.n, n_samples))
    return samples[:, 0] if n_samples == 1 else samples
