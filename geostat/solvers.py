"""The only bridge to :mod:`tlrcore`: back ends, dense and TLR factors of covariances.

Statistics (:mod:`geostat.likelihood`, :mod:`geostat.predict`, :mod:`geostat.simulate`)
asks a factor of ``K = L L^T`` for ``logdet``, ``solve``, ``solve_lower``,
``solve_upper`` and ``multiply_lower`` and never sees its structure: a dense factor
(:class:`DenseCholesky`, on any back end) and a TLR factor of reordered sites
(:class:`TLRFactor`) answer alike. A factor takes host or back-end arrays and returns
the same kind.

Back ends are chosen once, by name (:func:`get_backend`: ``"cpu"`` is NumPy, ``"gpu"``
CuPy), and stored on the objects that use them.

A Dask cluster (``client=``): :func:`resolve_client` checks the argument and
:func:`distributed_tlr_factor` builds and factors the covariance on the workers
(:mod:`tlrcore.distributed`); the factor it returns is a :class:`TLRFactor`, like the
in-process one. Dask is imported only there, never by ``import geostat``.

Progress: :func:`tile_progress` (tlrcore's :func:`tlrcore.progress`) switches on the
tile-column counters of TLR builds and factorizations for a block of code.

Threads: dense LAPACK and BLAS calls run on one thread (:func:`one_blas_thread`), because
threaded BLAS on small and medium matrices competes with the tile pool; parallel work
comes from the kernel evaluation and, from :data:`tlrcore.dense.blocked.PARALLEL_FROM`
sites, from tlrcore's blocked Cholesky factor, inverse and products
(:mod:`tlrcore.dense.blocked`), which :class:`DenseCholesky` uses on NumPy.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np
from scipy.spatial import cKDTree

import tlrcore
from geostat.covariance import Sites
from geostat.distance import Distance, TangentPlaneDistance, ordering_points, spherical_cap
from geostat.errors import NotPositiveDefiniteError
from geostat.ordering import auto_tile_size, order_points
from tlrcore.backends import NUMPY, Backend
from tlrcore.backends import get_backend as _tlrcore_backend
from tlrcore.compress.fmm import balanced_leaf_size, bounding_cube, fmm_product, leaf_counts
from tlrcore.compress.tiled_product import tiled_product
from tlrcore.concurrency import Shared as InWorkerProcesses
from tlrcore.concurrency import column_progress as progress_counter
from tlrcore.concurrency import hold as worker_hold
from tlrcore.concurrency import one_blas_thread, one_blas_thread_block, small_pages
from tlrcore.concurrency import workers as tile_threads
from tlrcore.packed.build import scale_range

__all__ = [
    "DEVICES",
    "NUMPY",
    "DenseCholesky",
    "InWorkerProcesses",
    "PermutedTLR",
    "TLRFactor",
    "compressed_cross_product",
    "covariance_block",
    "check_tlr_entries",
    "dense_cholesky_batch",
    "distributed_tlr_factor",
    "get_backend",
    "not_positive_definite",
    "one_blas_thread",
    "one_blas_thread_block",
    "progress_counter",
    "resolve_client",
    "site_order",
    "small_pages",
    "tile_progress",
    "tile_threads",
    "tlr_covariance",
    "tlr_factor",
    "tlr_matrix",
    "worker_hold",
]

logger = logging.getLogger(__name__)

#: ``with tile_progress(enabled):`` shows (or not) tile-column counters of the TLR builds and
#: factorizations in the block that run longer than two seconds (:func:`tlrcore.progress`).
tile_progress = tlrcore.progress

#: Values of the ``device`` argument of :class:`geostat.SpatialGP` and
#: :func:`geostat.log_likelihood`.
DEVICES = ("cpu", "gpu")


def get_backend(device):
    """The array back end a device name selects.

    Parameters
    ----------
    device : {"cpu", "gpu"} or tlrcore.backends.Backend
        ``"cpu"``: NumPy; ``"gpu"``: CuPy on a CUDA GPU; a back end object is returned as
        it is (tests run the device code on NumPy standing in this way).

    Returns
    -------
    tlrcore.backends.Backend

    Raises
    ------
    ValueError
        For another name, or ``"gpu"`` when CuPy or a CUDA GPU is missing.
    """
    if isinstance(device, Backend):
        return device
    if device == "cpu":
        return NUMPY
    if device == "gpu":
        try:
            return _tlrcore_backend("cupy")
        except ValueError as exc:
            raise ValueError(
                "device='gpu' needs CuPy and a CUDA GPU; install the GPU extra "
                "(pip install 'geostat-tlr[gpu]') on a machine with an NVIDIA GPU, or use "
                f"device='cpu'. ({exc})"
            ) from None
    raise ValueError(f"device={device!r} is not one of {DEVICES}.")


#: The message of a ``client=`` without Dask installed.
DASK_MISSING = (
    "client= runs the TLR method on a Dask cluster and needs dask.distributed, which is not "
    "installed: pip install 'geostat-tlr[dask]'."
)


def resolve_client(client):
    """The ``distributed.Client`` a ``client=`` argument names, or None.

    Parameters
    ----------
    client : None, "default" or distributed.Client
        None: compute in this process. ``"default"``: the current default client
        (``distributed.get_client()``, e.g. the last ``Client(...)`` made).

    Returns
    -------
    distributed.Client or None

    Raises
    ------
    ImportError
        If `client` is not None and ``dask.distributed`` is not installed.
    ValueError
        For ``"default"`` when no client exists, another string, or a closed client
        (whose calls would fail with Dask's bare "IOLoop is closed").
    TypeError
        For any other object.
    """
    if client is None:
        return None
    try:
        import distributed
    except ImportError:
        raise ImportError(DASK_MISSING) from None
    if isinstance(client, str):
        if client != "default":
            raise ValueError(
                "client must be None, 'default' or a distributed.Client; got the string "
                f"{client!r}."
            )
        try:
            return distributed.get_client()
        except ValueError:
            raise ValueError(
                "client='default' uses the current Dask client, and there is none: make one first "
                "(client = distributed.Client(...)) or pass it as client=client."
            ) from None
    if not isinstance(client, distributed.Client):
        raise TypeError(
            f"client must be None, 'default' or a distributed.Client; got {type(client).__name__}."
        )
    if client.status in ("closing", "closed"):
        raise ValueError(
            f"client is a closed Dask client (status {client.status!r}): make a new one, "
            "client = distributed.Client(...), and pass it, or pass client=None to compute in this "
            "process."
        )
    return client


def not_positive_definite(order, n):
    """The error of a dense Cholesky factorization whose leading minor `order` (of `n`) failed."""
    return NotPositiveDefiniteError(
        f"the covariance matrix is not positive definite (leading minor of order {order} "
        f"of {n}); duplicate or near-duplicate sites without a nugget, a range so "
        "large that the correlation matrix is numerically singular, or a kernel that is not "
        "valid with the distance (great-circle with Matern smoothness > 0.5) cause this. "
        "Estimate a nugget (nugget=True), remove duplicate sites, bound the range, or use "
        "distance='chordal'.",
        tile=0,
    )


class _Factor:
    """What every factor of ``K = P^T L L^T P`` answers (the contract
    :class:`tlrcore.CholeskyFactor`), from ``_solve_lower`` (``L^{-1}`` on the factor's
    order), ``_solve_upper`` (``L^{-T}``), ``_multiply_lower`` and the permutation ``perm``
    (None: the identity). Inputs may be host or back-end arrays; results are of the same
    kind."""

    backend = NUMPY
    perm = None

    def _to_factor_order(self, b):
        b = self.backend.asarray(b)
        return b if self.perm is None else b[self.perm]

    def _from_factor_order(self, x):
        if self.perm is None:
            return x
        out = self.backend.xp.empty_like(x)
        out[self.perm] = x
        return out

    def solve_lower(self, b):
        """Return ``L^{-1} P b`` (rows in the factor's order; for quadratic forms)."""
        return self.backend.like(self._solve_lower(self._to_factor_order(b)), b)

    def solve_upper(self, x):
        """Return ``P^T L^{-T} x`` for `x` in the factor's order (so that
        ``solve_upper(solve_lower(b)) = K^{-1} b``)."""
        return self.backend.like(
            self._from_factor_order(self._solve_upper(self.backend.asarray(x))), x
        )

    def multiply_lower(self, z):
        """Return ``P^T L z`` for `z` in the factor's order (a draw with covariance ``K``
        from white noise `z`)."""
        return self.backend.like(
            self._from_factor_order(self._multiply_lower(self.backend.asarray(z))), z
        )

    def solve(self, b):
        """Return ``K^{-1} b`` for a vector or a matrix of right-hand sides."""
        x = self._solve(self._to_factor_order(b))
        return self.backend.like(self._from_factor_order(x), b)

    def _solve(self, b):
        return self._solve_upper(self._solve_lower(b))


class DenseCholesky(_Factor):
    """Cholesky factorization ``K = L L^T`` of a dense matrix on a back end.

    Parameters
    ----------
    matrix : array of shape (n, n) on `backend`
        Symmetric positive definite; only one triangle is read.
    backend : tlrcore.backends.Backend, default NUMPY
    overwrite : bool, default False
        Allow the factorization to reuse `matrix`'s memory (it is then destroyed).
    shifts : sequence of float, default ()
        If the factorization fails, factor ``matrix + s I`` for the first ``s`` that
        works (see :mod:`geostat.likelihood.failure`); ``.shift``, ``.perturbation``
        (``s sqrt(n)``) and ``.relative_perturbation`` record it (0.0 when not needed).

    Raises
    ------
    NotPositiveDefiniteError
        If a pivot is not positive (with every shift); the message gives the failing
        leading order.
    """

    @one_blas_thread
    def __init__(self, matrix, backend=NUMPY, overwrite=False, shifts=()):
        self.backend = backend
        xp = backend.xp
        self.n = matrix.shape[0]
        self.shift = self.perturbation = self.relative_perturbation = 0.0
        diagonal = xp.diagonal(matrix).copy() if shifts else None
        L, info = backend.dense_cholesky(matrix, overwrite=overwrite)
        if info and shifts:
            L, info = self._shifted(L, diagonal, shifts)
        if info:
            raise not_positive_definite(info, self.n)
        self.L = L

    @classmethod
    def from_factor(cls, L, backend=NUMPY):
        """Wrap the lower Cholesky factor `L` (on `backend`, zero strict upper triangle) of
        a positive definite matrix, computed elsewhere (:func:`dense_cholesky_batch`)."""
        self = cls.__new__(cls)
        self.backend, self.L, self.n = backend, L, L.shape[0]
        self.shift = self.perturbation = self.relative_perturbation = 0.0
        return self

    def _shifted(self, failed, diagonal, shifts):
        """Factor ``K + s I`` for the first `shifts` entry that works. The failed attempt
        kept ``K``'s strict upper triangle (``backend.dense_cholesky``); ``K`` is rebuilt
        from it and the saved `diagonal`."""
        xp = self.backend.xp
        upper = xp.triu(failed, 1)
        K = upper + upper.T
        index = xp.arange(self.n)
        K[index, index] = diagonal
        norm = float(xp.linalg.norm(K))
        for shift in shifts:
            trial = K.copy()
            trial[index, index] += shift
            L, info = self.backend.dense_cholesky(trial, overwrite=True)
            if not info:
                self.shift = float(shift)
                self.perturbation = float(shift) * np.sqrt(self.n)
                self.relative_perturbation = self.perturbation / norm
                return L, info
        return L, info

    @property
    def nbytes(self):
        """Bytes held by the factor."""
        return self.L.nbytes

    @property
    def ranks(self):
        """``[[n]]``: one dense tile."""
        return np.array([[self.n]])

    def to_dense(self):
        """``L`` (on the back end)."""
        return self.L

    def logdet(self):
        """Return ``log det K``."""
        xp = self.backend.xp
        return 2.0 * float(xp.sum(xp.log(xp.diagonal(self.L))))

    @one_blas_thread
    def _solve_lower(self, b):
        return self.backend.solve_triangular(self.L, b, lower=True)

    @one_blas_thread
    def _solve_upper(self, x):
        return self.backend.solve_triangular(self.L, x, lower=True, trans=True)

    def _multiply_lower(self, z):
        return self.L @ z

    @one_blas_thread
    def _solve(self, b):
        return self.backend.cholesky_solve(self.L, b)

    @one_blas_thread
    def inverse(self, lower=False):
        """``K^{-1}`` on the back end: the full symmetric matrix, or with ``lower=True``
        its lower triangle (strict upper triangle zero)."""
        return self.backend.cholesky_inverse(self.L, lower=lower)


def dense_cholesky_batch(matrices, backend=NUMPY):
    """:class:`DenseCholesky` factors of several symmetric matrices of any orders, by
    :func:`tlrcore.batched.cholesky` (the matrices of one order in one batched call).

    Raises
    ------
    NotPositiveDefiniteError
        If one of them is not positive definite (factor them one by one to tell which).
    """
    # "group": no padded copies. K is symmetric, so K.T is the same matrix, in the column
    # order LAPACK reads without a transposing copy (measured: 5-10% of the factorization
    # at n = 1,400).
    factors = tlrcore.batched.cholesky(
        [K.T for K in matrices], strategy="group", check_finite=False, backend=backend
    )
    return [DenseCholesky.from_factor(L, backend) for L in factors]


class TLRFactor(_Factor):
    """TLR Cholesky factor of a covariance of reordered sites, used in the original order.

    ``K[perm][:, perm] ~ L L^T``: :meth:`solve` takes and returns arrays in the caller's
    site order, so the factor stands in for :class:`DenseCholesky`.

    Parameters
    ----------
    factor : tlrcore.CholeskyFactor
        A :class:`tlrcore.TLRCholesky`, a packed factor
        (:class:`tlrcore.cholesky.PackedCholesky`), or a
        :class:`tlrcore.distributed.DistributedCholesky`, which keeps its tiles on a Dask
        cluster (:func:`distributed_tlr_factor`).
    perm : ndarray of shape (n,)
    matrix_norm : float, optional
        ``||K||_F``, for ``.relative_perturbation`` of a safeguarded factor.
    """

    def __init__(self, factor, perm, matrix_norm=None):
        self.factor = factor
        self.backend = factor.backend
        self.perm = self.backend.xp.asarray(perm)
        self.n = factor.n
        self.shift = factor.shift
        self.perturbation = factor.perturbation
        self.relative_perturbation = (
            factor.perturbation / matrix_norm if factor.perturbation else 0.0
        )

    @property
    def nbytes(self):
        """Bytes held by the factor."""
        return self.factor.nbytes

    @property
    def ranks(self):
        """Ranks of the factor's tiles (tile sizes on the diagonal)."""
        return self.factor.ranks

    def to_dense(self):
        """``L`` with ``L L^T ~ K[perm][:, perm]``."""
        return self.factor.to_dense()

    def logdet(self):
        """Return ``log det K``."""
        return self.factor.logdet()

    def _solve_lower(self, b):
        return self.factor.solve_lower(b)

    def _solve_upper(self, x):
        return self.factor.solve_upper(x)

    def _multiply_lower(self, z):
        return self.factor.multiply_lower(z)

    def _solve(self, b):
        return self.factor.solve(b)

    def inverse_entries(self, accuracy):
        """:class:`InverseEntries` of ``K^{-1}`` from the TLR inverse of the factor, its
        tiles truncated at `accuracy`; None for a factor outside the tile layout (packed
        or on a cluster), whose entries come from solves."""
        if not isinstance(self.factor, tlrcore.TLRCholesky):
            return None
        return InverseEntries(tlrcore.inverse_factor(self.factor, accuracy), self.perm)


class InverseEntries:
    """Entries of ``K^{-1}`` in the caller's site order, from a TLR inverse factor
    ``X = L^{-1}`` of ``K[perm][:, perm] ~ L L^T`` (:class:`tlrcore.InverseFactor`).

    Parameters
    ----------
    inverse : tlrcore.InverseFactor
    perm : ndarray of shape (n,)
    """

    def __init__(self, inverse, perm):
        self.inverse = inverse
        self.position = np.argsort(np.asarray(perm))

    @property
    def nbytes(self):
        """Bytes held by the inverse factor (and the tiles of ``K^{-1}`` once made)."""
        return self.inverse.nbytes

    def diagonal(self):
        """``diag(K^{-1})``, shape ``(n,)``."""
        return self.inverse.inverse_diagonal()[self.position]

    def block(self, rows):
        """``K^{-1}[rows][:, rows]``."""
        return self.inverse.inverse_block(self.position[np.asarray(rows)])


def compressed_solve_and_inverse_diagonal(matrix, rhs, accuracy):
    """``(matrix^{-1} rhs, diag(matrix^{-1}))`` through a TLR factor of the dense symmetric
    positive definite `matrix`, compressed (ACA, :func:`geostat.ordering.auto_tile_size`
    tiles) and factored at `accuracy`, and its TLR inverse factor.

    For a matrix of sites in an order whose tiles compress (neighbouring sites together):
    ``O(m^2 rank)`` work against the ``2 m^3 / 3`` of a dense factor and inverse.

    Raises
    ------
    NotPositiveDefiniteError
        If the compressed matrix is not positive definite at this accuracy.
    """
    m = matrix.shape[0]
    compressed = tlrcore.TLRMatrix.from_dense(matrix, auto_tile_size(m), accuracy, method="aca")
    factor = tlrcore.cholesky(compressed, overwrite_a=True)
    return factor.solve(rhs), tlrcore.inverse_factor(factor, accuracy).inverse_diagonal()


if TYPE_CHECKING:  # both meet tlrcore's factor contract (checked by mypy)
    _DENSE: type[tlrcore.CholeskyFactor] = DenseCholesky
    _TLR: type[tlrcore.CholeskyFactor] = TLRFactor


class PermutedTLR:
    """A TLR matrix of reordered sites as an operator in the caller's order:
    ``A @ x = P^T A_P P x`` with ``A_P = A[perm][:, perm]`` compressed.

    Parameters
    ----------
    matrix : tlrcore.TLRMatrix
    perm : ndarray of shape (n,)
    """

    def __init__(self, matrix, perm):
        self.matrix = matrix
        self.perm = matrix.backend.xp.asarray(perm)

    def __matmul__(self, x):
        backend = self.matrix.backend
        y = self.matrix @ backend.asarray(x)[self.perm]
        out = backend.xp.empty_like(y)
        out[self.perm] = y
        return backend.like(out, x)


def check_tlr_entries(largest, n, reason):
    """Refuse a TLR covariance of order `n` whose largest entry is `largest` when it is
    outside :func:`tlrcore.packed.build.scale_range`, where the tiles' norms underflow or
    overflow.

    Raises
    ------
    ValueError
        Starting with `reason` (which names the parameters at fault), then the range.
    """
    low, high = scale_range(n)
    if not low <= largest <= high:
        raise ValueError(
            f"{reason}: the covariance has entries up to {largest:.3g}, outside "
            f"[{low:.3g}, {high:.3g}], the range in which a TLR factorization of {n:,} sites "
            "can work"
        )


def tlr_matrix(
    block,
    n,
    tile_size=None,
    accuracy=1e-8,
    method=None,
    random_state=0,
    backend=NUMPY,
    deferred=False,
):
    """A :class:`tlrcore.TLRMatrix` from a block generator of already ordered sites.

    ``tile_size=None`` uses :func:`geostat.ordering.auto_tile_size`; a tile size above
    `n` is clipped to `n`. ``method=None`` is the back end's default (ACA on NumPy, the
    batched column compression on a GPU). ``deferred=True`` (ignored on a back end that
    builds the packed layout) compresses each tile column when first read
    (:meth:`tlrcore.TLRMatrix.from_generator`): for a matrix that is factored with
    ``overwrite_a=True`` and not kept.
    """
    tile_size = auto_tile_size(n) if tile_size is None else min(int(tile_size), n)
    return tlrcore.TLRMatrix.from_generator(
        block,
        n,
        tile_size,
        accuracy=accuracy,
        method=method,
        random_state=random_state,
        backend=backend,
        deferred=deferred and not backend.batched_by_default and method != "batched",
    )


#: The tlrcore safeguards each ``on_failure`` policy of a TLR factorization uses, after
#: the plain factorization failed (None: raise).
TLR_SAFEGUARDS = {
    "shift": "shift",
    "compensate": "compensate-block+shift",
    "step": None,
    "raise": None,
}


def tlr_factor(build, perm, random_state=0, on_failure="raise"):
    """TLR Cholesky factor of the matrix ``build()`` makes (sites in order `perm`).

    Parameters
    ----------
    build : callable
        Returns a new :class:`tlrcore.TLRMatrix` (called again after a failure: the
        failed attempt consumed the first one).
    perm : ndarray of shape (n,)
    random_state : int, default 0
    on_failure : {"raise", "step", "shift", "compensate"}, default "raise"
        On failure, ``"shift"`` refactors a rebuilt matrix with the smallest shift that
        works (``tlrcore.cholesky(..., safeguard="shift")``), ``"compensate"`` with the
        always-on compensation of the diagonal tiles, and the shift only if that fails
        too (``safeguard="compensate-block+shift"``); the others raise.

    Returns
    -------
    factor : TLRFactor
    shifted : bool
        Whether a safeguard was needed.

    Raises
    ------
    NotPositiveDefiniteError
        If the compressed matrix is not positive definite and `on_failure` has no
        safeguard (or it failed).
    """
    try:
        return TLRFactor(
            tlrcore.cholesky(build(), random_state=random_state, overwrite_a=True), perm
        ), False
    except NotPositiveDefiniteError:
        if TLR_SAFEGUARDS[on_failure] is None:
            raise
    A = build()
    factor = tlrcore.cholesky(A, random_state=random_state, safeguard=TLR_SAFEGUARDS[on_failure])
    return TLRFactor(factor, perm, A.frobenius_norm()), True


def distributed_tlr_factor(
    client, block, n, tile_size, perm, accuracy=1e-8, random_state=0, on_failure="raise"
):
    """TLR Cholesky factor of the covariance ``block`` generates, built and factored on the
    workers of a Dask cluster.

    The same compression and left-looking factorization, with the same seeds, as
    ``tlr_factor(lambda: tlr_matrix(block, n, tile_size, accuracy, random_state=random_state),
    perm, random_state, on_failure)``, so the two factors agree to rounding
    (:mod:`tlrcore.distributed`). `block` (a :meth:`geostat.covariance.Sites.covariance_block`)
    is sent to the workers once per build; the tiles stay there (generated just before the
    factorization consumes them), and the factor's solves and products move only
    ``n``-vectors (or ``n x m`` blocks).

    Parameters
    ----------
    client : distributed.Client
    block : callable
        Picklable block generator of the covariance of the sites in order `perm`.
    n, tile_size : int
    perm : ndarray of shape (n,)
    accuracy : float, default 1e-8
    random_state : int, default 0
    on_failure : {"raise", "step", "shift", "compensate"}, default "raise"
        After a failure, factor again with the safeguards of the in-process
        :data:`TLR_SAFEGUARDS`: ``"shift"`` with the shifts of ``safeguard="shift"``
        (:func:`tlrcore.cholesky.safeguards.shift_schedule`: ``tau, 2 tau, 4 tau,
        ...``), ``"compensate"`` with the always-on compensation
        (``safeguard="compensate-block"`` in the diagonal tasks), then, if that fails,
        with it and those shifts; so the first that works, and the factor, are the
        in-process ones.

    Returns
    -------
    factor : TLRFactor
        Wrapping a :class:`tlrcore.distributed.DistributedCholesky`; its
        ``relative_perturbation`` is relative to the norm estimate the tolerance came
        from (in process: to ``||A_tlr||_F``, which the cluster would have to keep ``A``
        for).
    shifted : bool
        Whether a safeguard was needed.

    Raises
    ------
    NotPositiveDefiniteError
        If the compressed covariance is not positive definite and `on_failure` has no
        safeguard, or no shift of the schedule helped.
    """
    import tlrcore.distributed as td
    from tlrcore.cholesky.safeguards import parse_safeguard, shift_schedule

    def build():
        return td.DistributedTLRMatrix.from_generator(
            client, block, n, tile_size, accuracy=accuracy, random_state=random_state, wait=False
        )

    A = build()
    tolerance, norm = A.tolerance, A.tolerance * A.n_tiles / accuracy
    shifts = shift_schedule(tolerance, A.n_tiles)
    try:
        return TLRFactor(td.cholesky(A, random_state=random_state, overwrite_a=True), perm), False
    except NotPositiveDefiniteError as exc:
        if TLR_SAFEGUARDS[on_failure] is None:
            raise
        failure = exc
    # the cluster's factorization takes the tile-local safeguards; the shifts are this loop
    tile_local = "+".join(sorted(parse_safeguard(TLR_SAFEGUARDS[on_failure]) - {"shift"})) or None
    for shift in ([0.0] if tile_local else []) + shifts:
        try:
            factor = td.cholesky(
                build(),
                random_state=random_state,
                overwrite_a=True,
                shift=shift,
                safeguard=tile_local,
            )
        except NotPositiveDefiniteError as exc:
            failure = exc
            continue
        return TLRFactor(factor, perm, norm), True
    raise NotPositiveDefiniteError(
        f"{failure} The automatic shift reached {shifts[-1] if shifts else 0.0:.3g} "
        f"({len(shifts)} doublings of the tile tolerance) without success: the covariance is "
        "probably indefinite; add or bound a nugget, or check the kernel.",
        tile=failure.tile,
    ) from failure


def covariance_block(coords, kernel, params, distance, backend=NUMPY):
    """Block generator ``block(rows, cols)`` of the covariance matrix of `coords`.

    A shorthand for ``Sites(coords, distance, backend).covariance_block(kernel, params)``;
    to build blocks for many parameter values, keep one :class:`geostat.covariance.Sites`
    (the coordinates then go to the back end once).

    Parameters
    ----------
    coords : ndarray of shape (n, d)
    kernel : geostat.kernels.Kernel
    params : dict
        ``variance``, ``range``, ``nugget`` and the kernel's shape parameters.
    distance : geostat.distance.Distance
    backend : tlrcore.backends.Backend, default NUMPY

    Returns
    -------
    callable
        ``block(rows, cols)`` -> ``variance * M(d / range) + nugget * [rows == cols]``.
    """
    return Sites(coords, distance, backend).covariance_block(kernel, params)


def site_order(coords, distance, kernel, ordering="kdtree", tile_size=None):
    """Permutation of the sites for TLR compression, and the tile size it was built for.

    ``tile_size=None`` uses :func:`geostat.ordering.auto_tile_size`, with the smaller
    tiles of a costly kernel when `kernel`'s entries are costly (a Matérn smoothness
    without a closed form) or it has a shape parameter to estimate (whose derivative
    takes dense diagonal tiles of its own).

    Returns
    -------
    perm : ndarray of shape (n,)
    tile_size : int
    """
    n = coords.shape[0]
    if tile_size is None:
        tile_size = auto_tile_size(n, costly_kernel=kernel.costly or bool(kernel.free_shape))
    tile_size = min(int(tile_size), n)
    return order_points(ordering_points(coords, distance), ordering, tile_size), tile_size


#: Most targets in one row tile of the tiled cross-covariance product (ACA's working set
#: is two buffers of about ``rank x row tile`` per tile of the row tile).
CROSS_ROW_TILE = 8192
#: Most entries of a dense block of the cross-covariance product.
CROSS_BLOCK_ENTRIES = 2**24
#: Targets at which :func:`compressed_cross_product` forms the product densely, to learn
#: its size and to check the interpolated product.
CROSS_SAMPLE = 64
#: Chebyshev nodes per dimension and box tried in turn by the interpolated product (none:
#: never interpolated).
INTERPOLATION_ORDERS = (8, 10, 12, 14, 16)
#: Most dimensions of the embedded points for the interpolated product (its transfers
#: between boxes cost ``order^(2 d)`` each).
INTERPOLATION_MAX_DIMENSION = 2
#: Most occupied target leaves of the interpolated product's tree, per occupied source
#: leaf, beyond :data:`INTERPOLATION_FREE_LEAVES`: each costs a local expansion and its
#: interactions, so sources clustered in a small part of a region of spread targets
#: (deep leaves, most holding a target or two) are left to compressed tiles.
INTERPOLATION_LEAVES_PER_SOURCE_LEAF = 16
#: Occupied target leaves always accepted.
INTERPOLATION_FREE_LEAVES = 2**16
#: Largest angle (degrees) of a longitude/latitude point from the centre of all points
#: for which the interpolated product charts chordal distances on the tangent plane.
#: Within it the corners of the plane's bounding square stay inside the sphere
#: (``sqrt(2) sin 40 = 0.91``).
CHART_MAX_DEGREES = 40.0
#: The interpolated product is taken when its largest error at the sampled targets is at
#: most this fraction of the accuracy times the product's size: a margin for the targets
#: not sampled.
INTERPOLATION_MARGIN = 0.1


def compressed_cross_product(block, targets, sites, X, accuracy, distance, kernel, between=None):
    r"""``A @ X`` for the cross-covariance ``A = block(targets, sites)`` without forming
    it: by the black-box fast multipole method where it is checked to be accurate
    enough, else through tiles compressed on the fly.

    The product's size ``P`` is its largest entry at :data:`CROSS_SAMPLE` random targets,
    where it is formed densely. (Kriging weights ``X = C^{-1} (y - F beta)`` are large
    against the mean they give for a small nugget, which a tolerance relative to the
    entries of ``A`` alone would miss.)

    *Interpolated* (:func:`tlrcore.compress.fmm.fmm_product`; work ``O((m + n) p^d)``)
    when `between` is given, the kernel has no time axis (a product of a spatial and a
    temporal kernel is not smooth across equal times) and the points have a chart of at most
    :data:`INTERPOLATION_MAX_DIMENSION` dimensions (:func:`_planar_chart`: x/y, or
    longitude/latitude of one region): at the smallest order ``p`` of
    :data:`INTERPOLATION_ORDERS` whose largest error at the sampled targets is at most
    ``INTERPOLATION_MARGIN * accuracy * P``. The tree is fixed by the sites and the
    bounding cube of all points, so the sampled targets' values are those of the whole
    product: the check is of the product returned.

    *Dense* blocks otherwise for a kernel of coordinate differences (``kernel.structured``,
    whose few large entries ACA's pivoting may miss).

    *Tiled* (:func:`tlrcore.compress.tiled_product.tiled_product`; work ``O(m n /
    tile)``) otherwise: the sites are ordered and tiled as for a TLR factor
    (:func:`site_order`); each target joins the tile of its nearest site (in the points
    of :func:`geostat.distance.ordering_points`), so targets are ordered like the sites
    and a row tile (at most :data:`CROSS_ROW_TILE` targets) lies in the region of one
    site tile. That tile is generated whole; every other is compressed by ACA to the
    absolute Frobenius tolerance ``tau = accuracy P sqrt(r c) / ||X||_F``, with ``r x c``
    the largest tile. An error ``E_b`` of a tile whose entries are uncorrelated with
    ``X_b`` changes a row by ``e_b^T X_b`` of mean square ``||E_b||_F^2 ||X_b||_F^2 / (r
    c)``, so the rows err by ``accuracy P`` in the root mean square over the tiles.

    Parameters
    ----------
    block : callable
        ``block(i, j)`` -> the dense correlation block between the targets ``i`` and the
        sites ``j`` (integer index arrays).
    targets, sites : ndarray of shape (m, d) and (n, d)
    X : ndarray of shape (n, q)
    accuracy : float
        In (0, 1).
    distance : geostat.distance.Distance
    kernel : geostat.kernels.Kernel
    between : callable, optional
        ``between(P, Q)`` -> the correlation between points ``P`` and ``Q`` embedded by
        ``distance.embed``, a function of their Euclidean distance.

    Returns
    -------
    ndarray of shape (m, q)
    """
    sample = np.sort(
        np.random.default_rng(0).choice(
            targets.shape[0], min(CROSS_SAMPLE, targets.shape[0]), replace=False
        )
    )
    exact = block(sample, np.arange(sites.shape[0])) @ X
    error = accuracy * (float(np.abs(exact).max(initial=0.0)) or 1.0)
    if between is not None and not kernel.time_axis:
        product = _interpolated_product(
            between, targets, sites, X, distance, (sample, exact), INTERPOLATION_MARGIN * error
        )
        if product is not None:
            return product
    if kernel.structured:
        return _dense_product(block, targets.shape[0], sites.shape[0], X)
    return _tiled_product(block, targets, sites, X, error, distance, kernel)


def _dense_product(block, m, n, X):
    """The product through dense blocks of about :data:`CROSS_BLOCK_ENTRIES` entries."""
    out = np.empty((m, X.shape[1]))
    step = max(1, CROSS_BLOCK_ENTRIES // max(1, n))
    with progress_counter(-(-m // step), "cross-covariance", unit="block") as counter:
        for start in range(0, m, step):
            rows = np.arange(start, min(start + step, m))
            out[rows] = block(rows, np.arange(n)) @ X
            counter.update()
    return out


def _interpolated_product(between, targets, sites, X, distance, check, error):
    """The interpolated product at the smallest order of :data:`INTERPOLATION_ORDERS`
    whose largest error at the targets ``check[0]`` (against the rows ``check[1]``) is at
    most `error`; None where no order is, the points have no chart
    (:func:`_planar_chart`), or its tree has too many target leaves
    (:data:`INTERPOLATION_LEAVES_PER_SOURCE_LEAF`)."""
    chart = _planar_chart(between, targets, sites, distance)
    if chart is None or not INTERPOLATION_ORDERS:
        return None
    targets_at, sites_at, function, invariant = chart
    bounds = bounding_cube(targets_at, sites_at)
    sample, exact = check
    for order in INTERPOLATION_ORDERS:
        settings = {
            "bounds": bounds,
            "invariant": invariant,
            "leaf_size": balanced_leaf_size(
                sites_at.shape[0], targets_at.shape[0], order, sites_at.shape[1], invariant
            ),
        }
        target_leaves, source_leaves = leaf_counts(
            targets_at, sites_at, settings["leaf_size"], bounds
        )
        if target_leaves > max(
            INTERPOLATION_FREE_LEAVES, INTERPOLATION_LEAVES_PER_SOURCE_LEAF * source_leaves
        ):
            logger.info(
                "the interpolated cross-covariance would take %d target leaves for %d source "
                "leaves (clustered sites): another product instead",
                target_leaves,
                source_leaves,
            )
            return None
        rows = fmm_product(function, targets_at[sample], sites_at, X, order, **settings)
        largest = float(np.abs(rows - exact).max(initial=0.0))
        if largest <= error:
            logger.debug(
                "cross-covariance interpolated at order %d: error %.3g at %d targets",
                order,
                largest,
                sample.size,
            )
            return fmm_product(
                function, targets_at, sites_at, X, order, description="cross-covariance", **settings
            )
    logger.info(
        "the interpolated cross-covariance erred by %.3g at order %d, above %.3g: "
        "another product instead",
        largest,
        order,
        error,
    )
    return None


def _planar_chart(between, targets, sites, distance):
    """``(targets, sites, function, invariant)``: coordinates of at most
    :data:`INTERPOLATION_MAX_DIMENSION` dimensions, the correlation as a function of
    them and whether it depends on their difference alone; None where there are none.

    The embedded points where they have few enough dimensions (`between` as it is);
    for chordal distances of points within :data:`CHART_MAX_DEGREES` of their centre,
    their orthographic projections on the tangent plane there, lifted back to the sphere
    by `function` (smooth on the hemisphere, though not of differences).
    """
    sites_at = distance.embed(sites)
    if sites_at is not None and sites_at.shape[1] <= INTERPOLATION_MAX_DIMENSION:
        return distance.embed(targets), sites_at, between, True
    if type(distance) is not Distance or distance.name != "chordal":
        return None
    try:
        center, widest = spherical_cap(np.vstack([targets, sites]))
    except ValueError:  # the points surround the globe
        return None
    if widest > CHART_MAX_DEGREES:
        return None
    plane = TangentPlaneDistance(center, distance.radius)

    def function(P, Q):
        return between(plane.lift(P), plane.lift(Q))

    return plane.embed(targets), plane.embed(sites), function, False


def _tiled_product(block, targets, sites, X, error, distance, kernel):
    """The product through tiles compressed to a row error `error` in the root mean
    square (:func:`compressed_cross_product`)."""
    perm, tile_size = site_order(sites, distance, kernel, "kdtree")
    site_tiles = [perm[start : start + tile_size] for start in range(0, perm.size, tile_size)]
    owner = np.empty(perm.size, dtype=np.intp)
    for t, tile in enumerate(site_tiles):
        owner[tile] = t
    _, nearest = cKDTree(ordering_points(sites, distance)).query(ordering_points(targets, distance))
    target_tile = owner[nearest]
    order = np.argsort(target_tile, kind="stable")
    bounds = np.searchsorted(target_tile[order], np.arange(len(site_tiles) + 1))
    row_tiles, dense_rows = [], []
    for t in range(len(site_tiles)):
        members = order[bounds[t] : bounds[t + 1]]
        for start in range(0, members.size, CROSS_ROW_TILE):
            row_tiles.append(members[start : start + CROSS_ROW_TILE])
            dense_rows.append(t)
    dense = np.zeros((len(row_tiles), len(site_tiles)), dtype=bool)
    dense[np.arange(len(row_tiles)), dense_rows] = True
    largest = max((tile.size for tile in row_tiles), default=1)
    weight = max(float(np.linalg.norm(X)), np.finfo(float).tiny)
    return tiled_product(
        block,
        row_tiles,
        site_tiles,
        X,
        error * np.sqrt(largest * tile_size) / weight,
        dense,
        description="cross-covariance",
    )


def tlr_covariance(
    coords,
    kernel,
    params,
    distance,
    accuracy=1e-8,
    tile_size=None,
    ordering="kdtree",
    method="aca",
    random_state=0,
    backend=NUMPY,
    deferred=False,
):
    """Tile low-rank covariance matrix of `coords`, with the sites reordered for compression.

    Parameters
    ----------
    coords : ndarray of shape (n, d)
    kernel : geostat.kernels.Kernel
    params : dict
        ``variance``, ``range``, ``nugget`` and the kernel's shape parameters.
    distance : geostat.distance.Distance
    accuracy : float, default 1e-8
        Relative Frobenius accuracy of the compression.
    tile_size : int, optional
        Default :func:`geostat.ordering.auto_tile_size`.
    ordering : {"kdtree", "morton", "none"}, default "kdtree"
    method : {"aca", "ara", "svd"}, default "aca"
    random_state : int, default 0
    backend : tlrcore.backends.Backend, default NUMPY
    deferred : bool, default False
        Compress each tile column when first read (:func:`tlr_matrix`).

    Returns
    -------
    matrix : tlrcore.TLRMatrix
        Covariance of ``coords[perm]``.
    perm : ndarray of shape (n,)
        The site permutation; undo it with ``geostat.ordering.inverse_permutation``.
    """
    perm, tile_size = site_order(coords, distance, kernel, ordering, tile_size)
    block = Sites(coords[perm], distance, backend).covariance_block(kernel, params)
    return tlr_matrix(
        block, coords.shape[0], tile_size, accuracy, method, random_state, backend, deferred
    ), perm
