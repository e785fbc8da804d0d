"""Adaptive randomized approximation (ARA), then SVD recompression.

Algorithm 1 (sec. 3.1) of the batched tile low-rank Cholesky of Boukaram et al. [1]_: the
block ``A`` (m x p) is touched only through ``A @ X`` and ``A.T @ X``. Gaussian blocks ``Omega`` of `block_size`
columns are drawn, ``Y = A Omega`` is made orthogonal to the basis ``Q`` built so far
(block Gram-Schmidt and QR of the panel, done twice) and appended, until the samples
show that ``Q`` captures ``A``. Then ``B = A^T Q`` and ``Q B^T = Q Q^T A`` is truncated
by SVD.

Stopping rule
-------------
For a Gaussian vector ``w``, ``E ||M w||^2 = ||M||_F^2``. Before a new block is
appended, its projected samples ``(I - Q Q^T) A Omega`` therefore give the unbiased
estimate ``e = ||(I - Q Q^T) A Omega||_F / sqrt(b)`` of the current error
``||(I - Q Q^T) A||_F``. The loop stops when ``e <= _SAFETY * tol`` (``_SAFETY = 0.25``),
without appending that last block: its samples only measured the basis. On 648 kernel
blocks (exponential, Matern-3/2 and Gaussian kernels, three length scales, tolerances
1e-2 to 1e-10 of the block norm) the final sampling error was a median 1.02 ``e`` and at
most 1.81 ``e``. Appending the block as well lowered it to 0.08 ``e`` but cost 16 more
basis columns per tile: with TLR ranks of 20-30 that is a third more columns in every
tile's ``B = A^T Q``, its SVD and the Gram-Schmidt products, and the left-looking
factorization at n = 65,536 took 15 % longer (its accuracy, ranks and log-determinant
the same to 1e-12 relative). A block narrower than `block_size` (the basis within
`block_size` columns of complete, or a small block) is appended even then: its estimate
rests on fewer samples (``P(chi2_w < w / 4)``, 0.38 for one sample, against 1e-3 for 16;
see below), and appending it leaves the basis complete or nearly so. The loop also stops
when the basis is complete (``min(m, p)`` columns, exact) or when a block brings no
direction above rounding noise.

The final error splits into two orthogonal parts, ``A - U V^T = (I - Q Q^T) A +
(Q Q^T A - U V^T)``: the first is orthogonal to the range of ``Q``, the second lies in
it. So ``||A - U V^T||_F^2 = E^2 + T^2``, with ``E`` the sampling error and ``T`` the
exact truncation error, and the truncation may use ``sqrt(tol^2 - (2 e)^2)``, at least
``0.87 tol``. ``E <= 2 e`` fails only if ``e^2`` falls below a quarter of its mean:
``e^2 / E^2`` is a weighted mean of `block_size` chi-square(1) variables, so for a
residual concentrated in a single direction this has probability
``P(chi2_16 < 4) ~ 1e-3`` (``block_size = 16``), far less for the many-direction
residuals of kernel blocks; the tile's error then exceeds `tol` by at most the excess of
``E`` over ``2 e``. A factorization's accuracy sums the squared errors of all its tiles,
most of them well below their tolerance: at n = 8,192 (exponential, Matern 1.5 and 2.5
kernels, accuracy 1e-6 to 1e-10) ``||L L^T - A||_F`` came out at 0.52-0.69 of the
requested ``accuracy * ||A||_F``, with this rule as with the appended block. Ranks come
out at the SVD optimum or one above.

References
----------
.. [1] Boukaram, W., Zampini, S., Turkiyyah, G., and Keyes, D. E. (2021). H2OPUS-TLR:
   High performance tile low rank symmetric factorizations using adaptive randomized
   approximation. arXiv:2108.11932.
"""

import math
import numbers

import numpy as np
import scipy.linalg

from tlrcore.compress._recompress import (
    check_block_output,
    check_max_rank,
    check_shape,
    check_tol,
    empty_factors,
    recompress_orthonormal,
)

__all__ = ["GaussianBlocks", "ara_compress"]

#: Sampling stops when the estimated error is below ``_SAFETY * tol``.
_SAFETY = 0.25
#: The sampling error is taken to be at most this multiple of its estimate.
_ESTIMATE_MARGIN = 2.0
#: Directions of a sample panel below this multiple of ``||A Omega||_F`` are rounding noise.
_NOISE = 64 * np.finfo(np.float64).eps


