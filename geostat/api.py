"""The public functions of the statistics that are not the estimator: :func:`log_likelihood`."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from geostat.checks import ORDERINGS, check_bool, check_choice, check_params, check_tile_size
from geostat.data import Trend, convert_time_column, prepare_coords, prepare_y, time_position
from geostat.data.tables import prepare_noise
from geostat.data.types import Device, Method, Observations, Ordering, Params, SitesLike, TrendSpec
from geostat.distance import Distance, model_distance, warn_if_invalid_on_sphere
from geostat.kernels import Kernel, get_kernel
from geostat.kernels.models import model_kernel, time_column
from geostat.likelihood import make_likelihood, resolve_method
from geostat.optimize.scaling import DataScale
from geostat.solvers import get_backend, resolve_client

__all__ = ["log_likelihood"]


def log_likelihood(
    X: SitesLike,
    y: Observations,
    params: Params,
    kernel: str | Kernel = "matern",
    trend: TrendSpec | NDArray[np.floating] = "constant",
    distance: str | Distance = "auto",
    method: Method = "auto",
    accuracy: float = 1e-8,
    tile_size: int | None = None,
    ordering: Ordering = "kdtree",
    reml: bool = False,
    device: Device = "cpu",
    client: Any = None,
    time: str | int | None = None,
    noise_variance: ArrayLike | None = None,
) -> float:
    """Gaussian log-likelihood of observations at given covariance parameters.

    Parameters
    ----------
    X : array-like of shape (n, d) or DataFrame
        Sites (and covariate columns named in `trend`).
    y : array-like of shape (n,) or (n, r)
        Observations; NaN marks a site missing on a replicate.
    params : dict
        ``variance``, ``range``, ``nugget`` (default 0) and the kernel's shape parameters.
    kernel : str or Kernel, default "matern"
    trend : None, "constant", "linear", list of columns, or ndarray of shape (n, p)
        Mean model, profiled by GLS; an array is used as the design matrix itself.
    distance : {"auto", "euclidean", "chordal", "great_circle"}, default "auto"
        As for :class:`~geostat.SpatialGP`, so ``log_likelihood(X, y, est.params_)``
        reproduces ``est.loglik_``.
    method : {"auto", "exact", "tlr"}, default "auto"
        ``"exact"``: dense Cholesky; ``"tlr"``: tile low-rank; ``"auto"``: TLR from
        :data:`geostat.likelihood.TLR_FROM` sites on.
    accuracy : float, default 1e-8
        Relative Frobenius accuracy of the TLR compression and factorization.
    tile_size : int, optional
        TLR tile size (default grows like sqrt(n)).
    ordering : {"kdtree", "morton", "none"}, default "kdtree"
        Site ordering of the TLR method.
    reml : bool, default False
        Return the restricted log-likelihood.
    device : {"cpu", "gpu"}, default "cpu"
        ``"gpu"`` evaluates on a CUDA GPU through CuPy; ``method="auto"`` then uses the
        exact method up to :data:`geostat.likelihood.DEVICE_EXACT_MAX` sites when it fits
        in GPU memory.
    client : None, "default" or distributed.Client, default None
        Evaluate on the workers of a Dask cluster (``geostat-tlr[dask]``;
        ``docs/cluster.md``); the value equals the in-process one to rounding.
        ``"default"``: the default client. With a client ``method="auto"`` means
        ``"tlr"``.
    time : None, str or int, default None
        The time column of `X` for a space-time kernel, as for :class:`~geostat.SpatialGP`
        (dates become days since 1970-01-01).
    noise_variance : array-like of shape (n,), (n, 1) or (n, r), optional
        Known measurement-error variances (units of `y` squared):
        ``C = variance R + nugget I + diag(noise_variance)``, as for
        :meth:`SpatialGP.fit <geostat.SpatialGP.fit>`.

    Returns
    -------
    float
        ``-1/2 r^T C^-1 r - 1/2 log det C - n/2 log(2 pi)`` summed over replicates.

    Raises
    ------
    tlrcore.NotPositiveDefiniteError
        If the covariance matrix is not numerically positive definite.
    ValueError, TypeError
        For bad arguments (the message names the argument), ``device="gpu"`` without CuPy
        or a GPU, ``method="exact"`` or ``device="gpu"`` with a `client`,
        ``client="default"`` without a client, or a closed or foreign `client`.
    ImportError
        For a `client` without the ``dask`` extra installed.
    MemoryError
        If the exact method's dense matrices would not fit in memory.
    """
    resolve_method(method, 0)
    client = resolve_client(client)
    check_tile_size(tile_size)
    check_choice(ordering, "ordering", ORDERINGS)
    reml = check_bool(reml, "reml")
    backend = get_backend(device)
    kern = get_kernel(kernel)
    params = check_params(params, kern)
    design = None
    if isinstance(trend, np.ndarray) and trend.ndim != 1:
        if trend.ndim != 2:
            raise ValueError(
                f"trend as a design matrix must be 2-D (n, p); got shape {trend.shape}."
            )
        design = np.asarray(trend, dtype=np.float64)
        trend = None
    trend = Trend.parse(trend)
    time = time_column(kern, time, X)
    X, _ = convert_time_column(X, time_position(X, trend, time, "X"), "X")
    data, distance_name = prepare_coords(X, trend, distance, time=time)
    kern = model_kernel(kern, None, data.coords.shape[1], distance_name)
    warn_if_invalid_on_sphere(distance_name, kern, params)
    if design is not None:
        if design.shape[0] != data.n or not np.isfinite(design).all():
            raise ValueError(
                f"trend as a design matrix must have {data.n} rows of finite values; got shape "
                f"{design.shape}."
            )
        data.design = design
    values, _, _ = prepare_y(y, data.n)
    noise = None if noise_variance is None else prepare_noise(noise_variance, values)
    # Evaluated for y / s with s^2 near the variance (geostat.optimize.scaling): no intermediate
    # quantity over- or underflows whatever the magnitude of y.
    scale = DataScale.nearest(np.sqrt(params["variance"]))
    lik = make_likelihood(
        method,
        data.coords,
        values / scale.factor,
        data.design,
        kern,
        model_distance(distance_name, kern, data.coords),
        reml,
        accuracy=accuracy,
        tile_size=tile_size,
        ordering=ordering,
        on_failure="raise",
        backend=backend,
        client=client,
        noise=None if noise is None else noise / scale.factor**2,
    )
    return scale.loglik_from_unit(lik.log_likelihood(scale.params_to_unit(params)), lik.n_eff)
