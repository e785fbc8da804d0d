"""Array back ends: chosen once (from a name or an array) and stored on each object.

Numerical code calls the back end's array module ``backend.xp`` and its few linear
algebra methods (:class:`Backend`), and never tests for a GPU. The NumPy back end is
always available; the CuPy one is imported on first use, so importing tlrcore never needs
CuPy. Both report a failed Cholesky factorization the same way (a per-matrix ``info``
array, as LAPACK's ``potrf``), and both raise ``numpy.linalg.LinAlgError`` for other
numerical failures. Other array types (a test's device stand-in) name their back end with
:func:`register_array_type`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tlrcore.backends._base import Backend, upload_indices
from tlrcore.backends.numpy_backend import NUMPY, NumpyBackend

__all__ = [
    "Backend",
    "NumpyBackend",
    "NUMPY",
    "get_backend",
    "cupy_available",
    "register_array_type",
    "upload_indices",
]

_CUPY = None
#: Back ends of registered array types (:func:`register_array_type`).
_ARRAY_TYPES: dict[type, Callable[[Any], Backend]] = {}


def register_array_type(array_type, backend):
    """Make :func:`get_backend` return ``backend(array)`` for arrays of `array_type` (its
    subclasses included), e.g. the device arrays of a back end that stands in for a GPU.

    Parameters
    ----------
    array_type : type
        Neither ``numpy.ndarray`` (or a subclass) nor a CuPy type: those keep their back end.
    backend : callable
        ``backend(array) -> Backend``.
    """
    if issubclass(array_type, np.ndarray) or array_type.__module__.split(".")[0] == "cupy":
        raise ValueError(f"{array_type.__name__} arrays have their back end already.")
    _ARRAY_TYPES[array_type] = backend


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
        ``"numpy"``, ``"cupy"``, a :class:`Backend`, or an array whose module (or
        :func:`register_array_type`) decides.

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
    for array_type, backend in _ARRAY_TYPES.items():
        if isinstance(spec, array_type):
            return backend(spec)
    raise TypeError(f"backend must be 'numpy', 'cupy' or an array; got {type(spec).__name__}.")
