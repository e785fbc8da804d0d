r"""Safeguards that let the TLR Cholesky factor matrices which lost definiteness.

A compressed covariance ``A_tlr = A - E_A`` of a numerically singular ``A`` (a smooth
kernel, a long range, near-duplicate sites) is indefinite by about the tile tolerance
``tau``, and the factorization adds its own compression errors ``F`` (one ``tau`` per
updated tile): what it factors is ``A_tlr + F``. The safeguards change the diagonal tiles
on purpose, by an ``E`` they tally, so that ``L L^T = A_tlr + F + E``:

``"shift"``
    Retry with ``s I`` added, ``s = tau, 2 tau, 4 tau, ...`` (on top of any explicit
    `shift`), until the factorization succeeds. Block Gershgorin bounds the negative
    eigenvalues of ``E_A + F`` by ``2 (n_t - 1) tau``, so success is certain (up to
    rounding and the ARA's probabilistic error estimate) once ``s`` passes that bound;
    the retries stop one doubling later. ``||E||_F = s sqrt(n)``.
``"schur"``
    Schur compensation (H2Opus sec. 5.1.1): the update ``W W^T`` of a failing diagonal
    tile is split by the eigenvalues of ``W W^T`` into the part that survives compression to
    ``tau`` and a positive semidefinite tail ``T`` (``||T||_F <= tau``); the tail is
    compensated in diagonal form, ``diag(rowsum |T|)``, which dominates ``T`` (Gershgorin).
``"modified"``
    Modified Cholesky on a diagonal tile that is not positive definite (Algorithm 8):
    Gill–Murray–Wright with ``delta = tau``, raised once to ``4 tau`` if ``dpotrf`` does
    not accept ``D + E``. A ``delta`` far below ``tau`` would leave ``L(k, k)^{-1}`` free
    to amplify the compression error of the tiles below it into all later Schur
    complements; but even a tile modified by about ``tau`` feeds errors of order ``tau``
    into the next Schur complements, which then need larger changes. On the Gaussian,
    Matérn 2.5 and duplicated-site covariances of ``benchmarks/tlr_safeguards.py`` it
    fails (allowed to grow ``delta`` to ``256 tau``, it changed ``A`` by 10% of
    ``||A||_F``), where ``"shift"`` needs 6e-4 to 1.4e-3 ``||A||_F`` at accuracy 1e-4.
    Use it for isolated failing tiles (sites repeated within a tile). GMW, not
    Cheng–Higham: on these nearly semidefinite tiles GMW's diagonal ``E`` is within 10%
    of the smallest eigenvalue lift, Cheng–Higham's (rook) 12-17 times larger (measured
    at ``delta`` = 1-16 ``tau`` on Gaussian and duplicated-site Matérn tiles).
``"pivot"``
    Tile pivoting (Algorithm 9), see :mod:`tlrcore.cholesky.pivoted`.

A positive definite input that factors without them is never changed: all of them act
only when a tile fails. (H2Opus compensates every diagonal tile; that would perturb
positive definite input by up to ``tau`` per tile and cost an eigendecomposition per tile
even when nothing fails.)
"""

from __future__ import annotations

import logging

import numpy as np
from scipy.linalg import eigh
from scipy.linalg.lapack import dpotrf

from tlrcore.dense import modified_cholesky
from tlrcore.errors import NotPositiveDefiniteError

__all__ = ["SAFEGUARDS", "ZERO_MATRIX_HINT", "DiagonalFactorizer", "parse_safeguard", "shift_schedule", "tile_failure"]

logger = logging.getLogger(__name__)

SAFEGUARDS = ("schur", "modified", "pivot", "shift")
_DELTA_RAISES = 1  # delta = tau, then 4 tau
#: The way out when the tile tolerance, the unit of the safeguards, is zero.
ZERO_MATRIX_HINT = ("Pass an explicit shift=, e.g. shift=1e-8 times the size the diagonal entries should have, "
                    "or check how A was built.")


