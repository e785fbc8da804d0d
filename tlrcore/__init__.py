"""tlrcore: tile low-rank (TLR) linear algebra.

The package knows nothing about kernels or statistics: matrices come from block
generators ``block(rows, cols)`` or dense arrays.

Public names
------------
TLRMatrix
    Symmetric TLR matrix, ``||A - A_tlr||_F <= accuracy ||A||_F``.
cholesky, TLRCholesky; ldl, TLRLDL
    TLR Cholesky (left-looking with ARA; right-looking reference; packed layout on any
    back end) with safeguards for matrices that lost definiteness; TLR LDLᵀ for
    symmetric indefinite matrices.
inverse_factor, InverseFactor
    The inverse ``L^{-1}`` of a TLR Cholesky factor in tiles, and the entries of ``A^{-1}``
    (its diagonal, principal blocks) it gives without ``n`` solves.
Factor, CholeskyFactor
    The contract every factor meets (:class:`typing.Protocol`).
compress, batched, dense, backends
    Block compression (ACA, ARA, SVD); batched Cholesky, triangular solves and GEMM; dense
    LDLᵀ and modified Cholesky; the NumPy and CuPy back ends.
summary, progress
    Memory, ranks and error of a TLR matrix; tile-column counters of long computations.
NotPositiveDefiniteError, FactorizationError, GeneratorError, ConsumedMatrixError
    Numerical failure (``.tile`` names the tile); an overflowed dense factorization; a
    block generator's wrong output; a matrix used after ``overwrite_a=True``.
"""

import re
from pathlib import Path

from tlrcore import batched, compress, dense
from tlrcore.cholesky import TLRCholesky, cholesky
from tlrcore.cholesky.inverse import InverseFactor, inverse_factor
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
    "InverseFactor",
    "inverse_factor",
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


def _distribution_version() -> str:
    """The distribution's version, read from ``geostat/_version.py`` (its one source,
    which the build reads too) as text: tlrcore never imports geostat."""
    path = Path(__file__).resolve().parent.parent / "geostat" / "_version.py"
    match = re.search(r'^__version__ = "([^"]+)"$', path.read_text(encoding="utf-8"), re.M)
    if match is None:
        raise ImportError(f"no __version__ in {path}")
    return match.group(1)


__version__ = _distribution_version()
