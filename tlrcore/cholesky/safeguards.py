"""Safeguards that let the TLR Cholesky factor matrices which lost definiteness.

A compressed ``A_tlr = A - E_A`` of a numerically singular ``A`` is indefinite by about the
tile tolerance ``tau = eps ||A_tlr||_F / n_t``; the factorization adds errors ``F``. The
safeguards change diagonal tiles (size ``b``) by a tallied ``E``, ``L L^T = A_tlr + F + E``;
all but ``"compensate"`` change nothing when every tile factors.

``"shift"``
    Retry with ``s I`` added, ``s = tau, 2 tau, ...``, to one doubling past ``2 (n_t - 1) tau``.
``"compensate"``, ``"compensate-block"``
    Schur compensation of every tile [1]_ [2]_: the tail ``T_k ⪰ 0``, ``||T_k||_F <= tau``,
    dropped by compressing the update is added back as ``diag(rowsum |T_k|)`` or ``T_k``. A
    tile that fails, or whose smallest eigenvalue is below ``LIFT_MARGIN`` lifts, is lifted
    by ``g_k = c_off sqrt(sum_{j != k} e_kj^2)`` (``e_kj = ||E_A,kj||_2``, recorded by the
    build, else ``tau``; ``c_off = OFF_DIAGONAL_COMPENSATION``; a root sum of squares as
    independent tile errors do not add in phase). With ``s = sqrt(b)`` (rowsum) or 1 (block)::

        ||L L^T - A_tlr||_F <= sqrt(n_t (n_t - 1)) tau + ||C||_F,
        ||C||_F <= sqrt(n_t) s tau + c_off sqrt(b) ||E_A||_F,

    plus ``eps ||A||_F`` against ``A``. ``factor.perturbation`` is ``||E||_F``.
``"schur"``
    The rowsum compensation of a failing tile only (never tile 0, which has no update).
``"modified"``
    Gill–Murray–Wright modified Cholesky [3]_ of a tile still indefinite ([1]_, Algorithm 8),
    ``delta = tau`` then ``4 tau``, refused when ``||E||_F > 2 delta sqrt(b)``. Alone it does
    not keep up (a tile lifted to ``~delta`` passes ``tau sqrt(||A_kk|| / delta)`` on), hence
    ``"compensate+modified"``; GMW as its ``E`` stays near the smallest-eigenvalue lift.
``"pivot"``
    Tile pivoting ([1]_, Algorithm 9, :mod:`tlrcore.cholesky.pivoted`); tile layout only.

References
----------
.. [1] Boukaram, W., Zampini, S., Turkiyyah, G., Keyes, D. E. (2021). H2OPUS-TLR: High
   performance tile low rank symmetric factorizations using adaptive randomized
   approximation. arXiv:2108.11932, Sec. 5.1.
.. [2] Xia, J., Gu, M. (2010). Robust approximate Cholesky factorization of rank-structured
   symmetric positive definite matrices. SIAM J. Matrix Anal. Appl. 31(5), 2899-2920.
.. [3] Gill, P. E., Murray, W., Wright, M. H. (1981). Practical Optimization. Academic Press.
"""

from __future__ import annotations

import logging

import numpy as np
from scipy.linalg import eigh
from scipy.linalg.blas import dsyrk
from scipy.linalg.lapack import dpotrf

from tlrcore._lapack import potrf_lower, syrk_lower
from tlrcore.backends import NUMPY
from tlrcore.dense import modified_cholesky
from tlrcore.errors import NotPositiveDefiniteError

__all__ = [
    "OFF_DIAGONAL_COMPENSATION",
    "SAFEGUARDS",
    "ZERO_MATRIX_HINT",
    "DiagonalFactorizer",
    "compensation_form",
    "compensation_lifts",
    "smallest_eigenvalue_estimate",
    "subtract_gram",
    "parse_safeguard",
    "shift_schedule",
    "tail_compensation",
    "tail_count",
    "tile_failure",
]

logger = logging.getLogger(__name__)

SAFEGUARDS = ("compensate", "compensate-block", "schur", "modified", "pivot", "shift")
#: Diagonal compensation of the off-diagonal compression errors, in tile tolerances per
#: diagonal entry (1.0 left a Matérn 2.5 matrix at accuracy 1e-4 indefinite).
OFF_DIAGONAL_COMPENSATION = 1.25
#: The lift is applied to a tile whose smallest eigenvalue is below this many lifts.
LIFT_MARGIN = 16.0
_DELTA_RAISES = 1  # delta = tau, then 4 tau
_INVERSE_ITERATIONS = 8
_PROBE_SEED = 20261124
#: The way out when the tile tolerance, the unit of the safeguards, is zero.
ZERO_MATRIX_HINT = (
    "Pass an explicit shift=, e.g. shift=1e-8 times the size the diagonal entries should have, "
    "or check how A was built."
)