def parse_safeguard(safeguard):
    """The set of safeguards named by `safeguard` (None, a name, ``"a+b"``, or a sequence).

    Raises
    ------
    ValueError
        For a name other than those in :data:`SAFEGUARDS`.
    """
    if safeguard is None:
        return frozenset()
    if isinstance(safeguard, str):
        names = [part.strip() for part in safeguard.split("+")]
    elif isinstance(safeguard, (list, tuple, set, frozenset)) and all(isinstance(s, str) for s in safeguard):
        names = list(safeguard)
    else:
        raise ValueError(
            f"safeguard must be None, one of {SAFEGUARDS}, a '+'-joined combination such as "
            f"'schur+modified', or a sequence of names; got {safeguard!r}."
        )
    unknown = [name for name in names if name not in SAFEGUARDS]
    if unknown:
        raise ValueError(f"unknown safeguard {unknown[0]!r}; choose from {SAFEGUARDS} (combinations allowed).")
    return frozenset(names)


def check_shift(shift):
    """`shift` as a float; TypeError or ValueError naming the argument."""
    if isinstance(shift, bool) or not isinstance(shift, (int, float, np.integer, np.floating)):
        raise TypeError(f"shift must be a finite number >= 0; got {type(shift).__name__}.")
    if not (np.isfinite(shift) and shift >= 0):
        raise ValueError(f"shift must be a finite number >= 0; got {shift!r}.")
    return float(shift)


def shift_schedule(tolerance, n_tiles):
    """Automatic shifts ``tau * 2^m`` up to one doubling past the bound ``2 (n_t - 1) tau``;
    none for ``tau = 0`` (a zero matrix: no relative scale)."""
    if tolerance == 0:
        return []
    bound = 2.0 * max(n_tiles - 1, 1) * tolerance
    shifts = [tolerance]
    while shifts[-1] < 2.0 * bound:
        shifts.append(2.0 * shifts[-1])
    return shifts


