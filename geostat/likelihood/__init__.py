"""Gaussian log-likelihoods of spatial data, and the choice of how to evaluate them.

:class:`ExactLikelihood` (dense Cholesky factors, with gradients) and
:class:`TLRLikelihood` (tile low-rank Cholesky factors, traces by random probes) answer
``terms``, ``log_likelihood``, ``factors``, ``gls``, ``fisher_information``,
``loglik_error`` and ``subset`` alike; :func:`make_likelihood` chooses one. The scalars
of an evaluation are defined in :mod:`geostat.likelihood.terms`.
"""

from __future__ import annotations

import logging

from geostat.likelihood.dense import ExactLikelihood, dense_bytes, fits_in_memory
from geostat.likelihood.terms import Terms, split_params
from geostat.likelihood.tlr import TLRLikelihood
from geostat.solvers import NUMPY, resolve_client

__all__ = [
    "DEVICE_EXACT_MAX",
    "METHODS",
    "TLR_FROM",
    "ExactLikelihood",
    "TLRLikelihood",
    "Terms",
    "make_likelihood",
    "resolve_method",
    "split_params",
]

logger = logging.getLogger(__name__)

METHODS = ("auto", "exact", "tlr")
#: Sites from which ``method="auto"`` evaluates the likelihood through TLR factors on the
#: CPU (the crossover where a TLR fit becomes faster than an exact one).
TLR_FROM = 4096
#: Most sites for which ``method="auto"`` on a GPU uses the exact dense likelihood, when
#: its matrices also fit in the free device memory (48 to 64 GiB at this size,
#: :func:`geostat.likelihood.dense.dense_bytes`).
DEVICE_EXACT_MAX = 32_768
#: Most sites of the exact method under ``method="auto"``, by back end name (the CPU's is
#: below :data:`TLR_FROM`; any other back end's is :data:`DEVICE_EXACT_MAX`).
EXACT_UP_TO = {NUMPY.name: TLR_FROM - 1}


def resolve_method(method, n, backend=NUMPY, n_gradients=1):
    """``"exact"`` or ``"tlr"`` for a method name and a number of sites.

    ``"auto"`` chooses the dense exact likelihood up to :data:`EXACT_UP_TO` sites of the
    back end (below :data:`TLR_FROM` on the CPU, :data:`DEVICE_EXACT_MAX` on a GPU) when
    its dense matrices (with `n_gradients` correlation derivatives) fit in the back end's
    memory, and TLR otherwise.

    Raises
    ------
    ValueError
        If `method` is not one of :data:`METHODS`.
    """
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not one of {METHODS}.")
    if method != "auto":
        return method
    exact = n <= EXACT_UP_TO.get(backend.name, DEVICE_EXACT_MAX) and fits_in_memory(
        backend, n, n_gradients
    )
    return "exact" if exact else "tlr"


def make_likelihood(
    method,
    coords,
    y,
    design,
    kernel,
    distance,
    reml=False,
    accuracy=1e-8,
    tile_size=None,
    ordering="kdtree",
    random_state=0,
    on_failure="shift",
    backend=NUMPY,
    client=None,
    noise=None,
):
    """The likelihood `method` resolves to, on a back end (or a Dask cluster).

    The arguments are those of :class:`ExactLikelihood` and :class:`TLRLikelihood` (TLR
    settings are ignored by the exact likelihood); with a `client` ``"auto"`` means
    ``"tlr"``, and ``method="exact"`` raises ValueError.
    """
    n_gradients = 1 + len(kernel.free_shape)
    client = resolve_client(client)
    if client is not None:
        if method == "exact":
            raise ValueError(
                "client= runs the TLR method on a Dask cluster; method='exact' runs in this "
                "process only: use method='tlr' (or 'auto') with a client, or client=None."
            )
        resolve_method(method, 0)
    chosen = (
        "tlr"
        if client is not None
        else resolve_method(method, coords.shape[0], backend, n_gradients)
    )
    if chosen == "tlr":
        likelihood = TLRLikelihood(
            coords,
            y,
            design,
            kernel,
            distance,
            reml,
            accuracy=accuracy,
            tile_size=tile_size,
            ordering=ordering,
            random_state=random_state,
            on_failure=on_failure,
            backend=backend,
            client=client,
            noise=noise,
        )
    else:
        likelihood = ExactLikelihood(
            coords, y, design, kernel, distance, reml, on_failure, backend, noise
        )
    if logger.isEnabledFor(logging.INFO):
        where, why = (
            (_device(backend), _why(method, chosen, coords.shape[0], backend, n_gradients))
            if client is None
            else ("a Dask cluster", f"method={method!r} with client=")
        )
        logger.info("likelihood: %s on %s (%s); %s", chosen, where, why, likelihood.describe())
    return likelihood


def _device(backend):
    """Where a back end computes, in words."""
    return "the CPU (NumPy)" if backend.name == NUMPY.name else f"the GPU ({backend.name})"


def _why(method, chosen, n, backend, n_gradients):
    """Why `method` resolved to `chosen` for `n` sites (for the log)."""
    if method != "auto":
        return f"method={method!r} as asked"
    limit = EXACT_UP_TO.get(backend.name, DEVICE_EXACT_MAX)
    if n > limit:
        return f"method='auto': n = {n:,} sites, above the exact method's {limit:,} on this device"
    need, free = dense_bytes(n, n_gradients), backend.free_memory()
    if chosen == "tlr":
        return (
            f"method='auto': the exact method's dense matrices ({need / 2**30:.3g} GiB) would "
            f"not fit in the free memory ({free / 2**30:.3g} GiB)"
        )
    return (
        f"method='auto': n = {n:,} sites, at most {limit:,} (TLR from {limit + 1:,} on this device)"
    )