def parse_safeguard(safeguard):
    """The set of safeguards named by `safeguard` (None, a name, ``"a+b"``, or a sequence);
    ValueError for a name not in :data:`SAFEGUARDS`, or both forms of compensation."""
    if safeguard is None:
        return frozenset()
    if isinstance(safeguard, str):
        names = [part.strip() for part in safeguard.split("+")]
    elif isinstance(safeguard, (list, tuple, set, frozenset)) and all(
        isinstance(s, str) for s in safeguard
    ):
        names = list(safeguard)
    else:
        raise ValueError(
            f"safeguard must be None, one of {SAFEGUARDS}, a '+'-joined combination such as "
            f"'schur+modified', or a sequence of names; got {safeguard!r}."
        )
    unknown = [name for name in names if name not in SAFEGUARDS]
    if unknown:
        raise ValueError(
            f"unknown safeguard {unknown[0]!r}; choose from {SAFEGUARDS} (combinations allowed)."
        )
    if {"compensate", "compensate-block"} <= set(names):
        raise ValueError(
            "safeguard: choose one form of compensation, 'compensate' (diagonal rowsum form) or "
            "'compensate-block' (full block form), not both."
        )
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
    """Automatic shifts ``tau * 2^m`` up to one doubling past ``2 (n_t - 1) tau``, the block
    Gershgorin bound on the negative eigenvalues of ``E_A + F``; none for ``tau = 0``."""
    if tolerance == 0:
        return []
    bound = 2.0 * max(n_tiles - 1, 1) * tolerance
    shifts = [tolerance]
    while shifts[-1] < 2.0 * bound:
        shifts.append(2.0 * shifts[-1])
    return shifts


