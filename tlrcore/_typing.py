"""Type aliases of tlrcore's public signatures.

They only annotate (``py.typed`` ships with the package; ``mypy`` checks the public modules
in the tests, ``tests/test_typing.py``): no function looks at them at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "BackendArray",
    "BatchList",
    "BlockGenerator",
    "FloatArray",
    "IntArray",
    "Pivoting",
    "SafeguardSpec",
    "Seed",
    "Strategy",
]

#: A float64 NumPy array.
FloatArray: TypeAlias = NDArray[np.float64]
#: An integer NumPy array (ranks, permutations).
IntArray: TypeAlias = NDArray[np.int64]
#: An array of a matrix's back end: a NumPy array, or a CuPy array on the ``"cupy"`` back end
#: (CuPy has no type information, hence ``Any``).
BackendArray: TypeAlias = Any
#: ``block(rows, cols) -> A[rows][:, cols]`` for integer index arrays (NumPy arrays); it may
#: return an array of the matrix's back end.
BlockGenerator: TypeAlias = Callable[[NDArray[np.intp], NDArray[np.intp]], ArrayLike]
#: A seed: a non-negative integer or a NumPy ``Generator``.
Seed: TypeAlias = int | np.integer | np.random.Generator
#: Pivoting of a dense LDLᵀ: Bunch–Kaufman or rook.
Pivoting: TypeAlias = Literal["bk", "rook"]
#: Safeguards of :func:`tlrcore.cholesky`: None, a name (``"compensate"``,
#: ``"compensate-block"``, ``"shift"``, ``"schur"``, ``"modified"``, ``"pivot"``), a
#: ``"+"``-joined combination, or a collection of names.
SafeguardSpec: TypeAlias = str | list[str] | tuple[str, ...] | set[str] | frozenset[str] | None
#: The variable-size form of a batch: a list or tuple of 2-D arrays (NumPy or of the back end).
BatchList: TypeAlias = list[Any] | tuple[Any, ...]
#: How a batched kernel stacks a variable-size batch (:mod:`tlrcore.batched`).
Strategy: TypeAlias = Literal["auto", "group", "pad"]
