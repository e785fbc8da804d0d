"""Low-rank factors with trailing columns in single precision.

A compressed tile ``U V^T`` ends in components far below its tolerance: ACA's and ARA's
factors come out of an SVD, largest first. Rounding the trailing columns of both factors to
single precision changes the tile by a rigorously bounded amount, and within a share of the
tile's tolerance most columns qualify. :func:`round_trailing` rounds the values (in float64
arrays, so that every path computes with the same numbers); :class:`CompactFactors` then
stores the exactly representable trailing columns as float32, losslessly, and hands out
float64 arrays: all arithmetic stays in double precision [1]_.

The bound. For ``x`` in float32's normal range, ``|fl32(x) - x| <= u |x|`` with ``u =
2^-24``; below it (subnormal) ``|fl32(x) - x| <= 2^-150``. So a column ``x`` of length ``m``
moves by ``e(x) <= u ||x|| + 2^-150 sqrt(m)``, and the rank-one term ``u_j v_j^T`` by at
most ``e(u_j) ||v_j|| + ||u_j|| e(v_j) + e(u_j) e(v_j)`` in Frobenius norm; the tile moves
by at most the sum over the rounded columns. Columns of norm ``2^126`` or more (a bound on
their entries) are never rounded: float32 overflows at ``2^128``.

References
----------
.. [1] Amestoy, P., Boiteau, O., Buttari, A., Gerest, M., Jézéquel, F., L'Excellent, J.-Y.,
   Mary, T. (2022). Mixed precision low-rank approximations and their application to block
   low-rank LU factorization. IMA Journal of Numerical Analysis 43(4), 2198-2227.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, MutableMapping

import numpy as np

from tlrcore.compress._recompress import LowRank
from tlrcore.concurrency.heap import numpy_allocated_bytes

__all__ = [
    "SINGLE_SHARE",
    "CompactFactors",
    "CompactPair",
    "compact",
    "compact_rounded",
    "factor_budget",
    "round_in_place",
    "round_trailing",
    "rounding_bounds",
]

#: Share of a tile's tolerance its single-precision rounding may use: the compressors get
#: the rest.
SINGLE_SHARE = 1.0 / 16.0
_UNIT = 2.0**-24
_SUBNORMAL = 2.0**-150
_LARGEST = 2.0**126


def rounding_bounds(U: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Per column ``j``, the bound on ``||fl32(U_j) fl32(V_j)^T - U_j V_j^T||_F`` (module
    docstring); ``inf`` for a column that could overflow (one whose norm, which bounds its
    entries, reaches ``2^126``)."""
    a = np.sqrt(np.einsum("ij,ij->j", U, U))  # column norms in one pass
    b = np.sqrt(np.einsum("ij,ij->j", V, V))
    eu = _UNIT * a + _SUBNORMAL * np.sqrt(U.shape[0])
    ev = _UNIT * b + _SUBNORMAL * np.sqrt(V.shape[0])
    bounds = eu * b + a * ev + eu * ev
    bounds[(a >= _LARGEST) | (b >= _LARGEST) | ~np.isfinite(bounds)] = np.inf
    return bounds


def factor_budget(tolerance: float, norm: float) -> float:
    """The rounding budget of one tile of a Cholesky factor ``L`` whose updated tiles are
    compressed to `tolerance`, for a matrix of Frobenius norm about `norm`.

    Rounding moves ``L`` by ``delta L`` and ``L L^T`` by ``delta L L^T + L delta L^T +
    delta L delta L^T``, at most ``2 ||delta L||_F ||L||_2`` to first order, with ``||L||_2^2
    = ||L L^T||_2 <= ||A||_F`` up to the factorization's error. With each of the ``n_t (n_t -
    1) / 2`` tiles moved by at most ``eta = SINGLE_SHARE tolerance / sqrt(2 norm)``, ``||delta
    L||_F <= eta n_t / sqrt(2)`` and ``L L^T`` moves by at most ``SINGLE_SHARE tolerance n_t``:
    the share ``SINGLE_SHARE`` of the accuracy bound ``accuracy ||A||_F = tolerance n_t``."""
    return SINGLE_SHARE * tolerance / math.sqrt(2.0 * norm) if norm > 0.0 else 0.0


def round_in_place(U: np.ndarray, V: np.ndarray, budget: float) -> int:
    """Round the last columns of `U` and `V` to single-precision values in place, as many as
    keep the sum of :func:`rounding_bounds` within `budget`; returns their number."""
    rank = U.shape[1]
    if rank == 0 or not budget > 0.0:
        return 0
    rounded = _count_within(np.cumsum(rounding_bounds(U, V)[::-1]), budget)
    if rounded:
        for F in (U, V):
            F[:, rank - rounded :] = F[:, rank - rounded :].astype(np.float32)
    return rounded


