"""Adaptive cross approximation (ACA) with partial pivoting, then SVD recompression.

ACA builds ``A ~ sum_t u_t v_t^T`` from one residual row and one residual column per
term, so ``k`` terms read ``O(k (m + p))`` entries of the ``m x p`` block ``A`` and cost
``O(k^2 (m + p))`` flops.

Term ``t`` (Bebendorf's partial pivoting): the residual of pivot row ``i`` is
``r = A[i, :] - sum_{s<t} u_s[i] v_s``; its largest entry over unused columns, at ``j``,
is the pivot ``delta``; ``v_t = r / delta`` and ``u_t`` is the residual of column ``j``.
A residual row that is zero to rounding gives no term and triggers the spot check below.

Block steps. The rows are read a block at a time, ``b`` of them (a quarter of the rank so
far, within :data:`_BLOCK_ROWS`), and the pivots are taken in them one row after the
other, as above: the residual of a block row after the block's earlier terms needs only
``u_s`` on the block's rows, which is the pivot column's residual there, known from the
rows read. The pivot columns are then read together. The first block's rows are spread
evenly over the block; each next block's are the unused rows where the new terms' ``|u_t|``
are largest (the row one-at-a-time ACA would take after each). The terms are exactly those
of one-at-a-time ACA with these pivots; what changes is that the residual products are
matrix-matrix products and a tile costs ``k / b`` rounds of Python and reads instead of
``k``. On the 8,192 co2 cells (Matern 1.5, tiles of 1024, ACA ranks near 100) a build
took 0.56 s instead of 0.92 s on two threads; the 131,072-site exponential build (tiles of
2048, ranks near 25) 19.3 s instead of 22.1 s. A block can end a few terms past
convergence, which the recompression drops (8 % more terms and 1-3 % more entries read on
the blocks below).

Stopping rule
-------------
ACA's error is estimated, never observed. It stops when, with ``tau = _SAFETY * tol``,

1. the last ``_SMALL_TERMS`` terms have ``||u_t|| ||v_t|| <= tau`` (the classical
   estimate of the remaining error; one small term alone is often an accident of the
   pivot), and
2. a spot check passes: on the next ``_CHECK_SIZE`` unused rows and as many unused
   columns, in a golden-ratio order spread over the indices,
   ``sqrt(n_free / n * sum of squared residuals) <= tau`` (an unbiased estimate of the
   squared Frobenius error). It catches the classical failure of partial pivoting, a
   part of the block that the pivots never visit. When it fails, ACA resumes from the
   row of the largest sampled residual entry, and the next check samples new rows.

The term norm reads the next singular value, not the tail of all the remaining ones,
so it under-reads the error where many singular values are comparable (slow decay). On
exponential, Matern-3/2 and Gaussian kernel blocks between separated and adjacent
clusters in 1-3 dimensions (length scales 0.1-2 times the cluster size, tolerances 1e-2
to 1e-10 of the block norm, some 2,000 blocks from 120 x 150 to 1024 x 1024) the ACA
error at stopping was at most ``0.075 tol`` (``2.5 tau``; median ``0.01 tol``) with
``_SAFETY = 0.03``, outside the failure mode below, one term at a time. With block steps,
on 1,056 such blocks (the three kernels in 1-3 dimensions, length scales 0.1-2,
tolerances 1e-2 to 1e-10, 120 to 1024 rows and columns, four random draws) at most
``0.057 tol`` (median ``0.003 tol``), against ``0.068 tol`` (``0.012 tol``) one term at
a time on the same blocks.

Recompression: orthonormal bases of both factors and SVD of the small core
(:func:`~tlrcore.compress._recompress.recompress`), truncated with budget
``(1 - _ACA_SHARE) tol = 0.85 tol``. By the triangle inequality the final error is at
most ACA error + truncation error ``<= tol`` when the ACA error is ``<= 0.15 tol``, a
factor 2 above the worst case observed. The rank is then the SVD optimum or one or two
above it.

If ACA has not converged after ``ceil(m p / (m + p))`` terms it has read as many entries
as the block holds: the block is assembled and compressed by truncated SVD, whose error
is known exactly.

Known failure mode: a nearly sparse block, whose few large entries sit in rows and
columns that neither the pivots nor the spot checks visit. This happens when the kernel
range is far below the cluster size (in the tests: exponential or Matern kernels with a
range of 1-3% of the cluster size, a Gaussian kernel with 10%, where under 1% of the
entries carry 99% of the norm). ACA then stops early and misses them; ARA
(:func:`~tlrcore.compress.ara_compress`) or the SVD does not.
"""

