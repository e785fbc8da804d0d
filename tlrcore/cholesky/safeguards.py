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
``"compensate"`` (``"compensate-block"``)
    Always-on compensation (H2Opus sec. 5.1.1 with the diagonal compensation of the
    off-diagonal errors), applied to *every* diagonal tile before its Cholesky, so that
    the Schur complements do not lose definiteness in the first place:

    * the accumulated update ``D_k = W W^T`` is compressed to ``tau`` (its smallest
      eigenvalues, ``sqrt(sum lambda_j^2) <= tau``) and the positive semidefinite
      difference ``T_k = D_k - D̄_k`` is added back, as ``diag(rowsum |T_k|)`` (the
      paper's preferred diagonal form, ``"compensate"``: Gershgorin gives
      ``diag(rowsum |T|) - T ⪰ 0``) or as ``T_k`` itself (``"compensate-block"``);
      ``||T_k||_F <= tau``, so the block form changes a tile by at most ``tau``, the
      rowsum form by at most ``sqrt(b) tau`` (``b`` the tile size);
    * the compression errors of the off-diagonal tiles (``E_A`` of ``A_tlr`` and ``F``
      of the factor, each tile at most ``tau`` in Frobenius norm) enter as the block
      off-diagonal symmetric ``G = E_A + F``; by block Gershgorin (``2 |x_i| |x_j| <=
      |x_i|^2 + |x_j|^2``), ``-G ⪯ blockdiag(sum_{j != k} ||G_kj||_2 I)``, at most
      ``2 (n_t - 1) tau I``: the guaranteed compensation, as large as the shift bound.
      Measured on the matrices of ``benchmarks/tlr_safeguards.py`` (4,096 sites, tile
      256, accuracy 1e-4): ``||E_A,kj||_2 ~ 0.36 tau`` and the Gershgorin sums 5-6
      ``tau`` for ``E_A`` alone (``||C||_F = 1.8e-3 ||A||_F``, 18 times the accuracy,
      twice that with ``F``), while ``lambda_min(A_tlr) = -1.44 tau``, which is
      ``sqrt(n_t - 1) * 0.36 tau``: errors of independent tiles add like a random sum,
      not in phase. The compensation therefore adds ``c_off tau`` to every diagonal
      entry, ``c_off = OFF_DIAGONAL_COMPENSATION = 2``: the smallest power of two that
      factors the Gaussian (range 0.1, 0.3), Matérn 2.5 and duplicated-site matrices
      (``c_off = 1`` fails on the Gaussian of range 0.3 and on Matérn 2.5 at accuracy
      1e-4). It needs no information beyond ``tau``: recording per-tile error norms
      in the build would allow the guaranteed Gershgorin form, at 10-40 times the
      accuracy in ``||E||_F``.

    Positive definite input gets it too (it is part of the approximation). Accuracy
    contract: with ``b`` the tile size, ``n = n_t b``, ``tau = eps ||A_tlr||_F / n_t``,

        ``||L L^T - A_tlr||_F <= ||F||_F + ||C||_F``,
        ``||F||_F <= sqrt(n_t (n_t - 1)) tau < eps ||A_tlr||_F``,
        ``||C||_F <= c_off tau sqrt(n) + sqrt(n_t) tau s``,

    with ``s = sqrt(b)`` for the rowsum form and 1 for the block form, so
    ``||L L^T - A_tlr||_F <= c eps ||A_tlr||_F``, ``c = 1 + (c_off + s / sqrt(b))
    sqrt(b / n_t)`` (``c = 1 + 3 sqrt(b / n_t)`` for the rowsum form), and against
    the exact ``A`` one more ``eps ||A||_F`` for the build. ``factor.perturbation``
    is the exact ``||C||_F`` (plus any shift or modification).
``"schur"``
    Schur compensation of a failing tile only: the tail ``T`` above is added in
    diagonal form when ``dpotrf`` fails. It cannot help tile 0 (no update) and does not
    stop the growth described under ``"modified"``; kept for comparison.