class DiagonalFactorizer:
    """Factors the updated diagonal tiles, with the shift and safeguards, and tallies ``E``.

    A tile is first factored as it is (plus the shift). Only if that fails, the Schur
    compensation and then the modification are tried, in that order, so a matrix that
    factors without them is not changed at all.

    Parameters
    ----------
    tolerance : float
        Tile tolerance ``tau``: the Schur compensation threshold and the modified
        Cholesky's smallest pivot.
    shift : float
        Added to every diagonal entry.
    schur, modified : bool
        Compensate, then modify, tiles that are not positive definite.

    Attributes
    ----------
    squared : float
        ``||E||_F^2`` so far.
    compensated_tiles, modified_tiles : list of int
        Factor positions of the tiles that were compensated or modified.
    """

    def __init__(self, tolerance, shift=0.0, schur=False, modified=False):
        self.tolerance, self.shift = tolerance, shift
        self.schur, self.modified = schur, modified
        self.squared = 0.0
        self.compensated_tiles, self.modified_tiles = [], []

    def record_shift(self, size):
        """Count the shift on `size` diagonal entries in ``||E||_F``."""
        self.squared += self.shift**2 * size

    def factor(self, D, W, k):
        """Lower Cholesky factor of the updated tile `D` (``A(k, k) - W W^T``, lower
        triangle, Fortran order; overwritten).

        Raises
        ------
        NotPositiveDefiniteError
            If the tile is not positive definite and the safeguards did not help.
        """
        if self.shift:
            D[np.diag_indices(D.shape[0])] += self.shift
            self.record_shift(D.shape[0])
        kept = np.tril(D) if (self.schur or self.modified) else None
        L, info = dpotrf(D, lower=1, clean=1, overwrite_a=True)
        if info < 0:
            raise ValueError(f"LAPACK dpotrf rejected argument {-info}.")
        if info == 0:
            return L
        if self.schur and W.shape[1]:
            compensation = _schur_compensation(W, self.tolerance)
            kept[np.diag_indices(kept.shape[0])] += compensation
            L, info = dpotrf(np.asfortranarray(kept), lower=1, clean=1)
            if info == 0 or self.modified:
                self.squared += float(compensation @ compensation)
                self.compensated_tiles.append(k)
                logger.debug("diagonal tile %d compensated: ||E||_F = %.3g", k, np.linalg.norm(compensation))
            if info == 0:
                return L
        if self.modified:
            return self._modified(kept + np.tril(kept, -1).T, k)
        raise tile_failure(k, info)

    def _modified(self, M, k):
        if self.tolerance == 0:
            raise NotPositiveDefiniteError(
                f"diagonal tile {k} is not positive definite, and modified Cholesky has no smallest pivot: "
                f"its delta is the tile tolerance, 0 because ||A||_F = 0 (A is zero). {ZERO_MATRIX_HINT}",
                tile=k,
            )
        delta = self.tolerance
        for _ in range(_DELTA_RAISES + 1):
            change = modified_cholesky(M, method="gmw", return_E=True, delta=delta)
            L, info = dpotrf(np.asfortranarray(M + change.E), lower=1, clean=1, overwrite_a=True)
            # An E beyond what lifting every eigenvalue by 2 delta needs comes from growth
            # in the LDL^T factor, not from the tile: refuse it rather than report it.
            if info == 0 and change.E_norm <= 2.0 * delta * np.sqrt(M.shape[0]):
                self.squared += change.E_norm**2
                self.modified_tiles.append(k)
                logger.debug("diagonal tile %d modified (delta %.3g): ||E||_F = %.3g", k, delta, change.E_norm)
                return L
            delta *= 4.0
        raise NotPositiveDefiniteError(
            f"diagonal tile {k} stayed indefinite after modified Cholesky up to delta = {delta / 4:.3g} "
            f"({4**_DELTA_RAISES} tile tolerances): the compression errors of the earlier tiles grew "
            "through their inverses. Use safeguard='shift' (or add it: 'modified+shift').",
            tile=k,
        )

    @property
    def perturbation(self):
        """``||E||_F`` of the changes made so far."""
        return float(np.sqrt(self.squared))


def _schur_compensation(W, tolerance):
    """``rowsum |T|`` for the tail ``T`` of ``W W^T`` dropped by compression to `tolerance`.

    ``W W^T = sum_j lambda_j q_j q_j^T``; the tail is the set of smallest ``lambda_j``
    with ``sqrt(sum lambda_j^2) <= tolerance``. The eigenvalues come from the smaller of
    ``W^T W`` and ``W W^T``.
    """
    rows, cols = W.shape
    if cols <= rows:
        lam, Z = eigh(W.T @ W, check_finite=False)
        tail = _tail_count(np.maximum(lam, 0.0), tolerance)
        Y = W @ Z[:, :tail]
    else:
        lam, Q = eigh(W @ W.T, check_finite=False)
        lam = np.maximum(lam, 0.0)
        tail = _tail_count(lam, tolerance)
        Y = Q[:, :tail] * np.sqrt(lam[:tail])
    if tail == 0:
        return np.zeros(rows)
    return np.abs(Y @ Y.T).sum(axis=1)


def _tail_count(lam, tolerance):
    """Number of leading (smallest) entries of ascending `lam` with ``||.||_2 <= tolerance``."""
    return int(np.searchsorted(np.sqrt(np.cumsum(lam * lam)), tolerance, side="right"))


def tile_failure(k, info):
    """The :class:`NotPositiveDefiniteError` for diagonal tile `k`, whose leading minor of
    order `info` failed."""
    return NotPositiveDefiniteError(
        f"diagonal tile {k} is not positive definite after its update (leading minor "
        f"{info}); the matrix is not positive definite at this accuracy. Tighten the "
        "accuracy, add a nugget, or use a safeguard (safeguard='shift' adds the "
        "smallest diagonal shift that works, a multiple of the tile tolerance).",
        tile=k,
    )
