"""tlrcore: tile low-rank (TLR) linear algebra.

The package knows nothing about kernels or statistics: matrices come from block
generators ``block(rows, cols)`` or dense arrays.

Public names
------------
TLRMatrix
    Symmetric tile low-rank matrix: ``from_generator``, ``from_dense``, ``@``,
    ``to_dense``, ``ranks``, ``nbytes``, ``n_tiles``.
compress
    Block compression to an absolute Frobenius tolerance: ``aca_compress``,
    ``ara_compress``, ``svd_compress``.
cholesky, TLRCholesky
    Left-looking TLR Cholesky with ARA-compressed updates (``variant="right"``: the
    right-looking variant with trailing updates recompressed by QR and SVD, no random
    sampling, a reference); the factor has ``logdet``, ``solve``, ``solve_lower``,
    ``solve_upper``, ``multiply_lower``, ``ranks``, ``nbytes``, ``to_dense``.
    ``safeguard=`` (``"compensate"``, ``"shift"``, ``"schur"``, ``"modified"``,
    ``"pivot"``, combinable) and ``shift=`` factor matrices that lost definiteness and
    report ``.perturbation``. ``variant="packed"`` (the default for a matrix built with
    ``method="batched"``, and the only one on a GPU) factors whole tile columns with
    batched kernels in the packed layout (``tlrcore.packed``) on any array back end; its
    factor is a ``PackedCholesky``. ``variant="batched"`` is its deprecated former name.
Factor, CholeskyFactor
    The contract every factor meets (:class:`typing.Protocol`): ``logdet``, ``solve``,
    ``to_dense``, ``ranks``, ``nbytes``, ``n``, ``backend``, ``perturbation``, ``shift``;
    a Cholesky-type factor also ``solve_lower``, ``solve_upper``, ``multiply_lower`` and
    ``perm``.
backends
    ``get_backend("numpy" | "cupy" | array)``: the array module and linear algebra a TLR
    matrix is built and factored with; CuPy is imported only when asked for.
ldl, TLRLDL
    Left-looking TLR LDLᵀ with Bunch–Kaufman or rook pivoting inside the diagonal tiles,
    for symmetric indefinite matrices: ``inertia``, ``slogdet``, ``logdet``, ``solve``.
batched
    Fixed- and variable-size batched dense kernels on any back end:
    ``batched.cholesky(mats)`` (a ``(b, m, m)`` array or a list of square arrays of any
    sizes), ``batched.solve_triangular``, ``batched.gemm`` (ranks varying per item).
dense
    Dense symmetric indefinite LDLᵀ (Bunch–Kaufman, rook) and modified Cholesky
    (Gill–Murray–Wright, Cheng–Higham): ``dense.ldl``, ``dense.modified_cholesky``.
summary
    Memory, ranks and an estimate of the achieved error of a TLR matrix.
progress
    ``with tlrcore.progress():`` shows a counter of tile columns (tqdm, standard error)
    for builds and factorizations that run longer than two seconds; off by default.
NotPositiveDefiniteError, GeneratorError
    Numerical failure (``.tile`` names the tile); a block generator that returned a wrong
    shape, non-finite values or a non-symmetric matrix.
FactorizationError
    A dense factorization overflowed.
ConsumedMatrixError
    A matrix used after ``cholesky(A, overwrite_a=True)`` released its tiles.

Layout
------
``matrix`` (TLRMatrix), ``ldl``, ``factor`` (the factor contract), ``diagnostics``,
``errors``; ``cholesky/`` (dispatch, left-, right-looking, pivoted and packed variants,
safeguards, the factors); ``packed/`` (the packed layout: tiles, tile columns, tile pool,
packed build, column update); ``compress/``, ``batched/`` (batched dense kernels),
``dense/``, ``backends/``; ``concurrency/`` (thread pools, per-tile seeds, BLAS on one
thread, worker processes, the allocator's tuning); private helpers ``_checks`` (argument
checks), ``_lapack``, ``_typing``.
"""

from tlrcore import batched, compress, dense
from tlrcore.cholesky import TLRCholesky, cholesky
from tlrcore.concurrency import progress
from tlrcore.diagnostics import summary
from tlrcore.errors import (
    ConsumedMatrixError,
    FactorizationError,
    GeneratorError,
    NotPositiveDefiniteError,
)
from tlrcore.factor import CholeskyFactor, Factor
from tlrcore.ldl import TLRLDL, ldl
from tlrcore.matrix import TLRMatrix

__all__ = [
    "TLRMatrix",
    "TLRCholesky",
    "TLRLDL",
    "Factor",
    "CholeskyFactor",
    "cholesky",
    "ldl",
    "batched",
    "compress",
    "dense",
    "summary",
    "progress",
    "NotPositiveDefiniteError",
    "FactorizationError",
    "GeneratorError",
    "ConsumedMatrixError",
]
__version__ = "0.2.0"  # released together with geostat (geostat/_version.py)