``"modified"``
    Modified Cholesky on a diagonal tile that is still not positive definite (Algorithm
    8): Gill–Murray–Wright with ``delta = tau`` (never 0: a zero ``tau`` means ``A = 0``
    and raises), raised once to ``4 tau`` if ``dpotrf`` does not accept ``D + E``, and
    refused if ``||E||_F > 2 delta sqrt(b)`` (growth in the ``LDL^T`` factor, not the
    tile). Why it cannot rescue on its own: a tile lifted to eigenvalues ``~delta``
    makes ``||L(k, k)^{-1}|| ~ delta^{-1/2}``; the compression errors ``~tau`` of the
    tiles below then reach the next Schur complements as ``tau^2 / delta`` and, through
    the cross terms, ``tau sqrt(||A_kk|| / delta)``. A modification that keeps up needs
    ``delta >= tau sqrt(||A_kk|| / delta)``, i.e. ``delta >= tau^(2/3) ||A_kk||^(1/3)``
    (31 ``tau`` on the Gaussian of range 0.3 above). Measured there: without
    compensation, GMW at ``delta`` = 1, 4, 16, 31 ``tau`` produced ``||E||_F`` of
    1e22-1e71 ``||A||_F`` (every tile modified, the growth compounding) and 2e-2 at 64
    ``tau``; Cheng–Higham with rook pivoting 6e-2 at 4 ``tau``, 0.5 at 31 ``tau``.
    With ``"compensate"`` no tile of those matrices fails, so ``"compensate+modified"``
    modifies only what compensation leaves (isolated singular tiles); ``"modified"``
    alone is for sites repeated within a tile. GMW, not Cheng–Higham, in the tile: on
    nearly semidefinite tiles GMW's diagonal ``E`` is within 10% of the smallest
    eigenvalue lift, Cheng–Higham's (rook) 12-17 times larger (measured at ``delta`` =
    1-16 ``tau`` on Gaussian and duplicated-site Matérn tiles).
``"pivot"``
    Tile pivoting (Algorithm 9), see :mod:`tlrcore.cholesky.pivoted`.

