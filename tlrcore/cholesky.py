r"""Left-looking TLR Cholesky factorization (H2Opus, Algorithms 3-6).

For each tile column ``k``:

1. **Diagonal update.** ``D = A(k, k) - sum_{j<k} L(k, j) L(k, j)^T``. With the thin QR
   ``V(k, j) = Q_j R_j``, ``L(k, j) L(k, j)^T = (U(k, j) R_j^T)(U(k, j) R_j^T)^T``, so
   ``D = A(k, k) - W W^T`` with ``W = [U(k, 0) R_0^T | ... ]``: one symmetric rank-k update
   (``dsyrk``, lower triangle only); then ``L(k, k) = chol(D)``.
2. **Off-diagonal update, sampled once.** Each tile below the diagonal,
   ``A(i, k) - sum_{j<k} U(i, j) V(i, j)^T V(k, j) U(k, j)^T
   = U_A V_A^T - U_i M_ik U_k^T`` with ``M_ik = blockdiag(V(i, j)^T V(k, j))``, is never
   formed: adaptive randomized approximation samples it through products with these
   stacked factors and compresses it to the tile tolerance in a single step.
3. **Triangular solve on V only.** ``L(i, k) = U V^T L(k, k)^{-T} = U (L(k, k)^{-1} V)^T``,
   for all tiles of the column at once (their ``V`` side by side: one BLAS-3 solve that
   reads ``L(k, k)`` once, split across the worker threads).

Tiles of one column are independent and are compressed by a thread pool (BLAS on one
thread each). They are handed to the pool in descending order of estimated work (a cost
model of the ARA products, from the rank of ``A(i, k)`` and the stacked ranks of
``L(i, :k)`` and ``L(k, :k)``), so the largest tiles start first and the threads refill
from the queue as tiles finish: the CPU analogue of the paper's dynamic batching, which
keeps a few large tiles from finishing alone at the end of a column. Results are stored
by tile index and every tile has its own seed, so the factor is bit-identical from run
to run and for any number of threads.

Lookahead: tile ``(k + 1, k)`` is compressed and solved first, in the calling thread,
which then updates and factors diagonal tile ``k + 1`` while the pool compresses the
rest of column ``k``; the dense diagonal work (a quarter to a third of the total) thus
overlaps the tile work instead of waiting for it.

``cholesky(A, variant="right")`` runs the right-looking variant of
:mod:`tlrcore.cholesky_right` instead, for comparison.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np
from scipy.linalg import qr, solve_triangular
from scipy.linalg.blas import dsyrk
from threadpoolctl import threadpool_limits

from tlrcore._tile_factor import TileFactor
from tlrcore.cholesky_batched import batched_left_looking
from tlrcore.compress import ara_compress
from tlrcore.errors import NotPositiveDefiniteError
from tlrcore._checks import check_accuracy, check_int, check_random_state
from tlrcore.matrix import TLRMatrix, _workers
from tlrcore.safeguards import ZERO_MATRIX_HINT, DiagonalFactorizer, check_shift, parse_safeguard, shift_schedule

__all__ = ["cholesky", "TLRCholesky"]

logger = logging.getLogger(__name__)


class TLRCholesky(TileFactor):
    """Tile low-rank Cholesky factor ``A ~ L L^T``.

    Attributes
    ----------
    n, n_tiles, offsets
        As for :class:`~tlrcore.TLRMatrix`.
    diagonal : list of ndarray
        Dense lower-triangular diagonal tiles ``L(k, k)``.
    U, V : dict of (int, int) to ndarray
        ``L(i, k) = U[i, k] @ V[i, k].T`` for ``i > k``.
    tolerance : float
        Absolute Frobenius tolerance of the updated tiles.
    perm : ndarray of int or None
        With tile pivoting, the site order of the factor: ``A[perm][:, perm] ~ L L^T``
        (the methods below take and return vectors in the order of ``A``). None without.
    perturbation : float
        ``||E||_F`` of the change the safeguards made on purpose, beyond compression:
        ``L L^T ~ A + E``. Exactly 0.0 when none was needed.
    shift : float
        The diagonal shift in ``E`` (explicit plus automatic).
    compensated_tiles, modified_tiles : tuple of int
        Factor positions of the diagonal tiles changed by Schur compensation and by
        modified Cholesky.
    """

    def __init__(self, diagonal, U, V, offsets, tolerance, perm=None):
        super().__init__(diagonal, U, V, offsets, tolerance)
        self.perm = None if perm is None else np.asarray(perm)
        # set by the safeguarded factorization that made the factor
        self.perturbation = self.shift = 0.0
        self.compensated_tiles = self.modified_tiles = ()

    @property
    def nbytes(self):
        """Bytes held by the factor."""
        dense = sum(D.nbytes for D in self.diagonal)
        return dense + sum(U.nbytes + V.nbytes for U, V in zip(self.U.values(), self.V.values()))

    def logdet(self):
        """``log det(L L^T)``."""
        return 2.0 * float(sum(np.sum(np.log(np.diagonal(D))) for D in self.diagonal))

    def _to_factor_order(self, b):
        return b.copy() if self.perm is None else b[self.perm]

    def _from_factor_order(self, x):
        if self.perm is None:
            return x
        out = np.empty_like(x)
        out[self.perm] = x
        return out

    def solve_lower(self, b):
        """``L^{-1} P b`` by forward substitution over tiles (vector or matrix `b`; ``P`` is
        the tile pivoting's permutation, the identity without)."""
        x = self._to_factor_order(self._check_rhs(b))
        for k in range(self.n_tiles):
            rows = self.tile(k)
            for j in range(k):
                x[rows] -= self.U[k, j] @ (self.V[k, j].T @ x[self.tile(j)])
            x[rows] = solve_triangular(self.diagonal[k], x[rows], lower=True, check_finite=False)
        return x

    def solve_upper(self, b):
        """``P^T L^{-T} b`` by backward substitution over tiles."""
        x = self._check_rhs(b).copy()
        for k in reversed(range(self.n_tiles)):
            rows = self.tile(k)
            for i in range(k + 1, self.n_tiles):
                x[rows] -= self.V[i, k] @ (self.U[i, k].T @ x[self.tile(i)])
            x[rows] = solve_triangular(self.diagonal[k], x[rows], lower=True, trans="T", check_finite=False)
        return self._from_factor_order(x)

    def multiply_lower(self, z):
        """``P^T L z`` (e.g. to draw Gaussian vectors with covariance ``P^T L L^T P``)."""
        z = self._check_rhs(z)
        y = np.empty_like(z)
        for i in range(self.n_tiles):
            rows = self.tile(i)
            y[rows] = self.diagonal[i] @ z[rows]
            for k in range(i):
                y[rows] += self.U[i, k] @ (self.V[i, k].T @ z[self.tile(k)])
        return self._from_factor_order(y)

    def solve(self, b):
        """``(P^T L L^T P)^{-1} b``, i.e. ``A^{-1} b`` up to compression and ``E``."""
        return self.solve_upper(self.solve_lower(b))

    def to_dense(self):
        """The factor ``L`` as a dense lower-triangular array (of ``A[perm][:, perm]`` with
        tile pivoting)."""
        L = np.zeros((self.n, self.n))
        for k, D in enumerate(self.diagonal):
            L[self.tile(k), self.tile(k)] = D
        for (i, k), U in self.U.items():
            L[self.tile(i), self.tile(k)] = U @ self.V[i, k].T
        return L

    def __repr__(self):
        off = [U.shape[1] for U in self.U.values()]
        mean = float(np.mean(off)) if off else 0.0
        extra = f", perturbation={self.perturbation:.3g}" if self.perturbation else ""
        return (f"TLRCholesky(n={self.n}, n_tiles={self.n_tiles}, mean_rank={mean:.1f}, "
                f"nbytes={self.nbytes}{extra})")


def cholesky(A, accuracy=None, block_size=16, random_state=0, overwrite_a=False, variant=None, safeguard=None,
             shift=0.0):
    """TLR Cholesky factorization ``A ~ L L^T``.

    Parameters
    ----------
    A : TLRMatrix
        Symmetric positive definite (or, with a `safeguard` or `shift`, nearly so).
    accuracy : float, optional
        Relative accuracy of the updated tiles: each is compressed to the absolute
        tolerance ``accuracy * ||A||_F / n_tiles``. Default: the tolerance `A` was built
        with.
    block_size : int, default 16
        ARA sampling block (columns per sample) of the left-looking variant.
    random_state : int, default 0
        Seeds the per-tile samples of the left-looking variant; equal inputs give
        bit-identical factors. (The right-looking variant recompresses by QR and SVD and
        uses neither this nor `block_size`.)
    overwrite_a : bool, default False
        Release the tiles of `A` as soon as the factorization no longer needs them, which
        keeps the peak memory near the larger of `A` and its factor. `A` is consumed,
        whether the factorization succeeds or fails: any later use of it raises
        :class:`~tlrcore.ConsumedMatrixError`. Not with ``safeguard="shift"``, which may
        restart from `A`.
    variant : {"left", "right", "batched"}, optional
        ``"left"``: left-looking, every tile updated and compressed once by ARA (this
        module). ``"right"``: right-looking, the trailing tiles updated and recompressed
        after every column (:mod:`tlrcore.cholesky_right`); slower, for comparison, and
        without safeguards. ``"batched"``: left-looking on whole tile columns with
        batched kernels in the packed layout (:mod:`tlrcore.cholesky_batched`), the GPU
        algorithm, on any back end; only the ``"shift"`` safeguard. Default:
        ``"batched"`` if `A` is in the packed layout (built with ``method="batched"``,
        e.g. on a GPU), else ``"left"``.
    safeguard : None, str or sequence of str, default None
        What to do when the matrix is not positive definite at this accuracy (see
        :mod:`tlrcore.safeguards`): ``"shift"`` (retry with the smallest sufficient
        diagonal shift, a power-of-two multiple of the tile tolerance), ``"schur"`` (Schur
        compensation of the diagonal updates), ``"modified"`` (modified Cholesky on a
        failing diagonal tile), ``"pivot"`` (tile pivoting, :mod:`tlrcore.cholesky_pivoted`);
        combine as ``"pivot+modified"`` or ``("schur", "shift")``. None raises.
    shift : float, default 0.0
        Added to every diagonal entry of `A` (which is not modified).

    Returns
    -------
    TLRCholesky or PackedCholesky
        (the latter from the batched variant, with arrays of `A`'s back end). With ``.perturbation = ||E||_F`` (0.0 when nothing was changed), ``.shift``,
        ``.modified_tiles`` and, with tile pivoting, ``.perm``.

    Raises
    ------
    TypeError
        If `A` is not a TLRMatrix.
    ConsumedMatrixError
        If `A` was consumed by an earlier ``cholesky(A, overwrite_a=True)``.
    ValueError
        If `accuracy` is not in (0, 1), `variant` is not ``"left"`` or ``"right"``, a
        safeguard name is unknown, `shift` is negative, or the combination of options is
        not supported.
    NotPositiveDefiniteError
        If an updated diagonal tile is not positive definite and the safeguards could not
        help; ``.tile`` is its index (its position in the factor, with tile pivoting).
    """
    if not isinstance(A, TLRMatrix):
        raise TypeError(f"A must be a tlrcore.TLRMatrix; got {type(A).__name__}.")
    A._check_usable()
    if variant is None:
        variant = "batched" if A.packed is not None else "left"
    if variant not in ("left", "right", "batched"):
        raise ValueError(f"variant must be 'left', 'right' or 'batched'; got {variant!r}.")
    if variant != "batched" and A.backend.batched_by_default:
        raise ValueError(f"a matrix on backend={A.backend.name!r} is factored with variant='batched' only.")
    guards = parse_safeguard(safeguard)
    shift = check_shift(shift)
    block_size = check_int(block_size, "block_size", 1)
    random_state = check_random_state(random_state)
    if variant == "right" and (guards or shift):
        raise ValueError("safeguard and shift are implemented for variant='left' only; drop variant='right'.")
    if variant == "batched" and set(guards) - {"shift"}:
        raise ValueError(f"variant='batched' supports safeguard='shift' only; got {safeguard!r}.")
    if overwrite_a and "shift" in guards:
        raise ValueError("safeguard='shift' may restart from A, so it cannot be combined with overwrite_a=True.")
    tolerance = A.tolerance if accuracy is None else check_accuracy(accuracy) * A.frobenius_norm() / A.n_tiles
    try:
        if variant == "right":
            # Imported here: tlrcore.cholesky_right builds on this module's helpers.
            from tlrcore.cholesky_right import right_looking

            factor = right_looking(A, tolerance, overwrite_a)
        else:
            factor = _safeguarded(A, tolerance, guards, shift, block_size, random_state, overwrite_a, variant)
    finally:
        if overwrite_a:
            # Released tiles, or (batched) diagonal tiles factored in place: A is gone,
            # also when the factorization failed midway.
            A._consume()
    logger.info("TLR Cholesky (%s-looking): %r", variant, factor)
    return factor


def _safeguarded(A, tolerance, guards, shift, block_size, random_state, overwrite_a, variant="left"):
    """Left-looking factorization with the safeguards; retries with a growing shift
    under ``"shift"``."""
    if variant == "batched":
        def factorization(A, tolerance, diagonal, block_size, random_state, overwrite_a):
            release = A._release_column if overwrite_a else None
            return batched_left_looking(A.pack(), tolerance, diagonal, block_size, random_state, release)
    elif "pivot" in guards:
        # Imported here: tlrcore.cholesky_pivoted builds on this module's helpers.
        from tlrcore.cholesky_pivoted import pivoted_left_looking as factorization
    else:
        factorization = _left_looking
    extra = [0.0] + (shift_schedule(tolerance, A.n_tiles) if "shift" in guards else [])
    for attempt, added in enumerate(extra):
        diagonal = DiagonalFactorizer(tolerance, shift + added, "schur" in guards, "modified" in guards)
        try:
            factor = factorization(A, tolerance, diagonal, block_size, random_state, overwrite_a)
        except NotPositiveDefiniteError as exc:
            if attempt + 1 == len(extra):
                if "shift" in guards and tolerance == 0:
                    raise NotPositiveDefiniteError(
                        f"diagonal tile {exc.tile} is not positive definite, and safeguard='shift' has no shift to "
                        "try: A is zero (||A||_F = 0), so the tile tolerance, the unit of its shifts, is 0 and no "
                        f"relative shift exists. {ZERO_MATRIX_HINT}",
                        tile=exc.tile,
                    ) from exc
                if len(extra) > 1:
                    raise NotPositiveDefiniteError(
                        f"{exc} The automatic shift reached {shift + added:.3g} ({added / tolerance:.0f} "
                        "tile tolerances), past the bound that guarantees success for a positive "
                        "semidefinite A; A is probably indefinite (use tlrcore.ldl).",
                        tile=exc.tile,
                    ) from exc
                raise
            logger.info("TLR Cholesky failed at tile %s; retrying with shift %.3g", exc.tile,
                        shift + extra[attempt + 1])
            continue
        factor.shift = shift + added
        factor.perturbation = diagonal.perturbation
        factor.modified_tiles = tuple(diagonal.modified_tiles)
        factor.compensated_tiles = tuple(diagonal.compensated_tiles)
        return factor


def _left_looking(A, tolerance, factorizer, block_size, random_state, overwrite_a):
    """Left-looking factorization of `A`, each updated tile compressed to `tolerance` and
    each diagonal tile factored by the :class:`~tlrcore.safeguards.DiagonalFactorizer`."""
    n_t = A.n_tiles
    seeds = np.random.default_rng(random_state).integers(0, 2**63 - 1, size=(n_t, n_t))
    diagonal, U, V = [], {}, {}
    workers = _workers()
    with threadpool_limits(1, "blas"), (ThreadPoolExecutor(workers) if workers > 1 else nullcontext()) as pool:
        run = pool.map if pool is not None else map

        def factor_diagonal(k):
            factors = [(U[k, j], V[k, j]) for j in range(k)]
            return factorizer.factor(*_updated_diagonal(A.diagonal[k], factors), k)

        Lnext = factor_diagonal(0)
        for k in range(n_t):
            Lkk = Lnext
            diagonal.append(Lkk)
            Uk = _stack([U[k, j] for j in range(k)], A.diagonal[k].shape[0])

            def update(i, k=k, Uk=Uk):
                return _sampled_update(A.U[i, k], A.V[i, k], [U[i, j] for j in range(k)],
                                       [V[i, j] for j in range(k)], Uk, [V[k, j] for j in range(k)],
                                       tolerance, block_size, seeds[i, k])

            rest = list(range(k + 2, n_t))
            collect = _start_by_work(pool, update, rest, [_ara_work(A, U, i, k, block_size) for i in rest])
            if k + 1 < n_t:
                # Lookahead: the next diagonal tile needs only L(k + 1, :k + 1); the calling
                # thread finishes it while the pool works on the rest of the column.
                Ut, Vt = update(k + 1)
                U[k + 1, k], V[k + 1, k] = Ut, solve_triangular(Lkk, Vt, lower=True, check_finite=False)
                Lnext = factor_diagonal(k + 1)
            updated = collect()
            solved = _solve_column(Lkk, [Vt for _, Vt in updated], run)
            for i, (Ut, _), Vt in zip(rest, updated, solved):
                U[i, k], V[i, k] = Ut, Vt
            if overwrite_a:
                A._release_column(k)
    return TLRCholesky(diagonal, U, V, A.offsets, tolerance)


def _sampled_update(Ua, Va, Ui_list, Vi_list, Uk, Vk_list, tolerance, block_size, seed):
    """ARA compression of ``Ua Va^T - sum_j U_ij V_ij^T V_kj U_kj^T`` (never formed)."""
    Ui = _stack(Ui_list, Ua.shape[0])
    Mik = _block_diagonal([Vij.T @ Vkj for Vij, Vkj in zip(Vi_list, Vk_list)])

    def matmat(X):
        return Ua @ (Va.T @ X) - Ui @ (Mik @ (Uk.T @ X))

    def rmatmat(Y):
        return Va @ (Ua.T @ Y) - Uk @ (Mik.T @ (Ui.T @ Y))

    shape = (Ua.shape[0], Va.shape[0])
    return ara_compress(matmat, rmatmat, shape, tolerance, block_size=block_size, rng=np.random.default_rng(seed))


def _ara_work(A, U, i, k, block_size):
    """Estimated flops to sample and compress the updated tile ``(i, k)``.

    ARA draws about ``rank A(i, k) + block_size`` samples (a tile of large rank in `A`
    tends to keep a large rank in `L`); each costs a product with ``U_A V_A^T`` and with
    ``U_i M_ik U_k^T`` (stacked ranks ``R_i``, ``R_k``), plus its orthogonalization.
    """
    rows, cols = A.diagonal[i].shape[0], A.diagonal[k].shape[0]
    rank = A.U[i, k].shape[1]
    stacked_i = sum(U[i, j].shape[1] for j in range(k))
    stacked_k = sum(U[k, j].shape[1] for j in range(k))
    samples = rank + block_size
    per_sample = (rows + cols) * rank + rows * stacked_i + cols * stacked_k + stacked_i * stacked_k
    return samples * (per_sample + rows * samples)


def _start_by_work(pool, func, items, work):
    """Start ``func(x)`` for every item, most `work` first; return a collector.

    With a thread pool the calls are queued in that order and each thread takes the next
    as it becomes free (the calling thread is free meanwhile); without one they run when
    the collector is called. The collector returns the results in the order of `items`.
    """
    if pool is None:
        return lambda: [func(item) for item in items]
    futures = {pos: pool.submit(func, items[pos]) for pos in sorted(range(len(items)), key=lambda pos: -work[pos])}
    return lambda: [futures[pos].result() for pos in range(len(items))]


def _map_by_work(run, func, items, work):
    """``[func(x) for x in items]``, started in descending order of `work`.

    `run` is ``map`` or a thread pool's ``map``: the pool queues the calls in that order
    and each thread takes the next one as it becomes free, so the most expensive calls
    start first and the cheap ones fill the gaps. Ties keep the order of `items`.
    """
    order = sorted(range(len(items)), key=lambda pos: -work[pos])
    results = dict(zip(order, run(lambda pos: func(items[pos]), order)))
    return [results[pos] for pos in range(len(items))]


def _updated_diagonal(Akk, factors):
    """``(D, W)``: ``D = A(k, k) - W W^T`` (lower triangle) by one ``dsyrk``, with
    ``W W^T = sum_j U_j V_j^T V_j U_j^T``."""
    D = np.array(Akk, order="F")
    W = np.hstack([_gram_root(Uj, Vj) for Uj, Vj in factors]) if factors else np.zeros((D.shape[0], 0))
    return _subtract_gram(D, W), W


def _gram_root(U, V):
    """``W = U R^T`` with ``V = Q R`` (thin QR), so that ``W W^T = U V^T V U^T``."""
    return U @ qr(V, mode="r", check_finite=False)[0][: V.shape[1]].T


def _subtract_gram(D, W):
    """``D - W W^T`` in the lower triangle of the Fortran-ordered `D`, in place (``dsyrk``)."""
    if W.shape[1] == 0:
        return D
    return dsyrk(-1.0, W, beta=1.0, c=D, lower=1, overwrite_c=1)


_SOLVE_CHUNK = 128


def _solve_column(Lkk, factors, run):
    """``L(k, k)^{-1} V`` for every ``V`` of a tile column, as a few wide solves.

    The stacked right-hand sides are cut into chunks of a fixed width, so that the
    rounding, and hence the factor, does not depend on the number of threads.
    """
    if sum(V.shape[1] for V in factors) == 0:
        return [V.copy() for V in factors]
    widths = np.cumsum([V.shape[1] for V in factors])[:-1]
    stacked = np.hstack(factors)
    parts = [np.arange(a, min(a + _SOLVE_CHUNK, stacked.shape[1])) for a in range(0, stacked.shape[1], _SOLVE_CHUNK)]
    pieces = run(lambda cols: solve_triangular(Lkk, stacked[:, cols], lower=True, check_finite=False), parts)
    return np.hsplit(np.hstack(list(pieces)), widths)


def _block_diagonal(blocks):
    """The block-diagonal matrix of `blocks` (``scipy.linalg.block_diag`` without its
    per-block conversions, which cost more than the products here)."""
    out = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)))
    row = col = 0
    for b in blocks:
        out[row : row + b.shape[0], col : col + b.shape[1]] = b
        row, col = row + b.shape[0], col + b.shape[1]
    return out


def _stack(blocks, rows):
    return np.hstack(blocks) if blocks else np.zeros((rows, 0))


def _factor_diagonal(D, k):
    """Plain Cholesky factor of an updated diagonal tile, or NotPositiveDefiniteError."""
    return DiagonalFactorizer(0.0).factor(D, np.zeros((D.shape[0], 0)), k)
