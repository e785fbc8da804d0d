r"""The contract of a factor of a symmetric matrix: :class:`Factor` and :class:`CholeskyFactor`.

Every factorization answers the same calls, whatever its layout (tiles, the packed
layout, tiles on a cluster, a dense matrix), so that statistics code asks a factor for
``logdet``, ``solve`` and the triangular products and never sees its structure. The two
protocols state that contract; they are structural (:class:`typing.Protocol`): a class
meets them by having the members, and ``isinstance(F, CholeskyFactor)`` checks that the
members are there, not what they compute. The members are read-only for a caller (a
factor may set them as plain attributes).

A factor represents a matrix ``A + E``: ``A`` the matrix factored (to the accuracy of its
compression, for a tile low-rank factor), ``E`` what the factorization changed on
purpose (a diagonal shift, the safeguards of :func:`tlrcore.cholesky`). Results of a
factor are arrays of its :attr:`~Factor.backend`; right-hand sides may be NumPy arrays or
arrays of that back end.

Meeting it: :class:`tlrcore.TLRCholesky`, :class:`tlrcore.cholesky.PackedCholesky`,
:class:`tlrcore.distributed.DistributedCholesky` (:class:`CholeskyFactor`) and
:class:`tlrcore.TLRLDL` (:class:`Factor`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from tlrcore._typing import IntArray
    from tlrcore.backends import Backend

__all__ = ["CholeskyFactor", "Factor"]


@runtime_checkable
class Factor(Protocol):
    """A factorization of a symmetric ``n x n`` matrix ``A``, representing ``A + E``.

    Attributes
    ----------
    n : int
        The order of ``A``.
    backend : tlrcore.backends.Backend
        The array back end of the factor's results; ``backend.to_host(x)`` turns a result
        into a NumPy array.
    perturbation : float
        ``||E||_F``: the change the factorization made on purpose, beyond the compression
        of a tile low-rank matrix. Exactly 0.0 when nothing was changed.
    shift : float
        The diagonal shift ``s`` in ``E`` (``s I``); 0.0 without.
    ranks : ndarray of int, shape (n_tiles, n_tiles)
        Lower triangular: the ranks of the factor's low-rank tiles below the diagonal,
        the tile sizes on it (they add up to ``n``), zeros above; ``[[n]]`` for a dense
        factor.
    nbytes : int
        Bytes the factor holds: at least its dense diagonal tiles and the ``U``, ``V``
        factors of its low-rank tiles in float64 (a layout may hold more: the padding of
        the packed layout, the ``D`` blocks of an LDLᵀ).
    """

    @property
    def n(self) -> int: ...

    @property
    def backend(self) -> Backend: ...

    @property
    def perturbation(self) -> float: ...

    @property
    def shift(self) -> float: ...

    @property
    def ranks(self) -> IntArray: ...

    @property
    def nbytes(self) -> int: ...

    def logdet(self) -> float:
        """``log |det(A + E)|`` (the log-determinant, for a positive definite ``A + E``)."""
        ...

    def solve(self, b: Any) -> Any:
        """``(A + E)^{-1} b`` for a vector ``(n,)`` or a matrix ``(n, k)``, of the shape of
        `b`."""
        ...

    def to_dense(self) -> Any:
        """The factor as dense arrays: for a Cholesky-type factor ``L``, lower triangular,
        with ``L L^T = (A + E)[perm][:, perm]`` (``perm`` the factor's permutation, the
        identity where it is None); for an LDLᵀ, ``(L, D)`` with ``L D L^T = A + E``."""
        ...


@runtime_checkable
class CholeskyFactor(Factor, Protocol):
    """A Cholesky-type factor: ``A + E = P^T L L^T P``, ``L`` lower triangular and ``P``
    the permutation :attr:`perm`, with products and solves by ``L``.

    For any permutation, ``G = multiply_lower(I) = P^T L`` has ``G G^T = A + E``, and
    ``solve(b) = solve_upper(solve_lower(b))``: ``solve_lower(b)`` takes `b` in ``A``'s
    order and ``solve_upper`` returns it there, so ``||solve_lower(b)||^2 = b^T (A +
    E)^{-1} b`` (a quadratic form) and ``multiply_lower(z)``, `z` white noise, has
    covariance ``A + E`` (a simulation).

    Attributes
    ----------
    perm : ndarray of int, shape (n,), or None
        The factor's order of ``A``'s rows: ``(A + E)[perm][:, perm] = L L^T``; None for
        the identity.
    """

    @property
    def perm(self) -> IntArray | None: ...

    def solve_lower(self, b: Any) -> Any:
        """``L^{-1} P b`` for a vector or a matrix `b` (rows in ``A``'s order)."""
        ...

    def solve_upper(self, y: Any) -> Any:
        """``P^T L^{-T} y`` (rows of the result in ``A``'s order)."""
        ...

    def multiply_lower(self, z: Any) -> Any:
        """``P^T L z``."""
        ...
