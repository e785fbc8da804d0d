r"""Left-looking TLR Cholesky on whole tile columns with batched kernels (GPU layout).

The algorithm of :mod:`tlrcore.cholesky` (H2Opus, Algorithms 4-6) on the
:class:`~tlrcore.packed.PackedTiles` layout, written only with the back end's array
module: it runs unchanged on NumPy and on CuPy, where every step is a handful of batched
GEMMs over the tiles of a column and the factor never leaves the GPU. For column ``k``
(``p = n_tiles - k - 1`` tiles below the diagonal):

1. ``L(k, k) = chol(D_k)``: one Cholesky. The diagonal tiles are updated eagerly: after
   column ``k`` is done, ``D_i -= U(i, k) (V(i, k)^T V(i, k)) U(i, k)^T`` for all ``i > k``
   at once (two batched GEMMs per rank segment), instead of ``k`` small updates per tile
   later.
2. The updated tiles ``T_i = A(i, k) - sum_{j<k} L(i, j) L(k, j)^T`` are compressed by the
   batched ARA of :mod:`tlrcore.compress.ara_batched`: a sample ``T_i Omega`` costs, per
   ``j``, one small product ``Z_j = V(k, j) (U(k, j)^T Omega)`` shared by the column and two
   batched GEMMs ``U(i, j) (V(i, j)^T Z_j)`` per rank segment of column ``j`` over the
   tiles ``i`` still sampling; the projection ``T_i^T Q_i`` likewise. Tiles that converge
   leave the batch.
3. ``V(i, k) <- L(k, k)^{-1} V(i, k)`` for the whole column in one triangular solve.

Launches: about ``n_tiles^2 / 2`` times (segments per column) groups of batched GEMMs per
sampling round. While the whole column samples, every operand is a slice of the packed
storage; a shrinking batch gathers its tiles.
"""

from __future__ import annotations

import logging

import numpy as np

from tlrcore.compress.ara_batched import batched_ara
from tlrcore.packed import PackedTiles
from tlrcore.safeguards import tile_failure
from tlrcore.tile_column import TileColumn

__all__ = ["PackedCholesky", "batched_left_looking"]

logger = logging.getLogger(__name__)


def batched_left_looking(P, tolerance, factorizer, block_size, random_state, release=None):
    """Factor the packed matrix `P`; `factorizer` supplies the diagonal shift only.

    ``release(k)``, if given, is called when tile column `k` of the matrix is no longer
    needed (``overwrite_a``); the packed column is dropped as well, and the diagonal tiles
    are overwritten by those of the factor.

    Returns
    -------
    PackedCholesky

    Raises
    ------
    NotPositiveDefiniteError
        Naming the first diagonal tile that fails.
    """
    backend = P.backend
    xp = backend.xp
    n_t, b = P.n_tiles, P.tile_size
    # With overwrite_a the diagonal tiles are factored in place: at n = 1M and tile 2048
    # they alone take 16 GB.
    D = P.diagonal if release is not None else P.diagonal.copy()
    if factorizer.shift:
        real = xp.asarray(np.arange(P.n_padded) < P.n, dtype=xp.float64).reshape(n_t, b)
        D += factorizer.shift * (real[:, :, None] * xp.eye(b))
        factorizer.record_shift(P.n)
    seeds = np.random.default_rng(random_state).integers(0, 2**62, size=n_t)
    columns = []
    flops = [0.0]
    with backend.small_kernels():
        for k in range(n_t):
            Lkk, info = backend.cholesky(D[k])
            if int(info):
                raise tile_failure(k, int(info))
            D[k] = Lkk
            p = n_t - k - 1
            if p == 0:
                break
            U, V, r = _update_column(P.columns[k], columns, k, p, b, tolerance, backend, int(seeds[k]), block_size,
                                     flops)
            width = V.shape[2]
            V = backend.solve_triangular(Lkk, V.transpose(1, 0, 2).reshape(b, p * width), lower=True)
            V = V.reshape(b, p, width).transpose(1, 0, 2)
            column = TileColumn.from_padded(xp, U, V, r)
            for lo, hi, Us, Vs in column.suffix(0):
                D[k + 1 + lo : k + 1 + hi] -= (Us @ (Vs.transpose(0, 2, 1) @ Vs)) @ Us.transpose(0, 2, 1)
                flops[0] += 2.0 * (hi - lo) * Us.shape[2] * (2 * b * Us.shape[2] + b * b)
            columns.append(column)
            if release is not None:
                P.columns[k] = TileColumn.empty()
                release(k)
    columns += [TileColumn.empty()] * (n_t - len(columns))
    factor = PackedCholesky(PackedTiles(backend, P.n, b, D, columns), tolerance)
    factor.gemm_flops = flops[0]
    return factor


