"""Exceptions raised by tlrcore."""

import numpy as np

__all__ = ["NotPositiveDefiniteError"]


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

    def __init__(self, message, tile=None):
        super().__init__(message)
        self.tile = tile