import functools
import math

import numpy as np

from tlrcore.compress._recompress import (
    check_block_output,
    check_max_rank,
    check_shape,
    check_tol,
    empty_factors,
    recompress,
    truncate_svd,
)

__all__ = ["aca_compress"]

#: ACA stops when its error estimates fall below ``_SAFETY * tol``.
_SAFETY = 0.03
#: Share of ``tol`` reserved for the ACA error; the truncation gets the rest.
_ACA_SHARE = 0.15
#: Number of consecutive terms whose norm must be below ``_SAFETY * tol``.
_SMALL_TERMS = 2
#: Rows and columns in each spot check of the residual.
_CHECK_SIZE = 8
#: Golden ratio, for the order of the spot checks.
_GOLDEN = (1.0 + math.sqrt(5.0)) / 2.0
#: When `max_rank` binds ACA runs ``max_rank + max(_EXTRA_STEPS, max_rank // 2)`` terms
#: before truncating: ACA's own rank-r approximation is up to ~5x worse than the best
#: rank-r one on slowly decaying kernel blocks, 1.0-1.3x after that oversampling.
_EXTRA_STEPS = 32
#: A residual row whose entries are all below this multiple of the row's largest entry
#: is zero to rounding.
_NEGLIGIBLE = 16 * np.finfo(np.float64).eps
#: Fewest and most pivot rows read in one round (:func:`_block_size`).
_BLOCK_ROWS = (4, 16)
#: Initial capacity of the factor buffers (doubled when full).
_INITIAL_CAPACITY = 16


def aca_compress(get_rows, get_cols, shape, tol, max_rank=None):
    """Compress a block by adaptive cross approximation and SVD recompression.

    Parameters
    ----------
    get_rows : callable
        ``get_rows(idx)`` with ``idx`` an int array returns the rows ``A[idx, :]`` as an
        array of shape ``(len(idx), p)``.
    get_cols : callable
        ``get_cols(idx)`` returns the columns ``A[:, idx]``, shape ``(m, len(idx))``.
    shape : tuple of int
        ``(m, p)``, the shape of ``A``.
    tol : float
        Absolute Frobenius tolerance, ``||A - U V^T||_F <= tol`` (met in practice, not
        guaranteed: ACA's error is estimated). ``0`` asks for an approximation exact to
        rounding; ACA then usually reads the whole block and ends in a dense SVD.
    max_rank : int or None, default None
        Largest rank returned. When it binds, ACA runs up to ``max_rank +
        max(32, max_rank // 2)`` terms and the result is truncated to `max_rank`; its error then
        exceeds `tol` and no error is raised.

    Returns
    -------
    U : ndarray of shape (m, k)
        Carries the singular values of the approximation.
    V : ndarray of shape (p, k)
        Orthonormal columns.

    Raises
    ------
    ValueError
        If `tol`, `max_rank` or `shape` is invalid, or `get_rows` or `get_cols` returns
        an array of the wrong shape or with NaN or infinite values.
    numpy.linalg.LinAlgError
        If an SVD does not converge.
    """
    tol = check_tol(tol)
    max_rank = check_max_rank(max_rank)
    m, p = check_shape(shape)
    source = _Block(get_rows, get_cols, m, p)
    steps = aca_steps(m, p, tol, max_rank)
    try:
        requests = next(steps)
        while True:
            requests = steps.send([source.read(kind, idx) for kind, idx in requests])
    except StopIteration as done:
        return done.value


