"""Array operations (kernel launches on a GPU) of the packed TLR Cholesky, counted on NumPy.

Every array operation of ``tlrcore.cholesky.packed`` (``variant="packed"``) on a GPU is
at least one kernel launch and a fixed overhead of Python and CuPy, whatever its size.
This runs the factorization with a NumPy back end whose arrays count their operations
(ufuncs, matrix products, gathers, assignments, creation), so the count can be read
without a GPU. No other implementation is run: the operations per column are read
against the number of tiles (they should grow with the number of rank width classes in
use, not with the column index). The matrix is a 2-D exponential covariance (range 0.1,
nugget 1e-2, KD-tree order).

Run: ``python benchmarks/launch_count.py --sizes 4096 8192 16384 --tile 128``
(``n_tiles`` = 32, 64, 128; at tile 128 and ``n = 16,384`` the tile count is that of
``n = 131,072`` at tile 1024).

Output: a table on standard output, one row per size; nothing is written to disk.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tlrcore as tlr
from tlrcore.backends.numpy_backend import NumpyBackend
from tlrcore.cholesky.packed import packed_left_looking
from tlrcore.cholesky.safeguards import DiagonalFactorizer

COUNT = [0]


class Counted(np.ndarray):
    """An ndarray that counts the operations made on it."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        COUNT[0] += 1
        inputs = [x.view(np.ndarray) if isinstance(x, Counted) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(
                x.view(np.ndarray) if isinstance(x, Counted) else x for x in kwargs["out"]
            )
        out = getattr(ufunc, method)(*inputs, **kwargs)
        return out.view(Counted) if isinstance(out, np.ndarray) else out

    def __getitem__(self, key):
        keys = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, np.ndarray) for k in keys):
            COUNT[0] += 1  # a gather; basic slicing makes a view and launches nothing
        return super().__getitem__(key)

    def __setitem__(self, key, value):
        COUNT[0] += 1
        super().__setitem__(key, value)


def _counted(out):
    if isinstance(out, np.ndarray):
        return out.view(Counted)
    if isinstance(out, tuple):
        return tuple(_counted(x) for x in out)
    return out


class CountingNumpy:
    """``numpy`` whose functions count a launch and return counting arrays."""

    def __getattr__(self, name):
        attribute = getattr(np, name)
        if not callable(attribute) or isinstance(attribute, type):
            return attribute

        def call(*args, **kwargs):
            COUNT[0] += 1
            return _counted(attribute(*args, **kwargs))

        return call


class CountingBackend(NumpyBackend):
    """The NumPy back end flagged like the GPU one, counting every operation."""

    batched_by_default = True
    xp = CountingNumpy()

    def asarray(self, a):
        COUNT[0] += 1
        return np.asarray(a, dtype=np.float64).view(Counted)

    def to_host(self, a):
        return np.asarray(a).view(np.ndarray)

    def cholesky(self, a):
        COUNT[0] += 1
        L, info = NumpyBackend.cholesky(self, np.asarray(a))
        return L.view(Counted), info

    def solve_triangular(self, a, b, lower=True, trans=False):
        COUNT[0] += 1
        return NumpyBackend.solve_triangular(self, np.asarray(a), np.asarray(b), lower, trans).view(
            Counted
        )

    def eigh(self, a):
        COUNT[0] += 1
        return _counted(np.linalg.eigh(np.asarray(a)))

    def normal(self, seed, shape):
        COUNT[0] += 1
        return NumpyBackend.normal(self, seed, shape).view(Counted)


def count(n, tile, accuracy):
    from geostat.ordering import order_points

    X = np.random.default_rng(0).uniform(size=(n, 2))
    X = X[order_points(X, "kdtree", tile)]

    def block(rows, cols):
        C = np.exp(-np.linalg.norm(X[rows][:, None] - X[cols][None], axis=2) / 0.1)
        C[rows[:, None] == cols[None, :]] += 1e-2
        return C

    A = tlr.TLRMatrix.from_generator(block, n, tile, accuracy=accuracy, method="batched")
    P = A.packed
    P.backend = CountingBackend()
    P.diagonal = P.diagonal.view(Counted)
    COUNT[0] = 0
    start = time.perf_counter()
    # As tlr.cholesky(A): no shift, no safeguard.
    factor = packed_left_looking(P, A.tolerance, DiagonalFactorizer(A.tolerance), 16, 0)
    seconds = time.perf_counter() - start
    ranks = factor.ranks[np.tril_indices(factor.n_tiles, -1)]
    return P.n_tiles, COUNT[0], ranks.mean(), seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192, 16384])
    parser.add_argument("--tile", type=int, default=128)
    parser.add_argument("--accuracy", type=float, default=1e-8)
    args = parser.parse_args(argv)
    print(
        f"{'n':>7} {'tile':>5} {'n_tiles':>7} {'operations':>10} {'per column':>10} "
        f"{'mean rank':>9} {'CPU s':>7}"
    )
    for n in args.sizes:
        n_t, ops, rank, seconds = count(n, args.tile, args.accuracy)
        print(
            f"{n:>7} {args.tile:>5} {n_t:>7} {ops:>10} {ops / n_t:>10.0f} {rank:>9.1f} "
            f"{seconds:>7.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