class GaussianBlocks:
    """The Gaussian test matrices ``Omega`` of one ARA compression, drawn in order from
    `rng`: :meth:`first` for the first product, which samples several blocks at once,
    then :meth:`next` for each later one.

    A subclass may hand out other draws (shared ones: the tiles of a column of the
    left-looking Cholesky sample with the same blocks, drawn once for the column); ARA
    calls these two methods and nothing else of it.

    Parameters
    ----------
    rng : numpy.random.Generator
    """

    def __init__(self, rng):
        self.rng = rng

    def first(self, rows, blocks, block_size):
        """The first draw: `blocks` blocks of `block_size` columns side by side, shape
        ``(rows, blocks * block_size)``."""
        return self.rng.standard_normal((rows, blocks * block_size))

    def next(self, rows, columns):
        """A later draw (or a first one of a single, narrower block): shape ``(rows,
        columns)``."""
        return self.rng.standard_normal((rows, columns))


def ara_compress(
    matmat,
    rmatmat,
    shape,
    tol,
    block_size=16,
    max_rank=None,
    rng=None,
    rank_hint=None,
    draws=None,
):
    """Compress a block by adaptive randomized sampling and SVD recompression.

    Parameters
    ----------
    matmat : callable
        ``matmat(X)`` returns ``A @ X`` of shape ``(m, b)`` for ``X`` of shape ``(p, b)``.
    rmatmat : callable
        ``rmatmat(X)`` returns ``A.T @ X`` of shape ``(p, b)`` for ``X`` of shape ``(m, b)``.
    shape : tuple of int
        ``(m, p)``, the shape of ``A``.
    tol : float
        Absolute Frobenius tolerance, ``||A - U V^T||_F <= tol`` (with high probability:
        the sampling error is estimated). ``0`` samples until the basis is complete.
    block_size : int, default 16
        Number of random vectors sampled at a time.
    max_rank : int or None, default None
        Largest rank returned. When it binds, sampling goes up to ``max_rank +
        max(block_size, max_rank // 2)`` vectors and the result is truncated to
        `max_rank`; its error then exceeds `tol` and no error is raised.
    rng : numpy.random.Generator or int or None, default None
        Source of the random samples; an int is a seed and ``None`` means seed 0, so
        results are reproducible. A Generator is advanced.
    rank_hint : int or None, default None
        The rank expected (for example that of a nearby or earlier version of the
        block). The first product then samples ``ceil(rank_hint / block_size) + 1``
        blocks (at least two) at once; they are appended one at a time as usual, so the
        basis stops growing where the samples say, whatever the hint. A good hint saves
        products with few columns, which cost nearly as much as products with many; a
        hint far above the rank costs the samples not needed.
    draws : GaussianBlocks or None, default None
        Where the Gaussian blocks come from; default ``GaussianBlocks(rng)``. When given,
        `rng` is not used.

    Returns
    -------
    U : ndarray of shape (m, k)
        Carries the singular values of the approximation.
    V : ndarray of shape (p, k)
        Orthonormal columns.

    Raises
    ------
    ValueError
        If `tol`, `max_rank`, `shape`, `block_size`, `rng` or `rank_hint` is invalid, or `matmat` or
        `rmatmat` returns an array of the wrong shape or with NaN or infinite values.
    numpy.linalg.LinAlgError
        If an SVD does not converge.
    """
    tol = check_tol(tol)
    max_rank = check_max_rank(max_rank)
    m, p = check_shape(shape)
    block_size = _check_block_size(block_size)
    if draws is None:
        draws = GaussianBlocks(_as_generator(rng))
    first_blocks = _first_blocks(rank_hint, block_size)
    if m == 0 or p == 0 or max_rank == 0:
        return empty_factors(m, p)
    limit = min(m, p)
    if max_rank is not None:
        limit = min(limit, max_rank + max(block_size, max_rank // 2))

    def sample(omega):
        return check_block_output(matmat(omega), (m, omega.shape[1]), "matmat")

    Q, estimate = _range_finder(
        sample, (m, p), _SAFETY * tol, limit, block_size, draws, first_blocks
    )
    B = check_block_output(rmatmat(Q), (p, Q.shape[1]), "rmatmat")
    sampling_error = 0.0 if Q.shape[1] == min(m, p) else _ESTIMATE_MARGIN * estimate
    budget = math.sqrt(max(tol * tol - sampling_error * sampling_error, 0.0))
    return recompress_orthonormal(Q, B, budget, max_rank)


def _check_block_size(block_size):
    """Return `block_size` as an int ``>= 1``; ValueError otherwise."""
    integer = isinstance(block_size, numbers.Integral) and not isinstance(block_size, bool)
    if not integer or block_size < 1:
        raise ValueError(f"block_size must be an integer >= 1; got {block_size!r}.")
    return int(block_size)


def _first_blocks(rank_hint, block_size):
    """Blocks of ARA's first product for `rank_hint` (checked): enough to cover the rank
    and one more to measure it, at least two."""
    if rank_hint is None:
        return 2
    if not isinstance(rank_hint, numbers.Integral) or isinstance(rank_hint, bool) or rank_hint < 0:
        raise ValueError(f"rank_hint must be None or an integer >= 0; got {rank_hint!r}.")
    return max(2, -(-int(rank_hint) // block_size) + 1)


def _as_generator(rng):
    """A numpy Generator from `rng` (Generator, seed or None meaning seed 0)."""
    if isinstance(rng, np.random.Generator):
        return rng
    try:
        return np.random.default_rng(0 if rng is None else rng)
    except (TypeError, ValueError):
        raise ValueError(
            f"rng must be a numpy Generator, an integer seed or None; got {rng!r}."
        ) from None


def _range_finder(sample, shape, tau, limit, block_size, draws, first_blocks=2):
    """Orthonormal basis ``Q`` of at most `limit` columns with estimated error ``<= tau``.

    The blocks are drawn one after the other, except that the first `first_blocks` (as
    many as `limit` leaves room for, and at least two) come from one draw and are
    sampled by one product: most tiles of a TLR factorization stop after their second
    block, and a product with twice the columns costs far less than two (each reads the
    operator's factors from memory once: in the left-looking factorization at 131,072
    sites, 1.7 ms against 2 x 1.27 ms for a stacked factor of 2048 x 320). The blocks
    sampled together are still measured and appended one at a time, as blocks drawn one
    after the other would be; those left when the estimate is met go unused.

    Returns
    -------
    Q : ndarray of shape (m, k)
        Orthonormal columns.
    estimate : float
        Estimate of ``||(I - Q Q^T) A||_F`` from the last samples: of `Q` itself when it
        met `tau` (those samples are not appended), else of the basis before the last
        panel, an upper estimate of the error of `Q`; ``inf`` if the loop never sampled.
    """
    m, p = shape
    Q = np.empty((m, 0))
    estimate = math.inf
    pending = []  # blocks sampled and not yet measured
    blocks = max(2, min(first_blocks, limit // block_size))
    while Q.shape[1] < limit:
        if not pending:
            if Q.shape[1] == 0 and limit >= 2 * block_size:
                # The first blocks in one product: each measures the basis of those before.
                sampled = sample(draws.first(p, blocks, block_size))
                pending = [
                    sampled[:, j : j + block_size] for j in range(0, sampled.shape[1], block_size)
                ]
            else:
                pending = [sample(draws.next(p, min(block_size, limit - Q.shape[1])))]
        Y = pending.pop(0)
        noise = _NOISE * np.linalg.norm(Y)
        Y = _project_out(Q, Y)
        estimate = np.linalg.norm(Y) / math.sqrt(Y.shape[1])
        if estimate <= tau and Y.shape[1] == block_size:
            break
        panel = _orthonormal_panel(Q, Y, noise)
        Q = np.hstack([Q, panel])
        if estimate <= tau or panel.shape[1] == 0:
            break
    return Q, estimate


def _project_out(Q, Y):
    """``(I - Q Q^T) Y`` (a new array)."""
    return Y - Q @ (Q.T @ Y) if Q.shape[1] else Y.copy()


def _orthonormal_panel(Q, Y, noise):
    """Orthonormal basis of the part of ``Y`` (already projected once) orthogonal to ``Q``.

    Pivoted QR of ``Y`` drops directions whose ``|R_jj| <= noise`` (rounding noise, whose
    basis vectors would not be orthogonal to ``Q``); a second projection and QR restore
    orthogonality to working precision (block Gram-Schmidt with re-orthogonalization).
    With no ``Q`` yet, the Householder QR's columns are the basis: orthonormal to working
    precision already.
    """
    panel, r, _ = scipy.linalg.qr(Y, mode="economic", pivoting=True, check_finite=False)
    kept = int(np.count_nonzero(np.abs(np.diag(r)) > noise))
    if kept == 0:
        return np.empty((Q.shape[0], 0))
    if Q.shape[1] == 0:
        return panel[:, :kept]
    panel = _project_out(Q, panel[:, :kept])
    panel, _ = scipy.linalg.qr(panel, mode="economic", check_finite=False)
    return panel
