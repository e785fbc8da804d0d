"""Array back ends: chosen once (from a name or an array) and stored on each object.

Numerical code calls ``backend.xp`` (the array module) and never tests for a GPU. The
NumPy back end is always available; CuPy is registered lazily so that importing tlrcore
never needs it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Backend", "NUMPY", "get_backend"]


@dataclass(frozen=True)
class Backend:
    """An array module and its name.

    Attributes
    ----------
    name : str
    xp : module
        ``numpy`` or a compatible module.
    """

    name: str
    xp: object

    def asarray(self, a):
        """Convert `a` to a float64 array of this back end."""
        return self.xp.asarray(a, dtype=self.xp.float64)


NUMPY = Backend("numpy", np)


def get_backend(spec="numpy"):
    """Return the back end named by `spec`, or the one an array belongs to.

    Parameters
    ----------
    spec : str, Backend or array
        ``"numpy"``, a :class:`Backend`, or an array whose module decides.

    Returns
    -------
    Backend

    Raises
    ------
    ValueError
        For an unknown name, or ``"cupy"`` while the GPU back end is not available.
    """
    if isinstance(spec, Backend):
        return spec
    if isinstance(spec, np.ndarray):
        return NUMPY
    if isinstance(spec, str):
        name = spec.lower()
        if name == "numpy":
            return NUMPY
        if name == "cupy":
            raise ValueError("backend='cupy' is not available in this version of tlrcore; use backend='numpy'.")
        raise ValueError(f"backend={spec!r} is unknown; use 'numpy'.")
    raise TypeError(f"backend must be a name such as 'numpy' or an array; got {type(spec).__name__}.")
