"""A back end that stands in for the GPU in tests: NumPy arrays, the GPU's code paths.

:class:`StandIn` keeps NumPy's ``cholesky``/``solve_triangular`` but takes every dense
method from the generic :class:`tlrcore.backends.Backend` (the code a CuPy back end runs:
no in-place LAPACK, inverse by triangular solves, squareform and cdist by array
operations), and is flagged like a GPU: TLR matrices are built and factored in the
packed layout, and ``method="auto"`` uses the GPU's thresholds. Its arrays are the
host's, so ``like`` (device arrays to the host for host callers) has nothing to move.
"""

from tlrcore.backends import Backend, NumpyBackend


class StandIn(NumpyBackend):
    """NumPy standing in for CuPy (see the module docstring)."""

    name = "standin"
    batched_by_default = True
    dense_cholesky = Backend.dense_cholesky
    cholesky_solve = Backend.cholesky_solve
    cholesky_inverse = Backend.cholesky_inverse
    squareform = Backend.squareform
    cdist = Backend.cdist
