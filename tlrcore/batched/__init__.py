"""Batched dense kernels on any array back end: Cholesky, triangular solves, products.

Every function takes a *fixed-size* batch (one array ``(b, m, n)``, returned as one array)
or a *variable-size* batch (a list or tuple of 2-D arrays of any shapes, returned as a
list), runs on the back end of its arrays (or ``backend=``) with BLAS on one thread, and
checks its arguments once. A variable-size batch runs as stacked calls: ``"group"`` stacks
equal shapes; ``"pad"`` pads to a grid of sizes (identity blocks for matrices to factor or
solve with, zeros elsewhere: exact); ``"auto"`` is the back end's choice (grouping on
NumPy, padding on a GPU). The design follows MAGMA's batched Cholesky [1]_ [2]_.

Public names
------------
cholesky(mats, strategy="auto")
    Lower Cholesky factors; :class:`tlrcore.NotPositiveDefiniteError` names the first
    matrix that is not positive definite (``.tile``).
solve_triangular(Ls, Bs, lower=True, trans=False, strategy="auto")
    ``op(L[i])^{-1} B[i]``, any number of right-hand sides per matrix.
gemm(As, Bs, transa=False, transb=False, alpha=1.0, beta=0.0, Cs=None, strategy="auto")
    ``alpha op(A[i]) op(B[i]) + beta C[i]`` with shapes (ranks) varying per item.

References
----------
.. [1] Abdelfattah, A., Haidar, A., Tomov, S., Dongarra, J. (2016). Performance tuning and
   optimization techniques of fixed and variable size batched Cholesky factorization on
   GPUs. Procedia Computer Science 80 (ICCS 2016), 119-130.
.. [2] Abdelfattah, A., Haidar, A., Tomov, S., Dongarra, J. (2017). Fast Cholesky
   factorization on GPUs for batch and native modes in MAGMA. J. Comput. Sci. 20, 85-93.
"""

from tlrcore.batched.products import gemm
from tlrcore.batched.triangular import cholesky, solve_triangular

__all__ = ["cholesky", "gemm", "solve_triangular"]
