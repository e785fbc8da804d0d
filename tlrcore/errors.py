"""Exceptions raised by tlrcore."""

from __future__ import annotations

import numpy as np

__all__ = [
    "ConsumedMatrixError",
    "FactorizationError",
    "GeneratorError",
    "NotPositiveDefiniteError",
]


class NotPositiveDefiniteError(np.linalg.LinAlgError):
    """A matrix expected to be symmetric positive definite is not, numerically; `message` says
    what failed and what to try, `tile` is the index of the diagonal tile (``0`` for a dense
    factorization, the matrix's index in a batch) whose Cholesky factorization broke down."""

    def __init__(self, message: str, tile: int | None = None) -> None:
        super().__init__(message)
        self.tile = tile


class FactorizationError(np.linalg.LinAlgError):
    """A dense factorization broke down numerically (overflow to infinity or NaN).

    Raised by :mod:`tlrcore.dense` for factors that are not finite (entries near the
    floating-point limits; rescaling avoids it), by :func:`tlrcore.ldl` for a singular
    diagonal tile (with ``.tile``, its index) and by the batched compression of the GPU
    path for tiles whose samples or eigensolves are not finite (the message names them)."""


class GeneratorError(ValueError):
    """A block generator returned a block of the wrong shape, with non-finite values, or
    one that is not the transpose of the block across the diagonal (``A`` must be
    symmetric); the message names the tile."""


class ConsumedMatrixError(ValueError):
    """A :class:`~tlrcore.TLRMatrix` was used after ``tlrcore.cholesky(A, overwrite_a=True)``
    released its tiles. Only its shape (``n``, ``tile_size``, ``n_tiles``, ``offsets``)
    and ``repr`` remain; build the matrix again to use it."""
