"""The public :func:`log_likelihood` and the choice between exact and TLR evaluation."""

from __future__ import annotations

import numpy as np

from geostat.checks import ORDERINGS, check_bool, check_choice, check_tile_size
from geostat.data import Trend, prepare_coords, prepare_y
from geostat.device import device_backend
from geostat.device_likelihood import DeviceExactLikelihood, fits_on_device
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood import ExactLikelihood
from geostat.params import check_params
from geostat.scaling import DataScale
from geostat.tlr_likelihood import TLRLikelihood

__all__ = ["DEVICE_EXACT_MAX", "METHODS", "TLR_FROM", "resolve_method", "make_likelihood", "log_likelihood"]

METHODS = ("auto", "exact", "tlr")
#: Sites from which ``method="auto"`` evaluates the likelihood through TLR factors.
#: ``benchmarks/crossover.py`` (2 cores, accuracy 1e-8): at 4,096 sites a TLR value costs
#: 0.6 s against 2.0 s for a dense value with gradient (0.9 s without), so a TLR fit
#: (about 15 values after an exact subsample fit) is about twice as fast as an exact
#: one; at 2,048 TLR is slower than dense.
TLR_FROM = 4096
#: Most sites for which ``method="auto"`` on a GPU uses the exact dense likelihood (when its
#: matrices also fit in the free device memory, :func:`geostat.device_likelihood.fits_on_device`).
#: Not measured yet: it must be set from timings on a GPU (dense against batched TLR). The
#: starting point is that a dense H100 Cholesky factorization at n = 32K takes well under a
#: second, and that memory rather than time bounds the dense method there (48 to 64 GiB at
#: 32K, :func:`geostat.device_likelihood.device_exact_bytes`).
DEVICE_EXACT_MAX = 32_768


def resolve_method(method, n, backend=None, n_gradients=1):
    """``"exact"`` or ``"tlr"`` for a method name and a number of sites.

    ``"auto"`` chooses the dense exact likelihood below :data:`TLR_FROM` sites on the CPU
    (`backend` None), and up to :data:`DEVICE_EXACT_MAX` sites on a device back end when
    the dense matrices (with `n_gradients` correlation derivatives) fit in its memory.

    Raises
    ------
    ValueError
        If `method` is not one of :data:`METHODS`.
    """
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not one of {METHODS}.")
    if method != "auto":
        return method
    if backend is None:
        return "tlr" if n >= TLR_FROM else "exact"
    return "exact" if n <= DEVICE_EXACT_MAX and fits_on_device(backend, n, n_gradients) else "tlr"


def make_likelihood(method, coords, y, design, kernel, distance, reml=False, accuracy=1e-8, tile_size=None,
                    ordering="kdtree", random_state=0, on_failure="shift", backend=None):
    """The likelihood `method` resolves to, on the CPU or on an array back end.

    Parameters
    ----------
    method : {"auto", "exact", "tlr"}
    coords, y, design, kernel, distance, reml
        As for :class:`ExactLikelihood`.
    accuracy, tile_size, ordering, random_state
        TLR settings (ignored by the exact likelihood).
    on_failure : {"shift", "step", "raise"}, default "shift"
        See :mod:`geostat.safeguard`.
    backend : tlrcore.backends.Backend or None, default None
        None: the CPU path (:class:`ExactLikelihood` or :class:`TLRLikelihood`). A back end
        (:func:`geostat.device.device_backend` of ``device="gpu"``, or the NumPy back end
        standing in for tests): :class:`~geostat.device_likelihood.DeviceExactLikelihood`
        on it, or :class:`TLRLikelihood` with ``backend=`` (the batched TLR path).
    """
    n_gradients = 1 + len(kernel.free_shape)
    if resolve_method(method, coords.shape[0], backend, n_gradients) == "tlr":
        device = {} if backend is None else {"backend": backend}
        return TLRLikelihood(coords, y, design, kernel, distance, reml, accuracy=accuracy, tile_size=tile_size,
                             ordering=ordering, random_state=random_state, on_failure=on_failure, **device)
    if backend is None:
        return ExactLikelihood(coords, y, design, kernel, distance, reml, on_failure)
    return DeviceExactLikelihood(coords, y, design, kernel, distance, reml, on_failure, backend)


