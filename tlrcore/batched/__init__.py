"""Batched dense kernels on any array back end: Cholesky, triangular solves, products.

Every function takes a *fixed-size* batch (one array ``(b, m, n)``, returned as one array)
or a *variable-size* batch (a list or tuple of 2-D arrays of any shapes, returned as a
list), runs on the back end of its arrays (``backend=`` to choose; see
:mod:`tlrcore.backends`) with BLAS on one host thread, and checks its arguments once.

Public names
------------
cholesky(mats, strategy="auto")
    Lower Cholesky factors; :class:`tlrcore.NotPositiveDefiniteError` with ``.tile`` =
    the index of the first matrix that is not positive definite.
solve_triangular(Ls, Bs, lower=True, trans=False, strategy="auto")
    ``op(L[i])^{-1} B[i]``, any number of right-hand sides per matrix.
gemm(As, Bs, transa=False, transb=False, alpha=1.0, beta=0.0, Cs=None, strategy="auto")
    ``alpha op(A[i]) op(B[i]) + beta C[i]`` with shapes (ranks) varying per item.

Strategies
----------
A variable-size batch runs as stacked calls: ``"group"`` stacks equal shapes (one call per
distinct shape); ``"pad"`` pads to a grid of sizes (identity blocks for matrices to
factor or solve with, zeros elsewhere: exact) and stacks by padded shape; ``"auto"``
picks per back end (:data:`tlrcore.batched._plan.AUTO`).

Measured with ``benchmarks/gpu.py --parts 1`` on the 2-core CPU (OpenBLAS, one BLAS
thread; see that script for the table): grouping beats padding, so ``auto`` groups on
NumPy, moving Cholesky orders that are multiples of 64 up by 8 (OpenBLAS ``dpotrf`` runs
2-2.5x slower at such orders). A thread pool across the stacks did not help on the 2
busy cores and is not used. On a GPU, ``auto`` pads (one launch and one host
synchronization per call is what padding saves); whether it beats grouping there, and
the best padding grid, are still to be measured with ``--backend cupy``.
"""

from tlrcore.batched.products import gemm
from tlrcore.batched.triangular import cholesky, solve_triangular

__all__ = ["cholesky", "gemm", "solve_triangular"]
