"""Adaptive cross approximation (ACA) with partial pivoting, then SVD recompression.

ACA [1]_ builds ``A ~ sum_t u_t v_t^T`` from one residual row and column per term (``k``
terms read ``O(k (m + p))`` entries): the residual ``r`` of pivot row ``i`` has its largest
free entry ``delta`` at ``j``; ``v_t = r / delta``, ``u_t`` is the residual of column
``j``. Rows are read in blocks (:func:`_block_size`), pivoted one after the other: the
terms of one-at-a-time ACA, with matrix-matrix residual products.

ACA stops when the last ``_SMALL_TERMS`` terms have ``||u_t|| ||v_t|| <= tau = _SAFETY
tol`` and an unbiased spot check of the residual on ``_CHECK_SIZE`` free rows and columns
agrees (else it resumes at the largest sampled residual). The terms are recompressed with
budget ``(1 - _ACA_SHARE) tol``, twice the largest ACA error seen on kernel blocks left
for ACA. After ``ceil(m p / (m + p))`` terms the block is read whole and truncated by SVD.
ACA's error is estimated, not observed: a nearly sparse block can hide its few large
entries from pivots and checks; ARA or the SVD does not miss them.

References
----------
.. [1] Bebendorf, M. (2000). Approximation of boundary element matrices. Numer. Math. 86,
   565-589.
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
    get_rows, get_cols : callable
        ``get_rows(idx)`` returns ``A[idx, :]``, ``get_cols(idx)`` returns ``A[:, idx]``, for
        an int array ``idx``.
    shape : tuple of int
        ``(m, p)``, the shape of ``A``.
    tol : float
        ``||A - U V^T||_F <= tol``, met in practice (ACA's error is estimated); 0 asks for
        exactness to rounding (usually a dense SVD).
    max_rank : int or None, default None
        Largest rank; when it binds, after up to ``max_rank + max(32, max_rank // 2)`` terms,
        the error exceeds `tol` without an error.

    Returns
    -------
    U : ndarray of shape (m, k)
        Carries the singular values.
    V : ndarray of shape (p, k)
        Orthonormal columns.

    Raises
    ------
    ValueError
        If `tol`, `max_rank` or `shape` is invalid, or a callback returns a wrong shape or
        non-finite values.
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
    """:func:`aca_compress` as a coroutine (checked `tol`, `max_rank`) that asks for the entries
    it reads, so a caller can serve many blocks at once.

    It yields lists of requests ``("rows", idx)`` for ``A[idx, :]`` and ``("cols", idx)`` for
    ``A[:, idx]`` (``idx`` a non-empty intp array) and must be sent back the list of these
    arrays, float64 and finite; it returns ``(U, V)``. Without `recompressed`, ACA's terms as
    they are (not orthogonal, within the tolerance), for a product applied once."""
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
    """The terms ``u_t v_t^T`` found so far, as rows of buffers grown by doubling."""

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
    """Estimates the residual's Frobenius norm from rows and columns in golden-ratio order
    (every prefix spread over the indices), each checked at most once."""

    def __init__(self, m, p):
        self._rows = _Sequence(m)
        self._cols = _Sequence(p)

    def run(self, cross, row_free, col_free):
        """Check the residual on the next `_CHECK_SIZE` free rows and columns (a coroutine step):
        ``(estimate, pivot)``, the larger of ``sqrt(n_free / n * sum of squares)`` over rows and
        columns (0 if nothing left), and the free row of the largest sampled residual."""
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
    """The golden-ratio order of ``0..n-1`` (read-only, cached: the same for every block)."""
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
    """Pivot rows read together at `rank` terms: a quarter of it, within :data:`_BLOCK_ROWS`."""
    low, high = _BLOCK_ROWS
    return min(high, max(low, rank // 4))


def _cross_approximation(m, p, tau, step_limit):
    """Run ACA until the error estimates are ``<= tau`` or `step_limit` terms are built (a
    coroutine step); returns ``(cross, converged)``."""
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
    """Pivots of the block of `rows` (`residual` after the earlier terms), row by row, at most
    `limit`, marked in `row_free` and `col_free`: the pivot columns and the terms' ``v``, each
    1 at its pivot."""
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
    """The terms' ``u_t = columns[:, t] - sum_{s<t} u_s v_s[j_t]``."""
    u = columns.copy()
    for t in range(1, u.shape[1]):
        u[:, t] -= u[:, :t] @ v[:t, pivot_columns[t]]
    return u


def _next_rows(u, row_free, count):
    """Up to `count` free rows for the next block: each new term's largest ``|u|`` (last term
    first), then the rows of the largest ``max_t |u_t|``."""
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
    """``np.argsort(-values, kind="stable")[:count]`` without sorting all of `values`."""
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
