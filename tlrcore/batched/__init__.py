"""Batched dense kernels on any array back end: Cholesky, triangular solves, products.

Every function takes a *fixed-size* batch (one array ``(b, m, n)``, returned as one array)
or a *variable-size* batch (a list or tuple of 2-D arrays of any shapes, returned as a
list), runs on the back end of its arrays (``backend=`` to choose; see
:mod:`tlrcore.backends`), and checks its arguments once. BLAS runs on one thread; on the
CPU a thread pool works on several stacks at once (:mod:`tlrcore.batched._run`).

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
picks per back end (``Backend.batched_strategy``).

Measured with ``benchmarks/gpu.py --parts 1`` on the 2-core CPU (OpenBLAS; two host
threads, one BLAS thread each; medians, single runs varied up to several-fold on this VM):

* Cholesky of 7,684 matrices of orders uniform in 16-512: 41-49 GFLOP/s for every
  strategy, 2.2-2.7x a Python loop of ``scipy.linalg.cholesky`` (18.5 GFLOP/s); 0.9-1.2x
  on one host thread. Grouping and padding tie, so ``auto`` groups on NumPy (no padded
  flops), moving orders that are multiples of 64 up by 8 (2,000 matrices of order 256:
  30.6 GFLOP/s against 18.7 unmoved; see :mod:`tlrcore.batched.plan`).
* GEMM of 256 products ``(b x r_i)(r_i x s)``, ``r_i`` uniform in 5-100: grouping
  0.96-1.75x a loop of ``@`` (best at ``b = 2048``), padding 1.2-1.5x (best at ``b = 512``);
  ``auto`` groups.

On a GPU ``auto`` pads. To measure there with ``--backend cupy``: grouping against
padding, the padding grid (``plan.PAD_RATIO``), and whether single calls beat stacks for
large orders (cuSOLVER's batched ``potrf`` targets small matrices).
"""

from tlrcore.batched.products import gemm
from tlrcore.batched.triangular import cholesky, solve_triangular

__all__ = ["cholesky", "gemm", "solve_triangular"]