class DiagonalFactorizer:
    """Factors the updated diagonal tiles under the shift and safeguards, and tallies ``E``.

    Per tile: the `shift` and, with `compensate` (``"rowsum"`` or ``"block"``), the tail
    compensation; Cholesky; with `compensate`, the lift ``lifts[tile]``
    (:func:`compensation_lifts`) where :meth:`lift_needed`; then, while it fails, Schur
    compensation (`schur`) and modified Cholesky (`modified`, smallest pivot `tolerance`).

    Attributes
    ----------
    total : float
        ``||E||_F^2`` so far (each tile's changes summed before the norm).
    parts : dict of str to float
        ``||.||_F^2`` by source: ``"shift"``, ``"compensation"``, ``"lift"``, ``"schur"``,
        ``"modified"``.
    compensated_tiles, lifted_tiles, modified_tiles : list of int
        Factor positions of the tiles changed so.
    """

    def __init__(
        self, tolerance, shift=0.0, schur=False, modified=False, compensate=None, lifts=None
    ):
        self.tolerance, self.shift = tolerance, shift
        self.schur, self.modified, self.compensate = schur, modified, compensate
        self.lifts = lifts
        self.total = 0.0
        self.parts = {"shift": 0.0, "compensation": 0.0, "lift": 0.0, "schur": 0.0, "modified": 0.0}
        self.compensated_tiles, self.lifted_tiles, self.modified_tiles = [], [], []

    def record_shift(self, size):
        """Count the shift on `size` diagonal entries in ``||E||_F`` (packed path)."""
        self.parts["shift"] += self.shift**2 * size
        self.total += self.shift**2 * size

    def factor(self, D, W, k, tile=None, updated=True):
        """Lower Cholesky factor of the tile-path tile `D` (lower triangle, Fortran order,
        overwritten) at factor position `k`, `tile` of ``A`` (default `k`).

        `D` is ``A(k, k) - W W^T``, or with ``updated=False`` ``A(k, k)``, the update subtracted
        here (the block-form compensation then subtracts only its head, ``H H^T``,
        :func:`_update_split`). Raises :class:`NotPositiveDefiniteError` if the safeguards fail."""
        work = _HostTile(
            self,
            D,
            W,
            k,
            keep=bool(self.compensate or self.schur or self.modified),
            updated=updated,
        )
        if self.shift:
            work.add_diagonal("shift", np.full(D.shape[0], self.shift))
        return self.safeguarded(work, k, tile)

    def safeguarded(self, work, k, tile=None):
        """The factor of the diagonal tile `work` (shift added) under the safeguards; raises
        :class:`NotPositiveDefiniteError` if they fail.

        `work` (:class:`_HostTile` or :class:`~tlrcore.cholesky.packed.PackedTile`) offers
        ``backend``, ``has_update``, ``add_diagonal(part, values)``, ``add_tail(form)``,
        ``schur_compensation()``, ``cholesky()``, ``symmetric()``, ``tally_block(part, lower)``,
        ``from_host(L)`` and ``change_norm2()``."""
        if self.compensate:
            work.add_tail(self.compensate)
            self.compensated_tiles.append(k)
        L, info = work.cholesky()
        lift = self.lift_needed(work.backend, L, info, k, tile)
        if lift:
            work.add_diagonal("lift", lift)
            L, info = work.cholesky()
        if info and self.schur and work.has_update:
            work.add_diagonal("schur", work.schur_compensation())
            L, info = work.cholesky()
            if k not in self.compensated_tiles:
                self.compensated_tiles.append(k)
        if info and self.modified:
            L, E = self._modified(work.symmetric(), k)
            work.tally_block("modified", E)
            self.modified_tiles.append(k)
            L = work.from_host(L)
        elif info:
            raise tile_failure(k, int(info))
        self.total += work.change_norm2()
        return L

    def lift_needed(self, backend, L, info, k, tile=None):
        """The lift of tile `k` (`tile` of ``A``) where, with compensation, its Cholesky `L` failed
        or its smallest eigenvalue is below :data:`LIFT_MARGIN` lifts (recorded), else 0.0."""
        if not self.compensate:
            return 0.0
        lift = float(self.lifts[k if tile is None else tile])
        if lift and (int(info) or smallest_eigenvalue_estimate(backend, L) < LIFT_MARGIN * lift):
            self.lifted_tiles.append(k)
            return lift
        return 0.0

    def record(self, k, part, norm2):
        """Count a change of tile `k` by `part` with ``||.||_F^2 = norm2`` in :attr:`parts`."""
        self.parts[part] += norm2
        logger.debug("diagonal tile %d, %s: ||E||_F = %.3g", k, part, np.sqrt(norm2))

    def _modified(self, M, k):
        """GMW on the symmetric host tile `M`: its factor and ``tril(E)``; NotPositiveDefiniteError
        for ``tau = 0`` or a tile still indefinite at both ``delta``."""
        if not self.tolerance > 0:
            raise NotPositiveDefiniteError(
                f"diagonal tile {k} is not positive definite, and modified Cholesky has no "
                "smallest pivot: its delta is the tile tolerance, 0 because ||A||_F = 0 (A is "
                f"zero). {ZERO_MATRIX_HINT}",
                tile=k,
            )
        delta = self.tolerance
        for _ in range(_DELTA_RAISES + 1):
            modification = modified_cholesky(M, method="gmw", return_E=True, delta=delta)
            L, info = dpotrf(
                np.asfortranarray(M + modification.E), lower=1, clean=1, overwrite_a=True
            )
            # An E beyond what lifting every eigenvalue by 2 delta needs comes from growth
            # in the LDL^T factor, not from the tile: refuse it rather than report it.
            if info == 0 and modification.E_norm <= 2.0 * delta * np.sqrt(M.shape[0]):
                return L, np.tril(modification.E)
            delta *= 4.0
        raise NotPositiveDefiniteError(
            f"diagonal tile {k} stayed indefinite after modified Cholesky with delta = "
            f"{self.tolerance:.3e} and {delta / 4:.3e} (1 and {4**_DELTA_RAISES} tile tolerances): "
            "the compression errors of the earlier tiles grew through their inverses. Use "
            "safeguard='compensate' (or 'compensate+modified'), or add 'shift'.",
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


def tail_compensation(xp, T, form):
    """``T`` (``form="block"``) or ``diag(rowsum |T|)`` (``"rowsum"``) for the update tail `T`."""
    return T if form == "block" else xp.diag(xp.abs(T).sum(axis=1))


def compensation_lifts(tile_errors, tolerance, n_tiles):
    """Per diagonal tile, ``g_k = c_off sqrt(sum_{j != k} e_kj^2)`` for the tile errors
    `tile_errors` (``e_kj = tolerance`` for all when None)."""
    if tile_errors is None:
        return np.full(
            n_tiles, OFF_DIAGONAL_COMPENSATION * tolerance * np.sqrt(max(n_tiles - 1, 0))
        )
    errors = np.asarray(tile_errors, dtype=np.float64)
    return OFF_DIAGONAL_COMPENSATION * np.sqrt(np.sum(errors * errors, axis=1))


class _HostTile:
    """A tile-path diagonal tile for :meth:`DiagonalFactorizer.safeguarded`: the lower triangle
    of ``D = A(k, k) - W W^T`` (Fortran order, strict upper part stale) and its change.

    With ``updated=False`` `D` starts as ``A(k, k)``, the update subtracted by the first
    compensation or Cholesky. The first Cholesky overwrites `D`; with `keep` a copy serves
    later tries."""

    backend = NUMPY

    def __init__(self, factorizer, D, W, k, keep, updated=True):
        self.factorizer, self.D, self.W, self.k, self.keep = factorizer, D, W, k, keep
        self.pending = not updated  # D is still A(k, k): the update W W^T is to come
        self.change = _Change(D.shape[0])
        self.factored = False

    @property
    def has_update(self):
        """Whether the tile has an update (``W`` has columns)."""
        return self.W.shape[1] > 0

    def add_diagonal(self, part, values):
        """Add `values` (a vector, or one number for every entry) to the diagonal."""
        if np.ndim(values) == 0:
            values = np.full(self.D.shape[0], values)
        self.D[np.diag_indices(self.D.shape[0])] += values
        self.change.add_diagonal(self.factorizer, part, values, self.k)

    def add_tail(self, form):
        """Add the compensation of the update's tail in `form` (``"rowsum"`` or ``"block"``)."""
        Y, eigenvalues, head = _update_split(
            self.W, self.factorizer.tolerance, with_head=self.pending
        )
        if form == "block":
            # D + Y Y^T (lower triangles, no b x b temporaries): A(k, k) - H H^T when the
            # update is still to come; ||Y Y^T||_F^2 is the sum of the tail's eigenvalues
            # squared, as Y^T Y = diag(eigenvalues)
            if self.pending:
                self.D, self.pending = subtract_gram(self.D, head), False
            elif Y.shape[1]:
                self.D = dsyrk(1.0, Y, beta=1.0, c=self.D, lower=1, overwrite_c=1)
            self.change.add_root(
                self.factorizer, "compensation", Y, float(eigenvalues @ eigenvalues), self.k
            )
        else:
            tail = _lower_gram(Y)
            if self.pending:  # A(k, k) - H H^T - T: the plain update, with the tail at hand
                self.D, self.pending = subtract_gram(self.D, head), False
                self.D -= tail
            self.add_diagonal("compensation", _symmetric_abs_rowsum(tail))

    def schur_compensation(self):
        """``rowsum |T|`` of the update's tail ``T``."""
        return _schur_compensation(self.W, self.factorizer.tolerance)

    def cholesky(self):
        """``(L, info)`` of LAPACK ``dpotrf`` on the tile as changed so far."""
        if self.pending:
            self.D, self.pending = subtract_gram(self.D, self.W), False
        if self.factored:
            L = self.D.copy(order="F")
        else:
            self.factored = True
            L, self.D = self.D, (self.D.copy(order="K") if self.keep else None)
        return L, potrf_lower(L)

    def symmetric(self):
        """The tile, symmetric, from its lower triangle."""
        return np.tril(self.D) + np.tril(self.D, -1).T

    def tally_block(self, part, lower):
        """Tally a change by the symmetric matrix whose lower triangle is `lower`."""
        self.change.add_block(self.factorizer, part, lower, self.k)

    def from_host(self, L):
        """`L` (the tile path is on the host)."""
        return L

    def change_norm2(self):
        """``||E_k||_F^2`` of the change made to the tile."""
        return self.change.norm2()


class _Change:
    """The change ``E_k`` to one diagonal tile: a diagonal, roots ``Y`` of parts ``Y Y^T``, and
    lower triangles of other symmetric parts, summed before the norm."""

    def __init__(self, size):
        self.diagonal = np.zeros(size)
        self.roots = []
        self.blocks = []

    def add_diagonal(self, factorizer, part, values, k):
        self.diagonal += values
        factorizer.record(k, part, float(values @ values))

    def add_block(self, factorizer, part, lower, k):
        self.blocks.append(lower)
        factorizer.record(k, part, _symmetric_norm2(lower))

    def add_root(self, factorizer, part, Y, norm2, k):
        """A change by ``Y Y^T`` whose ``||.||_F^2`` is `norm2`."""
        self.roots.append((Y, norm2))
        factorizer.record(k, part, norm2)

    def norm2(self):
        """``||E_k||_F^2``; ``O(b r)`` for a diagonal ``d`` and one root:
        ``||d||^2 + 2 d . rowsum(Y * Y) + ||Y Y^T||_F^2``."""
        d = self.diagonal
        if not self.blocks and len(self.roots) <= 1:
            if not self.roots:
                return float(d @ d)
            Y, norm2 = self.roots[0]
            return float(d @ d) + 2.0 * float(d @ np.einsum("ij,ij->i", Y, Y)) + norm2
        blocks = self.blocks + [_lower_gram(Y) for Y, _ in self.roots]
        lower = sum(blocks[1:], blocks[0])
        diagonal = np.diagonal(lower) + self.diagonal
        return (
            _symmetric_norm2(lower)
            - float(np.diagonal(lower) @ np.diagonal(lower))
            + float(diagonal @ diagonal)
        )


def _symmetric_norm2(lower):
    """``||M||_F^2`` of the symmetric ``M`` whose lower triangle is `lower` (upper zero)."""
    diagonal = np.diagonal(lower)
    return 2.0 * float(np.sum(lower * lower)) - float(diagonal @ diagonal)


def _lower_gram(Y):
    """Lower triangle of ``Y Y^T`` (``dsyrk``; the strict upper part zero)."""
    if Y.shape[1] == 0:
        return np.zeros((Y.shape[0], Y.shape[0]), order="F")
    return dsyrk(1.0, Y, lower=1)


def subtract_gram(D, W):
    """``D - W W^T`` in the lower triangle of the Fortran-ordered `D`, in place (``dsyrk``,
    without the GIL)."""
    if W.shape[1] == 0:
        return D
    return syrk_lower(-1.0, np.asfortranarray(W), 1.0, np.asfortranarray(D))


def _symmetric_abs_rowsum(lower):
    """``rowsum |M|`` of the symmetric ``M`` whose lower triangle is `lower` (upper zero)."""
    magnitude = np.abs(lower)
    return magnitude.sum(axis=0) + magnitude.sum(axis=1) - np.diagonal(magnitude)


def smallest_eigenvalue_estimate(backend, L):
    """``lambda_min(L L^T)`` estimated from above by :data:`_INVERSE_ITERATIONS` steps of inverse
    iteration from a fixed random start: ``1 / max_x ||L^{-1} x||^2``, ``O(b^2)`` per step."""
    xp = backend.xp
    x = backend.normal(_PROBE_SEED, (L.shape[0], 1))
    largest = 0.0
    for _ in range(_INVERSE_ITERATIONS):
        x = x / xp.sqrt(xp.sum(x * x))
        z = backend.solve_triangular(L, x, lower=True)
        largest = max(largest, float(xp.sum(z * z)))
        x = backend.solve_triangular(L, z, lower=True, trans=True)
    return 1.0 / largest


def _schur_compensation(W, tolerance):
    """``rowsum |T|`` for the tail ``T`` of ``W W^T`` dropped by compression to `tolerance`."""
    return _symmetric_abs_rowsum(_lower_gram(_update_split(W, tolerance)[0]))


def _update_split(W, tolerance, with_head=False):
    """Root ``Y`` and eigenvalues of the tail ``T = Y Y^T`` of ``W W^T`` (its smallest
    ``lambda_j`` with ``sqrt(sum lambda_j^2) <= tolerance``), and with `with_head` a root ``H``
    of the rest, ``W W^T = H H^T + Y Y^T`` (else None); from the smaller of ``W^T W`` and
    ``W W^T``."""
    rows, cols = W.shape
    if cols == 0:
        return np.zeros((rows, 0)), np.zeros(0), (W if with_head else None)
    gram = cols <= rows
    lam, Z = eigh(
        dsyrk(1.0, W, trans=1, lower=1) if gram else W @ W.T, driver="evr", check_finite=False
    )
    lam = np.maximum(lam, 0.0)
    tail = tail_count(np, lam, tolerance)
    # eigenvectors Z of W^T W map to roots W Z; those of W W^T scale by sqrt(lambda)
    root = (lambda part: W @ Z[:, part]) if gram else (lambda part: Z[:, part] * np.sqrt(lam[part]))
    head = np.asfortranarray(root(slice(tail, None))) if with_head else None
    return root(slice(None, tail)), lam[:tail], head


def tail_count(xp, lam, tolerance):
    """Number of leading entries of the ascending nonnegative `lam` with
    ``||.||_2 <= tolerance`` (array module `xp`)."""
    return int(xp.sum(xp.sqrt(xp.cumsum(lam * lam)) <= tolerance))


def tile_failure(k, info):
    """The :class:`NotPositiveDefiniteError` for diagonal tile `k`, failed at leading
    minor `info`."""
    return NotPositiveDefiniteError(
        f"diagonal tile {k} is not positive definite after its update (leading minor {info}); the "
        "matrix is not positive definite at this accuracy. Tighten the accuracy, add a nugget, or "
        "use a safeguard (safeguard='shift' adds the smallest diagonal shift that works, a "
        "multiple of the tile tolerance).",
        tile=k,
    )
