"""Adaptive randomized approximation (ARA), then SVD recompression.

ARA ([1]_, Algorithm 1; [2]_) sees the block ``A`` (m x p) only through ``A @ X`` and
``A.T @ X``: Gaussian blocks ``Omega`` of ``b`` columns are drawn and ``Y = A Omega``,
orthogonalized against the basis ``Q`` (block Gram-Schmidt, twice), appended until the
samples show that ``Q`` captures ``A``; then ``Q (A^T Q)^T`` is truncated by SVD. As
``E ||M w||^2 = ||M||_F^2`` for Gaussian ``w``, ``e = ||(I - Q Q^T) A Omega||_F / sqrt(b)``
estimates ``E = ||(I - Q Q^T) A||_F`` without bias; sampling stops at ``e <= _SAFETY
tol`` without appending that block (a narrower block is appended still), at a complete
basis, or at a block with no direction above rounding.

The two parts of ``A - U V^T = (I - Q Q^T) A + (Q Q^T A - U V^T)`` are orthogonal, so the
truncation gets ``sqrt(tol^2 - (2 e)^2) >= 0.87 tol``. ``E <= 2 e`` fails only if ``e^2``
falls below a quarter of its mean: for a residual in one direction ``P(chi2_b < b / 4)``,
about 1e-3 for ``b = 16``; the error then exceeds `tol` by at most ``E - 2 e``.

References
----------
.. [1] Boukaram, W., Zampini, S., Turkiyyah, G., Keyes, D. E. (2021). H2OPUS-TLR: High
   performance tile low rank symmetric factorizations using adaptive randomized
   approximation. arXiv:2108.11932.
.. [2] Halko, N., Martinsson, P.-G., Tropp, J. A. (2011). Finding structure with
   randomness: probabilistic algorithms for constructing approximate matrix
   decompositions. SIAM Review 53(2), 217-288.
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
    """The Gaussian test matrices of one ARA compression, drawn in order from the Generator
    `rng`: ARA calls :meth:`first`, then :meth:`next`, and nothing else (a subclass may hand
    out draws shared by the tiles of a column)."""

    def __init__(self, rng):
        self.rng = rng

    def first(self, rows, blocks, block_size):
        """`blocks` blocks of `block_size` columns side by side, shape
        ``(rows, blocks * block_size)``."""
        return self.rng.standard_normal((rows, blocks * block_size))

    def next(self, rows, columns):
        """A later draw (or a first one of a single, narrower block), shape ``(rows, columns)``."""
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
    matmat, rmatmat : callable
        ``matmat(X)`` returns ``A @ X`` for ``X`` of shape ``(p, b)``; ``rmatmat(X)``,
        ``A.T @ X`` for ``X`` of shape ``(m, b)``.
    shape : tuple of int
        ``(m, p)``, the shape of ``A``.
    tol : float
        ``||A - U V^T||_F <= tol`` with high probability (the sampling error is estimated);
        0 samples until the basis is complete.
    block_size : int, default 16
        Random vectors sampled at a time.
    max_rank : int or None, default None
        Largest rank; when it binds, after up to ``max_rank + max(block_size, max_rank // 2)``
        samples, the error exceeds `tol` without an error.
    rng : numpy.random.Generator or int or None, default None
        An int is a seed, None seed 0 (reproducible); a Generator is advanced.
    rank_hint : int or None, default None
        The rank expected: the first product samples ``ceil(rank_hint / block_size) + 1``
        blocks (at least two), still appended one at a time (wide products cost about as much
        as narrow ones).
    draws : GaussianBlocks or None, default None
        Source of the Gaussian blocks (default ``GaussianBlocks(rng)``; then `rng` is unused).

    Returns
    -------
    U : ndarray of shape (m, k)
        Carries the singular values.
    V : ndarray of shape (p, k)
        Orthonormal columns.

    Raises
    ------
    ValueError
        If an argument is invalid, or a callback returns a wrong shape or non-finite values.
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
    """Blocks in ARA's first product for `rank_hint` (checked): the rank's and one more, at
    least two."""
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
    """Orthonormal ``Q`` (at most `limit` columns) with estimated error ``<= tau``, and the
    estimate: of `Q` when it met `tau`, else of the basis before the last panel, ``inf`` if
    nothing was sampled. The first `first_blocks` blocks come from one draw and one product,
    measured and appended one at a time."""
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
    """Orthonormal basis of the part of ``Y`` (projected once) orthogonal to ``Q``.

    Pivoted QR drops directions with ``|R_jj| <= noise``; a second projection and QR restore
    orthogonality to working precision (with no ``Q``, the QR's columns are already the basis)."""
    panel, r, _ = scipy.linalg.qr(Y, mode="economic", pivoting=True, check_finite=False)
    kept = int(np.count_nonzero(np.abs(np.diag(r)) > noise))
    if kept == 0:
        return np.empty((Q.shape[0], 0))
    if Q.shape[1] == 0:
        return panel[:, :kept]
    panel = _project_out(Q, panel[:, :kept])
    panel, _ = scipy.linalg.qr(panel, mode="economic", check_finite=False)
    return panel
