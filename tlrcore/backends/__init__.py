"""Array back ends: chosen once (from a name or an array) and stored on each object.

Numerical code calls the back end's array module ``backend.xp`` and its few linear
algebra methods (:class:`Backend`), and never tests for a GPU. The NumPy back end is
always available; the CuPy one is imported on first use, so importing tlrcore never needs
CuPy. Both report a failed Cholesky factorization the same way (a per-matrix ``info``
array, as LAPACK's ``potrf``), and both raise ``numpy.linalg.LinAlgError`` for other
numerical failures.
"""

from __future__ import annotations

import numpy as np

from tlrcore.backends._base import Backend
from tlrcore.backends.numpy_backend import NUMPY, NumpyBackend

__all__ = ["Backend", "NumpyBackend", "NUMPY", "get_backend", "cupy_available"]

_CUPY = None


def cupy_available():
    """True when CuPy imports and sees at least one GPU."""
    try:
        _cupy_backend()
    except ValueError:
        return False
    return True


def _cupy_backend():
    """The CuPy back end, created on first use; ValueError naming the fix if unavailable."""
    global _CUPY
    if _CUPY is None:
        try:
            import cupy
        except ImportError as exc:
            raise ValueError(
                f"backend='cupy' needs CuPy, which is not installed ({exc}); install it for your "
                "CUDA version, e.g. pip install cupy-cuda12x (or, from a clone of the repository, "
                "pip install \".[gpu]\"), or use backend='numpy'."
            ) from None
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # CUDA driver missing or broken: CuPy raises its own types
            raise ValueError(
                f"backend='cupy' found no usable GPU ({exc}); use backend='numpy'."
            ) from None
        if count == 0:
            raise ValueError("backend='cupy' found no GPU; use backend='numpy'.")
        from tlrcore.backends.cupy_backend import CupyBackend

        _CUPY = CupyBackend()
    return _CUPY


def get_backend(spec="numpy"):
    """Return the back end named by `spec`, or the one an array belongs to.

    Parameters
    ----------
    spec : str, Backend or array
        ``"numpy"``, ``"cupy"``, a :class:`Backend`, or an array whose module decides.

    Returns
    -------
    Backend

    Raises
    ------
    ValueError
        For an unknown name, or ``"cupy"`` (or a CuPy array) when CuPy or a GPU is missing.
    TypeError
        For anything else.
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
            return _cupy_backend()
        raise ValueError(f"backend={spec!r} is unknown; use 'numpy' or 'cupy'.")
    if type(spec).__module__.split(".")[0] == "cupy":
        return _cupy_backend()
    raise TypeError(f"backend must be 'numpy', 'cupy' or an array; got {type(spec).__name__}.")
