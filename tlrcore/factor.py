"""The contract of a factor of a symmetric matrix: :class:`Factor` and :class:`CholeskyFactor`.

Every factorization answers the same calls whatever its layout, so that statistics code
never sees the structure. The protocols are structural (:class:`typing.Protocol`):
``isinstance(F, CholeskyFactor)`` checks that the members exist, not what they compute. A
factor represents ``A + E``, ``E`` what the factorization changed on purpose (a shift,
the safeguards); results are arrays of its :attr:`~Factor.backend`, right-hand sides NumPy
arrays or arrays of that back end."""

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
    backend : tlrcore.backends.Backend
        The back end of the results.
    perturbation, shift : float
        ``||E||_F`` beyond compression (exactly 0.0 when nothing changed); the diagonal shift
        in ``E``.
    ranks : ndarray of int, shape (n_tiles, n_tiles)
        Ranks of the low-rank tiles below the diagonal, tile sizes on it, zeros above (``[[n]]``
        for a dense factor).
    nbytes : int
        At least the bytes of the dense diagonal tiles and low-rank factors.
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
        """``log |det(A + E)|``."""
        ...

    def solve(self, b: Any) -> Any:
        """``(A + E)^{-1} b`` for a vector ``(n,)`` or a matrix ``(n, k)``, of the shape of `b`."""
        ...

    def to_dense(self) -> Any:
        """Dense arrays: for a Cholesky-type factor ``L`` with ``L L^T = (A + E)[perm][:, perm]``
        (the identity for ``perm`` None); for an LDLᵀ, ``(L, D)`` with ``L D L^T = A + E``."""
        ...


@runtime_checkable
class CholeskyFactor(Factor, Protocol):
    """A Cholesky-type factor ``A + E = P^T L L^T P`` (``P`` the permutation :attr:`perm`,
    ``(A + E)[perm][:, perm] = L L^T``, None for the identity).

    ``solve(b) = solve_upper(solve_lower(b))`` in ``A``'s order, ``||solve_lower(b)||^2 = b^T
    (A + E)^{-1} b``, and ``multiply_lower(z)`` of white noise `z` has covariance ``A + E``."""

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