def aca_steps(m, p, tol, max_rank=None, recompressed=True):
    """:func:`aca_compress` as a coroutine that asks for the entries it reads.

    The caller serves the requests, so that it can serve those of many blocks at once
    (:mod:`tlrcore.compress.aca_column`); the arithmetic is that of :func:`aca_compress`,
    or without `recompressed` that of ACA alone: its terms as they are (a few more than
    the SVD's rank, not orthogonal, within the tolerance by the same stopping rule), for
    a product applied once, where recompression would cost more than it saves.

    Parameters
    ----------
    m, p : int
        Shape of the block, ``>= 0``.
    tol : float
        Absolute Frobenius tolerance, checked (:func:`check_tol`).
    max_rank : int or None
        Checked (:func:`check_max_rank`).

    Yields
    ------
    list of (str, ndarray)
        Requests ``("rows", idx)`` for ``A[idx, :]`` and ``("cols", idx)`` for ``A[:, idx]``,
        ``idx`` a non-empty intp array; the coroutine must be sent the list of these
        arrays, float64 and finite, in the same order.

    Returns
    -------
    (U, V)
        As :func:`aca_compress` (the value of the ``StopIteration``).
    """
    if m == 0 or p == 0 or max_rank == 0:
        return empty_factors(m, p)
    dense_limit = math.ceil(m * p / (m + p))
    step_limit = dense_limit
    if max_rank is not None:
        step_limit = min(dense_limit, max_rank + max(_EXTRA_STEPS, max_rank // 2))
    cross, converged = yield from _cross_approximation(m, p, _SAFETY * tol, step_limit)
    if not converged and step_limit == dense_limit:
        (dense,) = yield [("rows", np.arange(m))]
        if recompressed:
            return truncate_svd(dense, tol, max_rank)
        return (
            (np.eye(m), dense.T) if m <= p else (dense, np.eye(p))
        )  # the block itself, as two factors
    return (
        recompress(*cross.factors(), (1.0 - _ACA_SHARE) * tol, max_rank)
        if recompressed
        else cross.factors()
    )


class _Block:
    """Checked access to the rows and columns of the block."""

    def __init__(self, get_rows, get_cols, m, p):
        self._get_rows = get_rows
        self._get_cols = get_cols
        self.shape = (m, p)

    def read(self, kind, idx):
        """``A[idx, :]`` for ``kind == "rows"``, else ``A[:, idx]``, checked."""
        if kind == "rows":
            return check_block_output(self._get_rows(idx), (idx.size, self.shape[1]), "get_rows")
        return check_block_output(self._get_cols(idx), (self.shape[0], idx.size), "get_cols")


class _Cross:
    """The rank-one terms ``u_t v_t^T`` found so far, in buffers grown by doubling.

    Terms are stored as rows of ``ut`` (capacity x m) and ``vt`` (capacity x p), so that
    appending a term writes contiguous memory.
    """

    def __init__(self, m, p, capacity):
        self.rank = 0
        self._ut = np.empty((capacity, m))
        self._vt = np.empty((capacity, p))

    def extend(self, u, v):
        """Add the terms ``u[:, t] v[t]^T`` (`u` of shape ``(m, b)``, `v` ``(b, p)``)."""
        while self.rank + v.shape[0] > self._ut.shape[0]:
            self._ut = _doubled(self._ut)
            self._vt = _doubled(self._vt)
        self._ut[self.rank : self.rank + v.shape[0]] = u.T
        self._vt[self.rank : self.rank + v.shape[0]] = v
        self.rank += v.shape[0]

    def rows(self, idx):
        """Rows ``idx`` of the approximation, shape ``(len(idx), p)``."""
        k = self.rank
        return self._ut[:k, idx].T @ self._vt[:k]

    def columns(self, idx):
        """Columns ``idx`` of the approximation, shape ``(m, len(idx))``."""
        k = self.rank
        return self._ut[:k].T @ self._vt[:k, idx]

    def factors(self):
        """``(U, V)`` with the terms as columns."""
        k = self.rank
        return self._ut[:k].T, self._vt[:k].T


def _doubled(buffer):
    """Copy of `buffer` with twice as many rows (the new rows uninitialized)."""
    grown = np.empty((2 * buffer.shape[0], buffer.shape[1]))
    grown[: buffer.shape[0]] = buffer
    return grown


class _SpotCheck:
    """Estimates the residual's Frobenius norm from a few rows and columns.

    Rows and columns are taken in a golden-ratio order, whose every prefix is spread
    evenly over the indices (blocks of spatially sorted points have their large residuals
    in contiguous index ranges), and each is checked at most once.
    """

    def __init__(self, m, p):
        self._rows = _Sequence(m)
        self._cols = _Sequence(p)

    def run(self, cross, row_free, col_free):
        """Check the residual on the next `_CHECK_SIZE` free rows and free columns (a
        coroutine step of :func:`aca_steps`: it yields its requests).

        Returns
        -------
        estimate : float
            ``sqrt(n_free / n * sum of squared residuals)`` over the sampled rows, or over
            the sampled columns, whichever is larger; 0 when nothing was left to sample.
        pivot : int
            Row of the largest sampled residual entry, a row that is not a pivot yet.
        """
        m, p = row_free.size, col_free.size
        rows = self._rows.take(row_free, _CHECK_SIZE)
        cols = self._cols.take(col_free, _CHECK_SIZE)
        requests = [("rows", rows)] if rows.size else []
        requests += [("cols", cols)] if cols.size else []
        answers = (yield requests) if requests else []
        row_values = answers.pop(0) if rows.size else np.zeros((0, p))
        col_values = answers.pop(0) if cols.size else np.zeros((m, 0))
        row_res = row_values - cross.rows(rows)
        col_res = col_values - cross.columns(cols)
        col_res[~row_free] = 0.0  # pivot rows are interpolated: rounding only
        estimate = max(
            _sampled_norm(row_res, np.count_nonzero(row_free), rows.size),
            _sampled_norm(col_res, np.count_nonzero(col_free), cols.size),
        )
        peaks = np.abs(col_res).max(axis=1, initial=0.0)
        peaks[rows] = np.maximum(peaks[rows], np.abs(row_res).max(axis=1, initial=0.0))
        return estimate, int(np.argmax(np.where(row_free, peaks, -1.0)))


class _Sequence:
    """Indices ``0..n-1`` in golden-ratio order, handed out a few at a time."""

    def __init__(self, n):
        self._order = _golden_order(n)
        self._cursor = 0

    def take(self, free, count):
        """Up to `count` indices after the cursor where `free` is true."""
        rest = self._order[self._cursor :]
        positions = np.flatnonzero(free[rest])[:count]
        self._cursor += int(positions[-1]) + 1 if positions.size else rest.size
        return rest[positions]


@functools.lru_cache(maxsize=16)
def _golden_order(n):
    """The golden-ratio order of ``0..n-1`` (read-only; the same for every block of `n`
    rows or columns, so computed once: its two sorts had cost 1.5 % of a build)."""
    spread = (np.arange(n) * _GOLDEN) % 1.0
    order = np.argsort(np.argsort(spread))
    order.flags.writeable = False
    return order


def _sampled_norm(residual, n_free, n_sampled):
    """``sqrt(n_free / n_sampled * ||residual||_F^2)``, 0 when nothing was sampled."""
    if n_sampled == 0:
        return 0.0
    return math.sqrt(n_free / n_sampled * float(np.sum(residual * residual)))


def _masked_argmax(values, free):
    """Index of the largest ``|values|`` over entries where `free` is true; None if none."""
    scores = np.where(free, np.abs(values), -1.0)
    best = int(np.argmax(scores))
    return best if scores[best] >= 0.0 else None


def _block_size(rank):
    """Pivot rows read together once the approximation has `rank` terms: a quarter of
    it, within :data:`_BLOCK_ROWS`, so that the terms found past convergence stay a small
    share of the rank."""
    low, high = _BLOCK_ROWS
    return min(high, max(low, rank // 4))


def _cross_approximation(m, p, tau, step_limit):
    """Run ACA until the error estimates are ``<= tau`` or `step_limit` terms are built
    (a coroutine step of :func:`aca_steps`: it yields its requests).

    Each round reads a block of pivot rows and then the columns of their pivots
    (:func:`_pivot_block`), and chooses the next block's rows from the new terms
    (:func:`_next_rows`).

    Returns
    -------
    cross : _Cross
        The terms found.
    converged : bool
        False when the step limit was reached first.
    """
    cross = _Cross(m, p, min(step_limit, _INITIAL_CAPACITY))
    row_free = np.ones(m, dtype=bool)
    col_free = np.ones(p, dtype=bool)
    spot_check = _SpotCheck(m, p)
    recent = [math.inf] * _SMALL_TERMS  # norms of the latest terms
    rows = np.unique(np.linspace(0, m - 1, min(m, _block_size(0))).astype(np.intp))
    while cross.rank < step_limit:
        (values,) = yield [("rows", rows)]
        residual = values - cross.rows(rows)
        columns, v_new = _pivot_block(
            rows, values, residual, row_free, col_free, step_limit - cross.rank
        )
        check = columns.size == 0
        if columns.size:
            (read,) = yield [("cols", columns)]
            u_new = _column_terms(read - cross.columns(columns), v_new, columns)
            cross.extend(u_new, v_new)
            for t in range(
                max(0, columns.size - _SMALL_TERMS), columns.size
            ):  # all that `recent` keeps
                recent = recent[1:] + [
                    float(np.linalg.norm(u_new[:, t]) * np.linalg.norm(v_new[t]))
                ]
            rows = _next_rows(u_new, row_free, _block_size(cross.rank))
            check = max(recent) <= tau or rows.size == 0
        if check:
            estimate, pivot = yield from spot_check.run(cross, row_free, col_free)
            if estimate <= tau:
                return cross, True
            rows = np.array([pivot], dtype=np.intp)
    return cross, False


def _pivot_block(rows, values, residual, row_free, col_free, limit):
    """Pivots of the block of `rows` (read as `values`, `residual` after the terms so
    far), taken row by row as ACA would, at most `limit`.

    Row ``r``'s residual after the block's earlier terms is ``residual[r] - c[r] @ v``,
    with ``c[:, s]`` the residual of pivot column ``s`` on the block's rows (known without
    reading the column: they are the block's rows); its largest entry over free columns is
    the pivot, and a row that is zero to rounding gives no term. The rows taken (pivots
    and rows zero to rounding, not those left by `limit`) and the pivot columns are marked
    in `row_free` and `col_free`.

    Returns
    -------
    columns : ndarray of intp
        The pivot column of each term, in order.
    v : ndarray of shape (len(columns), p)
        The terms' ``v``, each scaled to 1 at its pivot column.
    """
    b, p = residual.shape
    scale = np.abs(values).max(axis=1)
    v = np.empty((min(b, limit), p))
    c = np.empty((b, min(b, limit)))
    columns = []
    for r in range(b):
        t = len(columns)
        if t == limit:
            break
        row = residual[r] - c[r, :t] @ v[:t] if t else residual[r]
        row_free[rows[r]] = False
        j = _masked_argmax(row, col_free)
        if j is None or abs(row[j]) <= _NEGLIGIBLE * scale[r]:
            continue
        v[t] = row / row[j]
        c[:, t] = residual[:, j] - c[:, :t] @ v[:t, j]
        col_free[j] = False
        columns.append(j)
    return np.array(columns, dtype=np.intp), v[: len(columns)]


def _column_terms(columns, v, pivot_columns):
    """The terms' ``u``: the residual `columns` (those of the pivots, after the terms
    before the block) less the block's earlier terms, ``u_t = columns[:, t] - sum_{s<t}
    u_s v_s[j_t]``."""
    u = columns.copy()
    for t in range(1, u.shape[1]):
        u[:, t] -= u[:, :t] @ v[:t, pivot_columns[t]]
    return u


def _next_rows(u, row_free, count):
    """Up to `count` free rows for the next block: where each new term's ``|u|`` is
    largest (the row ACA would take after it), the last term first, then the rows of the
    largest ``max_t |u_t|``. The scores are kept term by term (``b x m``), so that each
    term's maximum and the peaks over the terms run along contiguous memory."""
    scores = np.where(row_free, np.abs(u.T, order="C"), -1.0)
    chosen = []
    for t in range(u.shape[1] - 1, -1, -1):
        best = int(np.argmax(scores[t]))
        if len(chosen) < count and scores[t, best] >= 0.0:
            chosen.append(best)
            scores[:, best] = -1.0
    if len(chosen) < count:
        peaks = scores.max(axis=0, initial=-1.0)
        chosen += [int(i) for i in _largest_first(peaks, count - len(chosen)) if peaks[i] >= 0.0]
    return np.array(chosen, dtype=np.intp)


def _largest_first(values, count):
    """The indices of the `count` largest `values`, largest first, ties in index order:
    ``np.argsort(-values, kind="stable")[:count]``, without sorting all of them (the
    sort of 2,048 rows per round had cost 4 % of a build)."""
    if count >= values.size:
        return np.argsort(-values, kind="stable")
    threshold = np.partition(values, values.size - count)[values.size - count]
    above = np.flatnonzero(values > threshold)
    at = np.flatnonzero(values == threshold)[: count - above.size]
    candidates = np.concatenate([above, at])
    return (
        candidates[np.argsort(-values[candidates], kind="stable")]
        if candidates.size
        else candidates
    )