``"shift"``, ``"schur"``, ``"modified"`` and ``"pivot"`` change nothing when every tile
factors; ``"compensate"`` changes every tile, by design.
"""

from __future__ import annotations

import logging

import numpy as np
from scipy.linalg import eigh
from scipy.linalg.lapack import dpotrf

from tlrcore.dense import modified_cholesky
from tlrcore.errors import NotPositiveDefiniteError

__all__ = [
    "OFF_DIAGONAL_COMPENSATION",
    "SAFEGUARDS",
    "ZERO_MATRIX_HINT",
    "DiagonalFactorizer",
    "compensation_form",
    "parse_safeguard",
    "shift_schedule",
    "tail_compensation",
    "tile_failure",
]

logger = logging.getLogger(__name__)

SAFEGUARDS = ("compensate", "compensate-block", "schur", "modified", "pivot", "shift")
#: Diagonal compensation of the off-diagonal compression errors, in tile tolerances per
#: diagonal entry (see the module docstring for the measurement that sets it).
OFF_DIAGONAL_COMPENSATION = 2.0
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
    if {"compensate", "compensate-block"} <= set(names):
        raise ValueError("safeguard: choose one form of compensation, 'compensate' (diagonal rowsum form) or "
                         "'compensate-block' (full block form), not both.")
    return frozenset(names)


def compensation_form(guards):
    """``"rowsum"``, ``"block"`` or None: the always-on compensation named in `guards`."""
    if "compensate" in guards:
        return "rowsum"
    return "block" if "compensate-block" in guards else None


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

    A tile gets the shift and, with `compensate`, the always-on compensation, and is
    factored. Only if that fails, the Schur compensation of the failing tile and then
    the modification are tried, in that order.

    Parameters
    ----------
    tolerance : float
        Tile tolerance ``tau``: the compensation threshold and the modified Cholesky's
        smallest pivot.
    shift : float
        Added to every diagonal entry.
    schur, modified : bool
        Compensate, then modify, tiles that are not positive definite.
    compensate : {None, "rowsum", "block"}
        Compensate every tile (module docstring), the update's tail in this form.

    Attributes
    ----------
    total : float
        ``||E||_F^2`` of the changes so far (each tile's changes summed before the norm).
    parts : dict of str to float
        ``||.||_F^2`` of the changes so far by source: ``"shift"``, ``"compensation"``
        (always-on), ``"schur"`` (on failure), ``"modified"``.
    compensated_tiles, modified_tiles : list of int
        Factor positions of the tiles that were compensated or modified.
    """

    def __init__(self, tolerance, shift=0.0, schur=False, modified=False, compensate=None):
        self.tolerance, self.shift = tolerance, shift
        self.schur, self.modified, self.compensate = schur, modified, compensate
        self.total = 0.0
        self.parts = {"shift": 0.0, "compensation": 0.0, "schur": 0.0, "modified": 0.0}
        self.compensated_tiles, self.modified_tiles = [], []

    def record_shift(self, size):
        """Count the shift on `size` diagonal entries in ``||E||_F`` (batched path)."""
        self.parts["shift"] += self.shift**2 * size
        self.total += self.shift**2 * size

    def factor(self, D, W, k):
        """Lower Cholesky factor of the updated tile `D` (``A(k, k) - W W^T``, lower
        triangle, Fortran order; overwritten).

        Raises
        ------
        NotPositiveDefiniteError
            If the tile is not positive definite and the safeguards did not help.
        """
        b = D.shape[0]
        diagonal = np.diag_indices(b)
        change = np.zeros((b, b)) if (self.shift or self.compensate or self.schur or self.modified) else None
        if self.shift:
            D[diagonal] += self.shift
            self._add(change, "shift", self.shift * np.eye(b), k)
        if self.compensate:
            compensation = self.compensation(W)
            D += np.tril(compensation)
            self._add(change, "compensation", compensation, k)
            self.compensated_tiles.append(k)
        kept = np.tril(D) if (self.schur or self.modified) else None
        L, info = dpotrf(D, lower=1, clean=1, overwrite_a=True)
        if info < 0:
            raise ValueError(f"LAPACK dpotrf rejected argument {-info}.")
        if info and self.schur and W.shape[1]:
            compensation = _schur_compensation(W, self.tolerance)
            kept[diagonal] += compensation
            L, info = dpotrf(np.asfortranarray(kept), lower=1, clean=1)
            if info == 0 or self.modified:
                self._add(change, "schur", np.diag(compensation), k)
                if k not in self.compensated_tiles:
                    self.compensated_tiles.append(k)
        if info and self.modified:
            L = self._modified(kept + np.tril(kept, -1).T, k, change)
        elif info:
            raise tile_failure(k, info)
        if change is not None:
            self.total += float(np.sum(change * change))
        return L

    def compensation(self, W):
        """The always-on compensation of a tile with update ``W W^T``
        (:func:`tail_compensation` of the update's tail)."""
        return tail_compensation(np, _update_tail(W, self.tolerance), self.compensate,
                                 np.full(W.shape[0], self.tolerance))

    def tally(self, k, part, norm2):
        """Count a change of tile `k` by `part` with ``||.||_F^2 = norm2`` (batched path,
        where it is the tile's only change besides the shift, which it does not overlap
        off the diagonal)."""
        self.parts[part] += norm2
        self.total += norm2
        logger.debug("diagonal tile %d, %s: ||E||_F = %.3g", k, part, np.sqrt(norm2))

    def _add(self, change, part, matrix, k):
        """Add the symmetric `matrix`, tile `k`'s change by `part`, to the tile's `change`
        and its ``||.||_F^2`` to :attr:`parts`."""
        change += matrix
        norm2 = float(np.sum(matrix * matrix))
        self.parts[part] += norm2
        logger.debug("diagonal tile %d, %s: ||E||_F = %.3g", k, part, np.sqrt(norm2))

    def _modified(self, M, k, change):
        if not self.tolerance > 0:
            raise NotPositiveDefiniteError(
                f"diagonal tile {k} is not positive definite, and modified Cholesky has no smallest pivot: "
                f"its delta is the tile tolerance, 0 because ||A||_F = 0 (A is zero). {ZERO_MATRIX_HINT}",
                tile=k,
            )
        delta = self.tolerance
        for _ in range(_DELTA_RAISES + 1):
            modification = modified_cholesky(M, method="gmw", return_E=True, delta=delta)
            L, info = dpotrf(np.asfortranarray(M + modification.E), lower=1, clean=1, overwrite_a=True)
            # An E beyond what lifting every eigenvalue by 2 delta needs comes from growth
            # in the LDL^T factor, not from the tile: refuse it rather than report it.
            if info == 0 and modification.E_norm <= 2.0 * delta * np.sqrt(M.shape[0]):
                self._add(change, "modified", modification.E, k)
                self.modified_tiles.append(k)
                return L
            delta *= 4.0
        raise NotPositiveDefiniteError(
            f"diagonal tile {k} stayed indefinite after modified Cholesky with delta = {self.tolerance:.3e} and "
            f"{delta / 4:.3e} (1 and {4**_DELTA_RAISES} tile tolerances): the compression errors of the earlier "
            "tiles grew through their inverses. Use safeguard='compensate' (or 'compensate+modified'), or "
            "add 'shift'.",
            tile=k,
        )

    @property
    def perturbation(self):
        """``||E||_F`` of the changes made so far."""
        return float(np.sqrt(self.total))

    @property
    def perturbation_parts(self):
        """``||.||_F`` of the changes by source (see :attr:`parts`)."""
        return {name: float(np.sqrt(value)) for name, value in self.parts.items()}