def round_trailing(factors: LowRank, budget: float) -> LowRank:
    """`factors` with their last columns rounded to single-precision values (still float64),
    as many as keep the sum of :func:`rounding_bounds` within `budget`: that sum is added to
    ``dropped`` and ``dropped_frobenius`` and the count is ``single``. `factors` itself where
    no column qualifies, else new arrays (the inputs are not modified)."""
    rounded, bound = _rounding(factors, budget)
    if rounded == 0:
        return factors
    U, V = factors
    first = U.shape[1] - rounded
    U, V = U.copy(order="K"), V.copy(order="K")
    for F in (U, V):
        F[:, first:] = F[:, first:].astype(np.float32)
    return LowRank(U, V, factors.dropped + bound, factors.dropped_frobenius + bound, rounded)


def compact_rounded(factors: LowRank, budget: float) -> CompactPair:
    """The :class:`CompactPair` of :func:`round_trailing`'s result, made in one pass: the
    float64 leading columns copied, the trailing ones converted."""
    rounded, bound = _rounding(factors, budget)
    U, V = factors
    first = U.shape[1] - rounded
    return CompactPair(
        _head(U, first),
        U[:, first:].astype(np.float32),
        _head(V, first),
        V[:, first:].astype(np.float32),
        factors.dropped + bound,
        factors.dropped_frobenius + bound,
    )


def _rounding(factors, budget):
    """``(count, bound)``: how many trailing columns of `factors` round within `budget`, and
    their bound."""
    U, V = factors
    if U.shape[1] == 0 or not budget > 0.0:
        return 0, 0.0
    tail = np.cumsum(rounding_bounds(U, V)[::-1])  # tail[t]: the last t + 1 columns rounded
    rounded = _count_within(tail, budget)
    return rounded, float(tail[rounded - 1]) if rounded else 0.0


def _head(F, first):
    """`F` itself, or a copy of its first `first` columns (a view would keep all of `F`)."""
    return F if first == F.shape[1] else np.array(F[:, :first], order="K")


class CompactPair(tuple):
    """A tile's factors as ``(U head, U tail, V head, V tail)``: float64 leading columns and
    float32 trailing ones, with :class:`LowRank`'s ``dropped`` and ``dropped_frobenius``; the
    record a worker process hands back."""

    dropped: float
    dropped_frobenius: float

    def __new__(cls, U_head, U_tail, V_head, V_tail, dropped=0.0, dropped_frobenius=0.0):
        pair = super().__new__(cls, (U_head, U_tail, V_head, V_tail))
        pair.dropped = float(dropped)
        pair.dropped_frobenius = float(dropped_frobenius)
        return pair

    def __getnewargs__(self):
        return (*self, self.dropped, self.dropped_frobenius)

    def widened(self) -> LowRank:
        """The :class:`LowRank` of float64 factors (the tails widened, values unchanged) that
        :func:`round_trailing` gives for the same tile."""
        U_head, U_tail, V_head, V_tail = self
        return LowRank(
            _joined(U_head, U_tail),
            _joined(V_head, V_tail),
            self.dropped,
            self.dropped_frobenius,
            U_tail.shape[1],
        )


def compact(factors: LowRank | CompactPair) -> CompactPair:
    """The :class:`CompactPair` of `factors`, split after its last float64 column (``single``
    columns from the end); `factors` itself if it is one."""
    if isinstance(factors, CompactPair):
        return factors
    U, V = factors
    first = U.shape[1] - getattr(factors, "single", 0)
    return CompactPair(
        _head(U, first),
        U[:, first:].astype(np.float32),
        _head(V, first),
        V[:, first:].astype(np.float32),
        getattr(factors, "dropped", 0.0),
        getattr(factors, "dropped_frobenius", 0.0),
    )


