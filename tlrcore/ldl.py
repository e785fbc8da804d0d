"""Left-looking TLR LDLᵀ factorization of a symmetric indefinite matrix ([1]_, Algorithm 10).

``A ~ L D L^T``: ``L`` block lower triangular with low-rank tiles ``L(i, k) = U V^T``,
``D = blockdiag(D_0, ...)`` with 1x1 and 2x2 blocks. Tiles are not reordered; within a
diagonal tile the dense LDLᵀ pivots (Bunch–Kaufman [2]_ or rook). For column ``k``:
``S(k, k) = A(k, k) - sum_j U_j M_j U_j^T`` (``M_j = V_j^T D_j V_j``, one GEMM, exactly
symmetric) is factored as ``S(k, k)[p][:, p] = L_k D_k L_k^T`` (diagonal tile
``P_k^T L_k``); each ``A(i, k) - U_i M_ik U_k^T`` is compressed by ARA, never formed; and
``L(i, k) = U (D_k^{-1} L_k^{-1} P_k V)^T`` (2x2 blocks of ``D_k`` solved as ``dsytrs``).
``A_tlr`` has the inertia of ``D`` (Sylvester), ``det A ~ prod det D_k``; an eigenvalue
closer to zero than about ``accuracy ||A||_F`` may change sign. Each tile has its own
seed: the factor is bit-identical for any number of threads.

References
----------
.. [1] Boukaram, W., Zampini, S., Turkiyyah, G., Keyes, D. E. (2021). H2OPUS-TLR: High
   performance tile low rank symmetric factorizations using adaptive randomized
   approximation. arXiv:2108.11932.
.. [2] Bunch, J. R., Kaufman, L. (1977). Some stable methods for calculating inertia and
   solving symmetric linear systems. Math. Comp. 31(137), 163-179.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike
from scipy.linalg import solve_triangular

from tlrcore._checks import check_accuracy, check_int, check_random_state
from tlrcore._typing import FloatArray, IntArray, Pivoting, Seed
from tlrcore.cholesky._steps import BlockDiagonal, TileFactor, ara_work, stack
from tlrcore.compress import ara_compress
from tlrcore.concurrency.threads import (
    column_progress,
    start_by_work,
    tile_pool,
    tile_seeds,
    workers,
)
from tlrcore.dense import ldl as dense_ldl
from tlrcore.dense._checks import PIVOTING, check_choice
from tlrcore.dense.ldl import block_eigenvalues, inertia_of
from tlrcore.errors import FactorizationError
from tlrcore.matrix import TLRMatrix

__all__ = ["TLRLDL", "ldl"]

logger = logging.getLogger(__name__)

_EPS = np.finfo(np.float64).eps


class TLRLDL(TileFactor):
    """Tile low-rank LDLᵀ factor ``A ~ L D L^T``; a :class:`~tlrcore.Factor`.

    Attributes
    ----------
    n, n_tiles, offsets, tolerance, backend
        As for :class:`~tlrcore.TLRCholesky`.
    diagonal, d, perms : list of ndarray
        Unit lower-triangular ``L_k``, block-diagonal ``D_k``, and pivot orders: ``L``'s
        diagonal tile ``k`` is ``P_k^T L_k``, ``P_k = I[perms[k]]``.
    U, V : dict of (int, int) to ndarray
        ``L(i, k) = U[i, k] @ V[i, k].T`` for ``i > k``.
    pivoting : str
        ``"bk"`` or ``"rook"``.
    perturbation, shift : float
        Always 0.0.
    """

    perturbation = shift = 0.0

    def __init__(
        self,
        diagonal: list[FloatArray],
        d: list[FloatArray],
        perms: list[IntArray],
        U: dict[tuple[int, int], FloatArray],
        V: dict[tuple[int, int], FloatArray],
        offsets: ArrayLike,
        tolerance: float,
        pivoting: Pivoting,
    ) -> None:
        super().__init__(diagonal, U, V, offsets, tolerance)
        self.d, self.perms = d, perms
        self.pivoting = pivoting
        self._blocks: list[tuple[FloatArray, FloatArray, IntArray, FloatArray]] = [
            _blocks_of(D) for D in d
        ]

    @property
    def nbytes(self) -> int:
        """Bytes held by the factor."""
        dense = sum(
            Lk.nbytes + Dk.nbytes + p.nbytes
            for Lk, Dk, p in zip(self.diagonal, self.d, self.perms, strict=True)
        )
        return dense + sum(
            U.nbytes + V.nbytes for U, V in zip(self.U.values(), self.V.values(), strict=True)
        )

    def eigenvalues_d(self) -> FloatArray:
        """Eigenvalues of ``D`` (those of its 1x1 and 2x2 blocks), in tile order."""
        return np.concatenate([block_eigenvalues(Dk) for Dk in self.d])

    def inertia(self, rtol: float | None = None) -> tuple[int, int, int]:
        """``(n_pos, n_neg, n_zero)`` of ``A``: the signs of the eigenvalues of ``D``, those with
        ``|lambda| <= rtol max|lambda|`` counted as zero (default ``rtol = n eps``)."""
        return inertia_of(self.eigenvalues_d(), rtol)

    def slogdet(self) -> tuple[float, float]:
        """``(sign, log|det A|)`` as :func:`numpy.linalg.slogdet`, from the blocks of ``D``."""
        lam = self.eigenvalues_d()
        return float(np.prod(np.sign(lam))), float(np.sum(np.log(np.abs(lam))))

    def logdet(self) -> float:
        """``log|det A|``."""
        return self.slogdet()[1]

    def _solve_lower(self, x):
        """``L^{-1} x`` in place: ``x_k = L_k^{-1} P_k (x_k - sum_j L(k, j) x_j)``, forward."""
        for k in range(self.n_tiles):
            rows = self.tile(k)
            for j in range(k):
                x[rows] -= self.U[k, j] @ (self.V[k, j].T @ x[self.tile(j)])
            x[rows] = solve_triangular(
                self.diagonal[k],
                x[rows][self.perms[k]],
                lower=True,
                unit_diagonal=True,
                check_finite=False,
            )
        return x

    def _solve_upper(self, x):
        """``L^{-T} x`` in place: ``x_k = P_k^T L_k^{-T} (x_k - sum_i L(i, k)^T x_i)``, backward."""
        for k in reversed(range(self.n_tiles)):
            rows = self.tile(k)
            for i in range(k + 1, self.n_tiles):
                x[rows] -= self.V[i, k] @ (self.U[i, k].T @ x[self.tile(i)])
            y = solve_triangular(
                self.diagonal[k],
                x[rows],
                lower=True,
                trans="T",
                unit_diagonal=True,
                check_finite=False,
            )
            x[self.offsets[k] + self.perms[k]] = y
        return x

    def solve(self, b: ArrayLike) -> FloatArray:
        """``A^{-1} b ~ L^{-T} D^{-1} L^{-1} b`` for a vector ``(n,)`` or a matrix ``(n, m)``.

        Raises
        ------
        ValueError
            If `b` has the wrong shape or non-finite entries.
        """
        x = self._solve_lower(self._check_rhs(b).copy())
        for k in range(self.n_tiles):
            x[self.tile(k)] = _solve_d(*self._blocks[k], x[self.tile(k)])
        return self._solve_upper(x)

    def to_dense(self) -> tuple[FloatArray, FloatArray]:
        """``(L, D)`` as dense ``(n, n)`` arrays with ``L @ D @ L.T ~ A`` (``L``'s diagonal tiles
        ``P_k^T L_k``)."""
        L, D = np.zeros((self.n, self.n)), np.zeros((self.n, self.n))
        for k, (Lk, p) in enumerate(zip(self.diagonal, self.perms, strict=True)):
            rows = self.tile(k)
            L[self.offsets[k] + p, rows] = Lk
            D[rows, rows] = self.d[k]
        for (i, k), U in self.U.items():
            L[self.tile(i), self.tile(k)] = U @ self.V[i, k].T
        return L, D

    def __repr__(self):
        off = [U.shape[1] for U in self.U.values()]
        mean = float(np.mean(off)) if off else 0.0
        return (
            f"TLRLDL(n={self.n}, n_tiles={self.n_tiles}, pivoting={self.pivoting!r}, "
            f"mean_rank={mean:.1f}, inertia={self.inertia()}, nbytes={self.nbytes})"
        )


if TYPE_CHECKING:  # it meets the factor contract (checked by mypy)
    from tlrcore.factor import Factor

    _LDL: type[Factor] = TLRLDL


def ldl(
    A: TLRMatrix,
    accuracy: float | None = None,
    pivoting: Pivoting = "bk",
    block_size: int = 16,
    random_state: Seed = 0,
) -> TLRLDL:
    """TLR LDLᵀ factorization ``A ~ L D L^T`` of a symmetric, possibly indefinite, matrix.

    Left-looking; each off-diagonal tile updated and compressed once by ARA, each diagonal
    tile factored by a dense LDLᵀ pivoting within it; tiles are not reordered.

    Parameters
    ----------
    A : TLRMatrix
        Symmetric, nonsingular; may be indefinite.
    accuracy : float, optional
        Updated tiles are compressed to ``accuracy ||A||_F / n_tiles`` (default: `A`'s
        tolerance).
    pivoting : {"bk", "rook"}, default "bk"
        Within diagonal tiles (:func:`tlrcore.dense.ldl`): Bunch–Kaufman or rook.
    block_size : int, default 16
        ARA sampling block.
    random_state : int, default 0
        Seeds the samples; equal inputs give bit-identical factors.

    Returns
    -------
    TLRLDL

    Raises
    ------
    TypeError
        If `A` is not a TLRMatrix, or an argument has the wrong type.
    ConsumedMatrixError
        If `A` was consumed by ``tlrcore.cholesky(A, overwrite_a=True)``.
    ValueError
        If `accuracy` is not in (0, 1), `pivoting` is unknown, or `block_size` is below 1.
    FactorizationError
        If an updated diagonal tile is singular (an eigenvalue of ``D_k`` with ``|lambda| <=
        m eps max(max|lambda|, max|A(k, k)|)``, ``m`` its order) or overflows; ``.tile`` names
        it.

    Examples
    --------
    >>> import numpy as np
    >>> import tlrcore as tlr
    >>> from tlrcore.ldl import ldl
    >>> x = np.linspace(0, 1, 400)
    >>> M = np.exp(-np.abs(x[:, None] - x[None, :]) / 0.2) - 0.5 * np.eye(400)
    >>> F = ldl(tlr.TLRMatrix.from_dense(M, 100, accuracy=1e-10))
    >>> negative = np.linalg.eigvalsh(M) < 0
    >>> F.inertia() == (int(np.sum(~negative)), int(np.sum(negative)), 0)
    True
    """
    if not isinstance(A, TLRMatrix):
        raise TypeError(f"A must be a tlrcore.TLRMatrix; got {type(A).__name__}.")
    A._check_usable()
    check_choice(pivoting, "pivoting", PIVOTING)
    block_size = check_int(block_size, "block_size", 1)
    random_state = check_random_state(random_state)
    tolerance = (
        A.tolerance
        if accuracy is None
        else check_accuracy(accuracy) * A.frobenius_norm() / A.n_tiles
    )
    factor = _left_looking(A, tolerance, pivoting, block_size, random_state)
    logger.debug("TLR LDL^T (pivoting=%s): %r", pivoting, factor)
    return factor


def _left_looking(A, tolerance, pivoting, block_size, random_state):
    """Left-looking LDLᵀ of `A`, each updated tile compressed to `tolerance`."""
    n_t = A.n_tiles
    seeds = tile_seeds(random_state, n_t)
    diagonal, d, perms, blocks, U, V = [], [], [], [], {}, {}
    with tile_pool(workers()) as pool, column_progress(n_t, "TLR LDL^T") as counter:
        for k in range(n_t):
            # D_j V(k, j) for j < k: shared by the diagonal update and every tile of the column.
            DVk = [_apply_d(*blocks[j], V[k, j]) for j in range(k)]
            Mk = [V[k, j].T @ DVk[j] for j in range(k)]
            Akk = A.diagonal[k]
            S = _updated_diagonal(Akk, [U[k, j] for j in range(k)], Mk)
            Lk, Dk, pk = _factor_diagonal(S, pivoting, k, np.abs(Akk).max())
            diagonal.append(Lk)
            d.append(Dk)
            perms.append(pk)
            blocks.append(_blocks_of(Dk))
            Uk = stack([U[k, j] for j in range(k)], S.shape[0])

            def update(i, k=k, Uk=Uk, DVk=DVk, Lk=Lk, pk=pk):
                Ui = stack([U[i, j] for j in range(k)], int(A.offsets[i + 1] - A.offsets[i]))
                Mik = BlockDiagonal([V[i, j].T @ DVk[j] for j in range(k)])
                Ua, Va = A.U[i, k], A.V[i, k]

                def matmat(X):
                    return Ua @ (Va.T @ X) - Ui @ (Mik @ (Uk.T @ X))

                def rmatmat(Y):
                    return Va @ (Ua.T @ Y) - Uk @ (Mik.T @ (Ui.T @ Y))

                shape = (Ua.shape[0], Va.shape[0])
                Ut, Vt = ara_compress(
                    matmat,
                    rmatmat,
                    shape,
                    tolerance,
                    block_size=block_size,
                    rng=np.random.default_rng(seeds[i, k]),
                )
                # L(i, k) = U V^T (P_k^T L_k)^{-T} D_k^{-1} = U (D_k^{-1} L_k^{-1} P_k V)^T.
                Vt = solve_triangular(
                    Lk, Vt[pk], lower=True, unit_diagonal=True, check_finite=False
                )
                return Ut, _solve_d(*blocks[k], Vt)

            rest = list(range(k + 1, n_t))
            updated = start_by_work(
                pool, update, rest, [ara_work(A, U, i, k, block_size) for i in rest]
            )()
            for i, (Ut, Vt) in zip(rest, updated, strict=True):
                U[i, k], V[i, k] = Ut, Vt
            counter.update()
    return TLRLDL(diagonal, d, perms, U, V, A.offsets, tolerance, pivoting)


def _updated_diagonal(Akk, Us, Ms):
    """``A(k, k) - sum_j U_j M_j U_j^T`` (one GEMM), exactly symmetric from its lower triangle."""
    if not Us:
        return np.array(Akk)
    W = np.hstack([Uj @ Mj for Uj, Mj in zip(Us, Ms, strict=True)])
    S = Akk - W @ np.hstack(Us).T
    lower = np.tril(S)
    return lower + np.tril(S, -1).T


def _factor_diagonal(S, pivoting, k, scale_a):
    """Dense LDLᵀ of the updated diagonal tile `k`; FactorizationError where an eigenvalue of
    ``D_k`` has ``|lambda| <= m eps max(max|lambda|, scale_a)`` (the second term catches an
    update that cancels ``A(k, k)`` to rounding)."""
    if not np.isfinite(S).all():
        raise _tile_error(f"diagonal tile {k} is not finite after its update", k)
    try:
        Lk, Dk, pk = dense_ldl(S, pivoting, check_finite=False)
    except FactorizationError as exc:
        raise _tile_error(f"the dense LDL^T of diagonal tile {k} overflowed ({exc})", k) from None
    lam = np.abs(block_eigenvalues(Dk))
    scale = max(lam.max(), scale_a)
    if scale == 0.0 or lam.min() <= lam.size * _EPS * scale:
        raise _tile_error(
            f"diagonal tile {k} is singular after its update (smallest |eigenvalue| of its D block "
            f"{lam.min():.3g}, largest {lam.max():.3g}, largest entry of A({k}, {k}) "
            f"{scale_a:.3g}); the matrix is singular, or nearly so at this accuracy. Tighten the "
            "accuracy, shift the matrix, or regularize it",
            k,
        )
    return Lk, Dk, pk


def _tile_error(message, k):
    error = FactorizationError(message + ".")
    error.tile = k
    return error


def _blocks_of(D):
    """``(d, e, starts, safe_d)`` of a block-diagonal ``D``: diagonal, subdiagonal, first indices
    of its 2x2 blocks, and ``d`` with ones there."""
    d, e = np.diagonal(D).copy(), np.diagonal(D, -1).copy()
    starts = np.flatnonzero(e)
    safe = d.copy()
    safe[starts] = safe[starts + 1] = 1.0
    return d, e, starts, safe


def _apply_d(d, e, starts, safe, X):
    """``D X`` for a block-diagonal ``D`` given by its diagonal `d` and subdiagonal `e`."""
    Y = d[:, None] * X
    if starts.size:
        Y[starts] += e[starts, None] * X[starts + 1]
        Y[starts + 1] += e[starts, None] * X[starts]
    return Y


def _solve_d(d, e, starts, safe, X):
    """``D^{-1} X`` block by block; a 2x2 block ``[[a, b], [b, c]]`` scaled by ``b`` as LAPACK
    ``dsytrs`` does."""
    shape = X.shape
    X = X.reshape(shape[0], -1)
    Y = X / safe[:, None]
    if starts.size:
        b = e[starts, None]
        a, c = d[starts, None] / b, d[starts + 1, None] / b
        y1, y2 = X[starts] / b, X[starts + 1] / b
        denom = a * c - 1.0
        Y[starts] = (c * y1 - y2) / denom
        Y[starts + 1] = (a * y2 - y1) / denom
    return Y.reshape(shape)