def _update_column(A_k, L, k, p, b, tolerance, backend, seed, block_size, flops):
    """Batched ARA of the updated tiles of column `k`: ``A_k`` is the matrix's column,
    ``L`` the factor's columns ``0..k-1`` (the sampled operator of the module docstring).
    The flops of its low-rank products are added to ``flops[0]``."""
    xp = backend.xp
    left = [L[j].tile(k - j - 1) for j in range(k)]

    def sample(active, omega):
        s = omega.shape[1]
        Y = xp.empty((active.size, b, s))
        for lo, hi, U, V in A_k.blocks(active):
            Y[lo:hi] = U @ (V.transpose(0, 2, 1) @ omega)
            flops[0] += 4.0 * (hi - lo) * b * U.shape[2] * s
        for j, (Ukj, Vkj) in enumerate(left):
            Z = Vkj @ (Ukj.T @ omega)
            flops[0] += 4.0 * b * Ukj.shape[1] * s
            for lo, hi, U, V in L[j].blocks(k - j + active):
                Y[lo:hi] -= U @ (V.transpose(0, 2, 1) @ Z)
                flops[0] += 4.0 * (hi - lo) * b * U.shape[2] * s
        return Y

    def project(Q):
        q = Q.shape[2]
        B = xp.empty((p, b, q))
        for lo, hi, U, V in A_k.suffix(0):
            B[lo:hi] = V @ (U.transpose(0, 2, 1) @ Q[lo:hi])
            flops[0] += 4.0 * (hi - lo) * b * U.shape[2] * q
        for j, (Ukj, Vkj) in enumerate(left):
            for lo, hi, U, V in L[j].suffix(k - j):
                B[lo:hi] -= Ukj @ (Vkj.T @ (V @ (U.transpose(0, 2, 1) @ Q[lo:hi])))
                flops[0] += 4.0 * (hi - lo) * b * q * (U.shape[2] + Ukj.shape[1])
        return B

    return batched_ara(sample, project, p, (b, b), tolerance, backend, seed, block_size)


class PackedCholesky:
    """TLR Cholesky factor ``A ~ L L^T`` in the packed layout, on the factor's back end.

    Right-hand sides may be NumPy arrays or arrays of the back end; results are arrays of
    the back end. The interface is that of :class:`~tlrcore.TLRCholesky`.

    Attributes
    ----------
    packed : PackedTiles
        ``L``: the lower-triangular diagonal tiles and the tile columns.
    backend, n, n_tiles, offsets, tolerance
    perturbation, shift : float
        Set by the factorization: ``||E||_F`` of the shift, and the shift.
    gemm_flops : float
        Flops of the factorization's low-rank products (sampling, projection, diagonal
        updates), counted from the operand shapes, padding included; for rates.
    """

    perm = None
    gemm_flops = 0.0

    def __init__(self, packed, tolerance):
        self.packed = packed
        self.backend = packed.backend
        self.n, self.n_tiles, self.offsets = packed.n, packed.n_tiles, packed.offsets
        self.tolerance = tolerance
        self.perturbation = self.shift = 0.0
        self.compensated_tiles = self.modified_tiles = ()

    @property
    def ranks(self):
        """``(n_tiles, n_tiles)`` ranks of ``L`` (lower triangle; diagonal = tile sizes)."""
        return np.tril(self.packed.rank_matrix())

    @property
    def nbytes(self):
        """Bytes held by the factor (padding included)."""
        return self.packed.nbytes

    def logdet(self):
        """``log det(L L^T)``."""
        xp = self.backend.xp
        return 2.0 * float(xp.sum(xp.log(xp.diagonal(self.packed.diagonal, axis1=1, axis2=2))))

    def _check_rhs(self, b):
        xp = self.backend.xp
        b = self.backend.asarray(b)
        if b.ndim not in (1, 2) or b.shape[0] != self.n:
            raise ValueError(f"b must have shape ({self.n},) or ({self.n}, k); got {b.shape}.")
        if not bool(xp.isfinite(b).all()):
            raise ValueError("b contains NaN or infinite values.")
        return b

    def solve_lower(self, b):
        """``L^{-1} b`` by forward substitution over tile columns."""
        b = self._check_rhs(b)
        P, solve = self.packed, self.backend.solve_triangular
        X = P.pad(b)
        with self.backend.small_kernels():
            for k, column in enumerate(P.columns):
                X[k] = solve(P.diagonal[k], X[k], lower=True)
                for lo, hi, U, V in column.suffix(0):
                    X[k + 1 + lo : k + 1 + hi] -= U @ (V.transpose(0, 2, 1) @ X[k])
        return P.unpad(X, b)

    def solve_upper(self, b):
        """``L^{-T} b`` by backward substitution over tile columns."""
        b = self._check_rhs(b)
        P, solve = self.packed, self.backend.solve_triangular
        X = P.pad(b)
        with self.backend.small_kernels():
            for k in reversed(range(self.n_tiles)):
                for lo, hi, U, V in P.columns[k].suffix(0):
                    X[k] -= (V @ (U.transpose(0, 2, 1) @ X[k + 1 + lo : k + 1 + hi])).sum(axis=0)
                X[k] = solve(P.diagonal[k], X[k], lower=True, trans=True)
        return P.unpad(X, b)

    def solve(self, b):
        """``(L L^T)^{-1} b``."""
        return self.solve_upper(self.solve_lower(b))

    def multiply_lower(self, z):
        """``L z``."""
        z = self._check_rhs(z)
        P = self.packed
        X = P.pad(z)
        Y = P.diagonal @ X
        for j, column in enumerate(P.columns):
            for lo, hi, U, V in column.suffix(0):
                Y[j + 1 + lo : j + 1 + hi] += U @ (V.transpose(0, 2, 1) @ X[j])
        return P.unpad(Y, z)

    def to_dense(self):
        """``L`` as a dense host array."""
        return self.packed.to_dense(symmetric=False)

    def __repr__(self):
        ranks = np.concatenate(self.packed.tile_ranks) if self.n_tiles > 1 else np.zeros(0)
        mean = float(ranks.mean()) if ranks.size else 0.0
        return (f"PackedCholesky(n={self.n}, n_tiles={self.n_tiles}, mean_rank={mean:.1f}, "
                f"nbytes={self.nbytes}, backend={self.backend.name!r})")
