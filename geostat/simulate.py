"""Unconditional simulation of Gaussian random fields for synthetic studies."""

from __future__ import annotations

from typing import Any

import numpy as np

from geostat.checks import (
    ORDERINGS,
    check_choice,
    check_memory,
    check_params,
    check_positive_int,
    check_random_state,
    check_tile_size,
)
from geostat.covariance import Sites
from geostat.data import Trend, convert_time_column, prepare_coords, time_position
from geostat.data.types import FloatArray, Method, Ordering, Params, Seed, SitesLike
from geostat.distance import Distance, model_distance, warn_if_invalid_on_sphere
from geostat.kernels import Kernel, get_kernel
from geostat.kernels.models import model_kernel, time_column
from geostat.likelihood import resolve_method
from geostat.solvers import (
    NUMPY,
    DenseCholesky,
    check_tlr_entries,
    distributed_tlr_factor,
    one_blas_thread,
    resolve_client,
    site_order,
    tlr_covariance,
    tlr_factor,
)

__all__ = ["simulate"]


@one_blas_thread
def simulate(
    X: SitesLike,
    params: Params,
    kernel: str | Kernel = "matern",
    n_samples: int = 1,
    random_state: Seed = None,
    distance: str | Distance = "auto",
    method: Method = "auto",
    accuracy: float = 1e-8,
    tile_size: int | None = None,
    ordering: Ordering = "kdtree",
    client: Any = None,
    time: str | int | None = None,
) -> FloatArray:
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
    random_state : None, int or numpy Generator
    distance : {"auto", "euclidean", "chordal", "great_circle"}, default "auto"
        As for :class:`~geostat.SpatialGP`.
    method : {"auto", "exact", "tlr"}, default "auto"
        ``"tlr"`` draws through a tile low-rank Cholesky factor; ``"auto"`` uses it from
        :data:`geostat.likelihood.TLR_FROM` sites on.
    accuracy : float, default 1e-8
        Relative accuracy of the TLR factor: the samples have covariance ``L L^T``,
        within that accuracy of the model's.
    tile_size : int, optional
    ordering : {"kdtree", "morton", "none"}, default "kdtree"
    client : None, "default" or distributed.Client, default None
        Build and factor the TLR covariance on a Dask cluster (``docs/cluster.md``); the
        draws equal the in-process ones to rounding. With a client ``method="auto"``
        means ``"tlr"``; ``"exact"`` is refused.
    time : None, str or int, default None
        The time column of `X` for a space-time kernel, as for :class:`~geostat.SpatialGP`.

    Returns
    -------
    ndarray of shape (n,) when ``n_samples == 1``, else (n, n_samples)
        Samples in the row order of `X`. The nugget is added as independent noise.

    Raises
    ------
    ValueError, TypeError
        For bad arguments (the message names the argument), ``method="exact"`` with a
        `client`, or a bad or closed `client`.
    ImportError
        For a `client` without the ``dask`` extra installed.
    MemoryError
        If ``method="exact"`` needs more memory than is available.
    tlrcore.NotPositiveDefiniteError
        If the covariance is numerically singular (e.g. a Gaussian kernel without
        nugget on close sites).
    """
    n_samples = check_positive_int(n_samples, "n_samples")
    rng = check_random_state(random_state)
    tile_size = check_tile_size(tile_size)
    check_choice(ordering, "ordering", ORDERINGS)
    resolve_method(method, 0)
    client = resolve_client(client)
    if client is not None and method == "exact":
        raise ValueError(
            "client= simulates through the TLR factor on a Dask cluster; method='exact' runs in "
            "this process only: use method='tlr' (or 'auto') with a client, or client=None."
        )
    kern = get_kernel(kernel)
    params = check_params(params, kern)
    time = time_column(kern, time, X)
    X, _ = convert_time_column(X, time_position(X, Trend("none"), time, "X"), "X")
    data, distance_name = prepare_coords(X, Trend("none"), distance, time=time)
    kern = model_kernel(kern, None, data.coords.shape[1], distance_name)
    dist = model_distance(distance_name, kern, data.coords)
    warn_if_invalid_on_sphere(distance_name, kern, params, stacklevel=4)  # under @one_blas_thread
    # Draws of K = R + (nugget / variance) I, scaled by sqrt(variance): no entry of the
    # factorized matrix over- or underflows whatever the variance.
    unit = {**params, "variance": 1.0, "nugget": params["nugget"] / params["variance"]}
    if client is not None or resolve_method(method, data.n) == "tlr":
        check_tlr_entries(
            1.0 + unit["nugget"],
            data.n,
            f"params: the nugget is {unit['nugget']:.3g} times the variance, draws of white "
            "noise at any accuracy; use method='exact' or a larger variance",
        )
    if client is not None:
        perm, tile_size = site_order(data.coords, dist, kern, ordering, tile_size)
        block = Sites(data.coords[perm], dist, NUMPY).covariance_block(kern, unit)
        factor = distributed_tlr_factor(client, block, data.n, tile_size, perm, accuracy)[0]
        samples = factor.multiply_lower(rng.standard_normal((data.n, n_samples)))
    elif resolve_method(method, data.n) == "tlr":
        A, perm = tlr_covariance(
            data.coords, kern, unit, dist, accuracy=accuracy, tile_size=tile_size, ordering=ordering
        )
        factor = tlr_factor(lambda: A, perm)[0]
        samples = factor.multiply_lower(rng.standard_normal((data.n, n_samples)))
    else:
        check_memory(
            4 * 8.0 * data.n**2 + 8.0 * data.n * n_samples,
            f"exact simulation at n = {data.n:,} sites",
            "use method='tlr' (or 'auto'), which needs far less.",
        )
        sites = Sites(data.coords, dist, NUMPY)
        K = sites.covariance_block(kern, unit)(np.arange(data.n), np.arange(data.n))
        samples = DenseCholesky(K, overwrite=True).multiply_lower(
            rng.standard_normal((data.n, n_samples))
        )
    samples *= np.sqrt(params["variance"])
    return samples[:, 0] if n_samples == 1 else samples
