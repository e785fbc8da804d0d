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
      rowsum form by at most ``sqrt(b) tau`` (``b`` the tile size). The eigenpairs come
      from the ``R x R`` Gram matrix ``W^T W`` when ``W`` has ``R <= b`` columns. The
      left-looking path subtracts the compressed update ``D̄_k = H H^T`` itself (block
      form) instead of adding ``T_k`` to ``A(k, k) - D_k``: the tail holds about two
      thirds of the update's ``R`` directions on kernel matrices, so this costs less than
      the plain update, and compensation adds only the Gram, its ``eigh`` and ``W Z``
      (measured at 32K, ``benchmarks/tlr_safeguards.py`` part 1: 6-9 % over plain in
      block form, 10-18 % in rowsum form, which forms ``T_k`` for its rowsums);
    * the compression errors ``E_A,kj`` of ``A``'s off-diagonal tiles, recorded by the
      build as ``e_kj = ||E_A,kj||_2`` (:attr:`tlrcore.TLRMatrix.tile_errors`, the largest
      dropped singular value), are compensated tile by tile: tile ``k`` is lifted by
      ``g_k = c_off sqrt(sum_{j != k} e_kj^2)``, ``c_off = OFF_DIAGONAL_COMPENSATION =
      1.25``. Why the root sum of squares: block Gershgorin guarantees ``-E_A ⪯
      blockdiag(sum_j e_kj I)``, but the errors of independent tiles add like a random
      sum, not in phase. Measured on the matrices of ``benchmarks/tlr_safeguards.py``
      (4,096 sites, tile 256, accuracy 1e-4): ``e_kj ~ 0.3-0.46 tau``, the Gershgorin sums
      5-7 ``tau`` (18-23 times the accuracy in ``||E||_F``), while ``lambda_min(A_tlr)`` is
      -0.7 to -4.2 ``tau``; the root sum of squares with ``c_off = 1.25`` factors all of
      them at 1e-4, 1e-6 and 1e-8 within 10 times the accuracy (``c_off = 1`` fails on
      Matérn 2.5 at 1e-4). A tile is lifted only when it needs it: when its Cholesky fails
      or its smallest eigenvalue (:func:`smallest_eigenvalue_estimate`) is below
      ``LIFT_MARGIN = 16`` lifts, so the compression errors could make it, or through
      ``L(k, k)^{-1}`` the tiles after it, indefinite. A positive definite covariance
      with a nugget far above the tolerance is never lifted, and its log-likelihood
      moves only by the tails. The packed build records the same errors (the largest
      singular value its truncation dropped, :mod:`tlrcore.compress.ara_batched`);
      matrices without recorded errors (built from factors) take every ``e_kj`` at its
      bound ``tau``.

    Accuracy contract: with ``b`` the tile size, ``n = n_t b``, ``tau = eps
    ||A_tlr||_F / n_t``,

        ``||L L^T - A_tlr||_F <= ||F||_F + ||C||_F``,
        ``||F||_F <= sqrt(n_t (n_t - 1)) tau < eps ||A_tlr||_F``,
        ``||C||_F <= sqrt(n_t) tau s + sqrt(b sum_k g_k^2)``,

    with ``s = sqrt(b)`` for the rowsum form and 1 for the block form; as ``e_kj <=
    ||E_A,kj||_F`` and each tile pair counts twice in ``||E_A||_F^2``, ``sqrt(b sum_k
    g_k^2) <= c_off sqrt(b) ||E_A||_F <= c_off sqrt(b) eps ||A||_F`` in the worst case, so
    ``c = 1 + s / sqrt(n_t) + c_off sqrt(b)``, and
    against the exact ``A`` one more ``eps ||A||_F`` for the build. The spectral errors
    of kernel tiles are far below their Frobenius norms: measured, ``||L L^T - A||_F``
    is 5.8-9.8 ``eps ||A||_F`` (``c`` = 25 at ``b`` = 256, ``n_t`` = 16, rowsum form).
    ``factor.perturbation`` is the exact ``||C||_F`` (plus any shift or modification),
    ``factor.perturbation_parts`` splits it into ``"compensation"`` (tails) and
    ``"lift"``.
``"schur"``
    Schur compensation of a failing tile only: the tail ``T`` above is added in
    diagonal form when ``dpotrf`` fails, so a matrix that factors is never changed. It
    rescues a tile past the first that fails by the compression of its update (sites
    duplicated across tiles, on either layout); it cannot help tile 0 (no update) and
    does not stop the growth described under ``"modified"``, hence ``"schur+modified"``;
    ``"compensate"`` changes every tile instead and rescues more.
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
    Tile pivoting (Algorithm 9), see :mod:`tlrcore.cholesky.pivoted`; the tile path only.