def tail_compensation(xp, T, form, tolerance):
    """The always-on compensation of a diagonal tile whose update has the tail `T`: ``T``
    (``form="block"``) or ``diag(rowsum |T|)`` (``"rowsum"``), plus
    ``OFF_DIAGONAL_COMPENSATION * tolerance`` on the diagonal (`tolerance` per entry: 0
    on the padding of a packed tile). Written with the array module `xp`, for every back
    end."""
    change = T if form == "block" else xp.diag(xp.abs(T).sum(axis=1))
    return change + xp.diag(OFF_DIAGONAL_COMPENSATION * tolerance)


def _schur_compensation(W, tolerance):
    """``rowsum |T|`` for the tail ``T`` of ``W W^T`` dropped by compression to `tolerance`."""
    return np.abs(_update_tail(W, tolerance)).sum(axis=1)


def _update_tail(W, tolerance):
    """The tail ``T`` of ``W W^T`` dropped by compression to `tolerance` (positive
    semidefinite, ``||T||_F <= tolerance``).

    ``W W^T = sum_j lambda_j q_j q_j^T``; the tail is the set of smallest ``lambda_j``
    with ``sqrt(sum lambda_j^2) <= tolerance``. The eigenvalues come from the smaller of
    ``W^T W`` and ``W W^T``.
    """
    rows, cols = W.shape
    if cols == 0:
        return np.zeros((rows, rows))
    # every tail eigenvalue is <= tolerance: only those eigenpairs are computed
    below = {"subset_by_value": (-np.inf, tolerance), "driver": "evr", "check_finite": False}
    if cols <= rows:
        lam, Z = eigh(W.T @ W, **below)
        tail = _tail_count(np.maximum(lam, 0.0), tolerance)
        Y = W @ Z[:, :tail]
    else:
        lam, Q = eigh(W @ W.T, **below)
        lam = np.maximum(lam, 0.0)
        tail = _tail_count(lam, tolerance)
        Y = Q[:, :tail] * np.sqrt(lam[:tail])
    return Y @ Y.T


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