class CompactFactors(MutableMapping):
    """``{(i, j): F}`` of one factor of low-rank tiles, each stored as float64 leading columns
    and float32 trailing ones (:meth:`store_parts`; the columns :func:`round_trailing`
    rounded, so that the storage is lossless). ``factors[key]`` is the float64 factor: the
    stored array itself where no column is single, else a new array. ``factors[key] = F``
    stores `F` whole."""

    def __init__(self, factors: Mapping | None = None) -> None:
        self._parts: dict = {}
        for key, F in (factors or {}).items():
            self[key] = F

    def __setitem__(self, key, F) -> None:
        self._parts[key] = (F, None)

    def store_parts(self, key, head: np.ndarray, tail: np.ndarray) -> None:
        """Store the factor ``[head | tail]`` of `key`, `tail` float32 (none if empty)."""
        self._parts[key] = (head, tail if tail.shape[1] else None)

    def store_split(self, key, F: np.ndarray, single: int) -> None:
        """Store copies of `F`'s leading columns and, as float32, of its last `single` columns
        (which float32 must represent exactly: those :func:`round_in_place` rounded)."""
        first = F.shape[1] - single
        self.store_parts(key, np.array(F[:, :first]), F[:, first:].astype(np.float32))

    def __getitem__(self, key) -> np.ndarray:
        return _joined(*self._parts[key])

    def __delitem__(self, key) -> None:
        del self._parts[key]

    def __iter__(self) -> Iterator:
        return iter(self._parts)

    def __len__(self) -> int:
        return len(self._parts)

    def product(self, key, right: CompactFactors, X: np.ndarray) -> np.ndarray:
        """``F G^T X`` for this mapping's factor ``F`` and `right`'s ``G`` of `key`, in float64:
        ``F_head (G_head^T X) + F_tail (G_tail^T X)`` with the float32 tails converted (the
        whole factors where the two are split at different columns)."""
        head, tail = self._parts[key]
        right_head, right_tail = right._parts[key]
        if head.shape[1] != right_head.shape[1]:
            return self[key] @ (right[key].T @ X)
        if tail is None or right_tail is None:
            return head @ (right_head.T @ X)
        out = tail.astype(np.float64) @ (right_tail.astype(np.float64).T @ X)
        if head.shape[1]:
            out += head @ (right_head.T @ X)
        return out

    def rank(self, key) -> int:
        """Columns of the factor of `key`, without assembling it."""
        head, tail = self._parts[key]
        return head.shape[1] + (0 if tail is None else tail.shape[1])

    def parts(self, key) -> tuple[np.ndarray, np.ndarray | None]:
        """``(head, tail)`` as stored for `key` (`tail` float32, or None)."""
        return self._parts[key]

    def release(self, key, placeholder: np.ndarray) -> int:
        """Replace the factor of `key` by `placeholder`; returns the bytes NumPy had allocated
        for it (:func:`~tlrcore.concurrency.heap.numpy_allocated_bytes`)."""
        head, tail = self._parts[key]
        freed = numpy_allocated_bytes(head) + (0 if tail is None else numpy_allocated_bytes(tail))
        self._parts[key] = (placeholder, None)
        return freed

    def spill(self, keys, spill, group=None) -> None:
        """Move the stored parts of `keys` into one file of `spill`
        (:class:`~tlrcore.concurrency.spill.Spill`), in its `group`, read back through its
        memory map; the values are unchanged."""
        keys = list(keys)
        arrays = [part for key in keys for part in self._parts[key] if part is not None]
        moved = iter(spill.move(arrays, group))
        for key in keys:
            self._parts[key] = tuple(
                None if part is None else next(moved) for part in self._parts[key]
            )

    def reorder(self, keys) -> None:
        """Iterate in the order of `keys` (those stored; the others after them)."""
        parts = self._parts
        self._parts = {key: parts[key] for key in keys if key in parts}
        self._parts.update(parts)

    def view(self) -> CompactFactors:
        """The same stored arrays, read-only, in a second mapping."""
        other = CompactFactors()
        for key, parts in self._parts.items():
            other._parts[key] = tuple(None if part is None else _read_only(part) for part in parts)
        return other

    @property
    def nbytes(self) -> int:
        """Bytes stored."""
        # a list made in one step: other threads may store tiles meanwhile
        return sum(
            head.nbytes + (0 if tail is None else tail.nbytes)
            for head, tail in list(self._parts.values())
        )


def _joined(head, tail):
    """``[head | tail]`` in float64, in `head`'s memory order; `head` itself without a tail."""
    if tail is None or tail.shape[1] == 0:
        return head
    fortran = head.flags.f_contiguous and not head.flags.c_contiguous
    out = np.empty((head.shape[0], head.shape[1] + tail.shape[1]), order="F" if fortran else "C")
    out[:, : head.shape[1]] = head
    out[:, head.shape[1] :] = tail
    return out


def _count_within(tail, budget):
    """How many of the cumulative bounds `tail` (non-decreasing) are finite and within
    `budget`."""
    return int(np.count_nonzero(np.isfinite(tail) & (tail <= budget)))


def _read_only(array):
    view = array.view()
    view.flags.writeable = False
    return view