def log_likelihood(
    X,
    y,
    params,
    kernel="matern",
    trend="constant",
    distance="auto",
    method="auto",
    accuracy=1e-8,
    tile_size=None,
    ordering="kdtree",
    reml=False,
    device="cpu",
):
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
        ``"auto"``, as in :class:`~geostat.SpatialGP`, uses chordal distance (km) when the
        coordinate columns are named longitude/latitude (lon/lat), Euclidean otherwise;
        so ``log_likelihood(X, y, est.params_)`` reproduces ``est.loglik_``.
    method : {"auto", "exact", "tlr"}, default "auto"
        ``"exact"`` factors the dense covariance; ``"tlr"`` a tile low-rank compression
        of it; ``"auto"`` (as the estimator) uses TLR from :data:`TLR_FROM` sites on.
    accuracy : float, default 1e-8
        Relative Frobenius accuracy of the TLR compression and factorization.
    tile_size : int, optional
        TLR tile size (default grows like sqrt(n)).
    ordering : {"kdtree", "morton", "none"}, default "kdtree"
        Site ordering of the TLR method.
    reml : bool, default False
        Return the restricted log-likelihood.
    device : {"cpu", "gpu"}, default "cpu"
        ``"gpu"`` evaluates on a CUDA GPU through CuPy (see the user guide): the dense
        exact likelihood in GPU memory, or TLR. ``method="auto"`` then uses the exact
        method up to :data:`DEVICE_EXACT_MAX` sites when it fits in GPU memory.

    Returns
    -------
    float
        ``-1/2 r^T C^-1 r - 1/2 log det C - n/2 log(2 pi)`` summed over replicates.

    Raises
    ------
    tlrcore.NotPositiveDefiniteError
        If the covariance matrix is not numerically positive definite.
    ValueError, TypeError
        For bad arguments (the message names the argument), an unknown `method` or
        `device`, or ``device="gpu"`` without CuPy or a GPU.
    MemoryError
        If the exact method's dense matrices would not fit in memory.
    """
    resolve_method(method, 0)
    check_tile_size(tile_size)
    check_choice(ordering, "ordering", ORDERINGS)
    reml = check_bool(reml, "reml")
    backend = device_backend(device)
    kern = get_kernel(kernel)
    params = check_params(params, kern)
    design = None
    if isinstance(trend, np.ndarray) and trend.ndim != 1:
        if trend.ndim != 2:
            raise ValueError(f"trend as a design matrix must be 2-D (n, p); got shape {trend.shape}.")
        design = np.asarray(trend, dtype=np.float64)
        trend = None
    data, distance_name = prepare_coords(X, Trend.parse(trend), distance)
    if design is not None:
        if design.shape[0] != data.n or not np.isfinite(design).all():
            raise ValueError(
                f"trend as a design matrix must have {data.n} rows of finite values; got shape {design.shape}."
            )
        data.design = design
    values, _, _ = prepare_y(y, data.n)
    # Evaluated for y / s with s^2 near the variance (geostat.scaling): no intermediate
    # quantity over- or underflows whatever the magnitude of y.
    scale = DataScale.nearest(np.sqrt(params["variance"]))
    lik = make_likelihood(method, data.coords, values / scale.factor, data.design, kern, get_distance(distance_name),
                          reml, accuracy=accuracy, tile_size=tile_size, ordering=ordering, on_failure="raise",
                          backend=backend)
    return scale.loglik_from_unit(lik.log_likelihood(scale.params_to_unit(params)), lik.n_eff)
