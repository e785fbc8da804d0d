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
    """A matrix expected to be symmetric positive definite is not, numerically.

    Parameters
    ----------
    message : str
        What failed and what to try instead.
    tile : int or None
        Index of the diagonal tile (or, for a dense factorization, ``0``) whose
        Cholesky factorization broke down.
    """

    def __init__(self, message: str, tile: int | None = None) -> None:
        super().__init__(message)
        self.tile = tile


class FactorizationError(np.linalg.LinAlgError):
    """A dense factorization broke down numerically (overflow to infinity or NaN).

    Raised by :mod:`tlrcore.dense` when the computed factors are not finite, which happens
    only for matrices with entries near the floating-point limits; rescaling the matrix
    (and the result) avoids it.
    """


class GeneratorError(ValueError):
    """A block generator returned a block of the wrong shape, with non-finite values, or
    one that is not the transpose of the block across the diagonal (``A`` must be
    symmetric); the message names the tile."""


class ConsumedMatrixError(ValueError):
    """A :class:`~tlrcore.TLRMatrix` was used after ``tlrcore.cholesky(A, overwrite_a=True)``
    released its tiles. Only its shape (``n``, ``tile_size``, ``n_tiles``, ``offsets``)
    and ``repr`` remain; build the matrix again to use it."""