Both paths, the tile layout's (:mod:`tlrcore.cholesky.left`, ``pivoted``) and the
packed layout's (:mod:`tlrcore.cholesky.packed`), factor their diagonal tiles by the
same rules, :meth:`DiagonalFactorizer.safeguarded`, each on its own form of the tile: the
tile path's ``W`` is a low-rank root of the update, the packed path reads the update off
``A``'s tile and takes its tail from an ``eigh`` of it; the packed path's modified
Cholesky runs on the host (one ``b x b`` tile there and its factor back).

``"shift"``, ``"schur"``, ``"modified"`` and ``"pivot"`` change nothing when every tile
factors; ``"compensate"`` changes every tile, by design.
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
#: diagonal entry (see the module docstring for the measurement that sets it).
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

    A tile gets the shift and, with `compensate`, the update-tail compensation, and is
    factored; with `compensate`, a tile that fails or is near singular is lifted and
    factored again (:meth:`lift_needed`). Only if that fails, the Schur compensation of
    the failing tile and then the modification are tried, in that order.

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
    lifts : ndarray of shape (n_tiles,), optional
        With `compensate`: each tile's lift (:func:`compensation_lifts`), by tile of ``A``.

    Attributes
    ----------
    total : float
        ``||E||_F^2`` of the changes so far (each tile's changes summed before the norm).
    parts : dict of str to float
        ``||.||_F^2`` of the changes so far by source: ``"shift"``, ``"compensation"``
        (the update tails, always on), ``"lift"``, ``"schur"`` (on failure), ``"modified"``.
    compensated_tiles, lifted_tiles, modified_tiles : list of int
        Factor positions of the tiles that were compensated, lifted or modified.
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
        """Lower Cholesky factor of the updated tile `D` (``A(k, k) - W W^T``, lower
        triangle, Fortran order; overwritten), at position `k` of the factor; `tile`, the
        tile of ``A`` it comes from, when tile pivoting moved it (default `k`). The tile
        path: the shift, then :meth:`safeguarded`.

        With ``updated=False``, `D` is ``A(k, k)`` itself and the update is subtracted
        here: the block-form compensation then subtracts only the update's head,
        ``A(k, k) - W W^T + T = A(k, k) - H H^T`` (``H``, ``Y`` the head and tail roots
        of :func:`_update_split`), which costs less than the plain update instead of
        adding a tail to it; the rowsum form subtracts ``H H^T`` and the tail ``T`` it
        forms anyway for its rowsums, the cost of the plain update.

        Raises
        ------
        NotPositiveDefiniteError
            If the tile is not positive definite and the safeguards did not help.
        """
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
        """The factor of the diagonal tile `work` (shift already added) under the
        safeguards, in the order of the class docstring; the rules of both paths.

        `work` is the tile at position `k` in the form of its path: the tile path's
        :class:`_HostTile`, or the packed path's
        :class:`~tlrcore.cholesky.packed.PackedTile`. It offers ``backend``,
        ``has_update`` (whether the tile has an update, so a tail), ``add_diagonal(part,
        values)`` and ``add_tail(form)`` (change the tile and tally the change),
        ``schur_compensation()`` (``rowsum |T|`` of the update's tail), ``cholesky()``
        (``(L, info)`` of the tile as changed so far), ``symmetric()`` (the tile, on the
        host), ``tally_block(part, lower)`` (a change made outside, by its lower
        triangle on the host), ``from_host(L)`` and ``change_norm2()``.

        Raises
        ------
        NotPositiveDefiniteError
            If the tile is not positive definite and the safeguards did not help.
        """
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
        """The lift of diagonal tile `k` (`tile` of ``A``) if it needs one, else 0.0: with
        compensation, when its Cholesky `L` failed (`info` > 0) or its smallest eigenvalue
        is below :data:`LIFT_MARGIN` lifts (module docstring). Records it in
        :attr:`lifted_tiles`; the caller adds it and factors again."""
        if not self.compensate:
            return 0.0
        lift = float(self.lifts[k if tile is None else tile])
        if lift and (int(info) or smallest_eigenvalue_estimate(backend, L) < LIFT_MARGIN * lift):
            self.lifted_tiles.append(k)
            return lift
        return 0.0

    def record(self, k, part, norm2):
        """Count a change of tile `k` by `part` with ``||.||_F^2 = norm2`` in
        :attr:`parts` (the tile's total goes to :attr:`total` once, summed first)."""
        self.parts[part] += norm2
        logger.debug("diagonal tile %d, %s: ||E||_F = %.3g", k, part, np.sqrt(norm2))

    def _modified(self, M, k):
        """GMW on the symmetric host tile `M` (module docstring): its factor and the lower
        triangle of the modification ``E``, on the host."""
        if not self.tolerance > 0:
            raise NotPositiveDefiniteError(
                f"diagonal tile {k} is not positive definite, and modified Cholesky has no smallest pivot: "
                f"its delta is the tile tolerance, 0 because ||A||_F = 0 (A is zero). {ZERO_MATRIX_HINT}",
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


def tail_compensation(xp, T, form):
    """The update-tail part of the always-on compensation of a diagonal tile whose update
    has the tail `T`: ``T`` (``form="block"``) or ``diag(rowsum |T|)`` (``"rowsum"``).
    Written with the array module `xp`, for every back end."""
    return T if form == "block" else xp.diag(xp.abs(T).sum(axis=1))


def compensation_lifts(tile_errors, tolerance, n_tiles):
    """Per diagonal tile, the lift ``g_k = c_off sqrt(sum_{j != k} e_kj^2)`` that
    compensates the compression errors ``e_kj = ||E_A,kj||_2`` of the off-diagonal tiles
    of its tile row (``c_off =`` :data:`OFF_DIAGONAL_COMPENSATION`; module docstring).
    Without recorded errors (`tile_errors` None), every ``e_kj`` is taken at its bound,
    the tile tolerance."""
    if tile_errors is None:
        return np.full(
            n_tiles, OFF_DIAGONAL_COMPENSATION * tolerance * np.sqrt(max(n_tiles - 1, 0))
        )
    errors = np.asarray(tile_errors, dtype=np.float64)
    return OFF_DIAGONAL_COMPENSATION * np.sqrt(np.sum(errors * errors, axis=1))


class _HostTile:
    """A diagonal tile of the tile path for :meth:`DiagonalFactorizer.safeguarded`: the
    lower triangle of ``D = A(k, k) - W W^T`` (Fortran order, on the host; its strict upper
    part is stale), and the change made to it. With ``updated=False`` `D` starts as
    ``A(k, k)`` and the update is subtracted by the compensation or the first Cholesky,
    whichever comes first (diagonal changes commute with it).

    The first Cholesky overwrites `D`; with `keep`, a copy taken before it takes the later
    changes and tries."""

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
        """Add the compensation of the update's tail, in `form` (``"rowsum"`` or ``"block"``)."""
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
    """The change ``E_k`` made to one diagonal tile, summed over its sources before the
    norm: a diagonal vector, roots ``Y`` of positive semidefinite parts ``Y Y^T`` (the
    block-form tail), and lower triangles of the other symmetric parts."""

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
        """``||E_k||_F^2``; with one root and no block, ``||d + Y Y^T||_F^2 = ||d||^2 + 2
        d . rowsum(Y * Y) + ||Y Y^T||_F^2`` for the diagonal ``d``, in ``O(b r)``."""
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
    releasing the GIL: :mod:`tlrcore._lapack`)."""
    if W.shape[1] == 0:
        return D
    return syrk_lower(-1.0, np.asfortranarray(W), 1.0, np.asfortranarray(D))


def _symmetric_abs_rowsum(lower):
    """``rowsum |M|`` of the symmetric ``M`` whose lower triangle is `lower` (upper zero)."""
    magnitude = np.abs(lower)
    return magnitude.sum(axis=0) + magnitude.sum(axis=1) - np.diagonal(magnitude)


def smallest_eigenvalue_estimate(backend, L):
    """``lambda_min(L L^T)`` estimated by :data:`_INVERSE_ITERATIONS` steps of inverse
    power iteration from a fixed random start, two triangular solves each (``O(b^2)``,
    on the back end): ``1 / max_x ||L^{-1} x||^2`` over the iterates, which approaches
    ``lambda_min`` from above."""
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
    """A root ``Y`` of the tail ``T = Y Y^T`` of ``W W^T`` that compression to
    `tolerance` drops (positive semidefinite, ``||T||_F <= tolerance``), the tail's
    eigenvalues, and with `with_head` a root ``H`` of the rest, ``W W^T = H H^T + Y Y^T``
    (else None).

    ``W W^T = sum_j lambda_j q_j q_j^T``; the tail is the set of smallest ``lambda_j``
    with ``sqrt(sum lambda_j^2) <= tolerance``. The eigenpairs come from the smaller of
    ``W^T W`` (its lower triangle by ``dsyrk``) and ``W W^T``; ``Y^T Y = diag(lambda)``
    over the tail, so ``||T||_F^2 = sum lambda_j^2``.
    """
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
    """Number of leading (smallest) entries of the ascending nonnegative `lam` with
    ``||.||_2 <= tolerance`` (array module `xp`, for every back end)."""
    return int(xp.sum(xp.sqrt(xp.cumsum(lam * lam)) <= tolerance))


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
