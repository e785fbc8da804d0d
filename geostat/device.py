"""Covariance matrices on an array back end (a GPU through CuPy): sites, distances, blocks.

The sites are copied to the back end once, as the coordinates in which the distance is
Euclidean (:meth:`geostat.distance.Distance.embed`: the coordinates themselves, or the
3-D points of the chordal distance in km), or as longitude/latitude in radians for the
great-circle distance. Distances and covariance blocks are then formed with the array
module's operations only (``backend.xp``) and stay on the device.

Euclidean distances are formed by broadcasting, ``sqrt(sum_k (a_k - b_k)**2)`` in the
order of ``scipy.spatial.distance.cdist``: with NumPy standing in they equal ``cdist``
bit for bit (exact zeros on the diagonal). The Gram-matrix form
``|a|**2 + |b|**2 - 2 a.b``, one GEMM on a GPU, was measured against ``cdist`` on 2,000
sites with a few pairs 1e-7 apart: relative errors up to 2.4e-3 in the unit square,
1.0 for coordinates offset by 1e3, and 7e2 for chordal kilometres, with diagonal entries
up to 1e-4 instead of 0 (cancellation) -- far from the 1e-12 the likelihood needs, so it
is not used.

Public names
------------
DEVICES, device_backend
    Device names and the back end each selects.
DeviceSites
    Sites held on a back end: ``distances(rows, cols)``, ``covariance_block(kernel, params)``.
device_covariance_block
    The device counterpart of :func:`geostat.solvers.covariance_block`.
"""

from __future__ import annotations

import numpy as np

from geostat.distance import _central_angle, check_lonlat
from tlrcore.backends import get_backend

__all__ = ["DEVICES", "DeviceSites", "device_backend", "device_covariance_block"]

#: Values of the ``device`` argument of :class:`geostat.SpatialGP` and :func:`geostat.log_likelihood`.
DEVICES = ("cpu", "gpu")


def device_backend(device):
    """The array back end a device name selects: None for the CPU path, CuPy for ``"gpu"``.

    Parameters
    ----------
    device : {"cpu", "gpu"}

    Returns
    -------
    tlrcore.backends.Backend or None

    Raises
    ------
    ValueError
        For another name, or ``"gpu"`` when CuPy or a CUDA GPU is missing.
    """
    if device == "cpu":
        return None
    if device == "gpu":
        try:
            return get_backend("cupy")
        except ValueError as exc:
            raise ValueError(
                "device='gpu' needs CuPy and a CUDA GPU; install the GPU extra (pip install 'geostat[gpu]') "
                f"on a machine with an NVIDIA GPU, or use device='cpu'. ({exc})"
            ) from None
    raise ValueError(f"device={device!r} is not one of {DEVICES}.")


class DeviceSites:
    """Sites held on an array back end, with their distances.

    Parameters
    ----------
    coords : ndarray of shape (n, d)
        Host coordinates (longitude/latitude in degrees for spherical distances).
    distance : geostat.distance.Distance
    backend : str or tlrcore.backends.Backend, default "cupy"

    Attributes
    ----------
    backend : tlrcore.backends.Backend
    distance : geostat.distance.Distance
    n : int
    points : array of the back end, shape (n, k)
        The coordinates the distances are computed from.
    """

    def __init__(self, coords, distance, backend="cupy"):
        self.backend = get_backend(backend)
        self.distance = distance
        points = distance.embed(coords)
        if points is None:  # great circle: longitude and latitude in radians
            points = np.radians(check_lonlat(coords, "coords"))
        self.points = self.backend.asarray(points)
        self.n = points.shape[0]

    def _rows(self, index):
        return self.points if index is None else self.points[self.backend.xp.asarray(index)]

    def distances(self, rows=None, cols=None):
        """Distances between the sites `rows` and the sites `cols`, on the back end.

        Parameters
        ----------
        rows, cols : 1-D integer arrays (host or device), optional
            Site indices; None means all sites.

        Returns
        -------
        array of shape (len(rows), len(cols))
        """
        xp = self.backend.xp
        a, b = self._rows(rows), self._rows(cols)
        if self.distance.name == "great_circle":
            angle = _central_angle(a[:, 0, None], a[:, 1, None], b[None, :, 0], b[None, :, 1], xp=xp)
            return angle * self.distance.radius
        d2 = a[:, 0, None] - b[None, :, 0]
        d2 *= d2
        for k in range(1, a.shape[1]):
            diff = a[:, k, None] - b[None, :, k]
            diff *= diff
            d2 += diff
        return xp.sqrt(d2, out=d2)

    def covariance_block(self, kernel, params):
        """Block generator of the covariance matrix of these sites.

        Parameters
        ----------
        kernel : geostat.kernels.Kernel
        params : dict
            ``variance``, ``range``, ``nugget`` (default 0) and the kernel's shape
            parameters.

        Returns
        -------
        callable
            ``block(rows, cols)`` -> ``variance * M(d / range) + nugget * [rows == cols]``,
            an array of the back end, for 1-D integer index arrays (host or device).
        """
        xp = self.backend.xp
        shape = {k: params[k] for k in kernel.shape_names if k in params}
        variance, range_, nugget = float(params["variance"]), params["range"], float(params.get("nugget", 0.0))

        def block(rows, cols):
            rows, cols = xp.asarray(rows), xp.asarray(cols)
            C = kernel.device_correlation(self.distances(rows, cols), range_, xp, **shape)
            C *= variance
            if nugget:
                i, j = xp.nonzero(rows[:, None] == cols[None, :])
                C[i, j] += nugget
            return C

        return block


def device_covariance_block(coords, kernel, params, distance, backend="cupy"):
    """Block generator ``block(rows, cols)`` of the covariance matrix, evaluated on a back end.

    The device counterpart of :func:`geostat.solvers.covariance_block` (same arguments,
    same values to rounding). To build blocks for many parameter values, keep one
    :class:`DeviceSites` and call its :meth:`~DeviceSites.covariance_block`, so that the
    coordinates are copied to the device once.

    Parameters
    ----------
    coords : ndarray of shape (n, d)
    kernel : geostat.kernels.Kernel
    params : dict
        ``variance``, ``range``, ``nugget`` and the kernel's shape parameters.
    distance : geostat.distance.Distance
    backend : str or tlrcore.backends.Backend, default "cupy"

    Returns
    -------
    callable
        ``block(rows, cols)`` -> ``variance * M(d / range) + nugget * [rows == cols]`` as
        an array of ``backend.xp``.
    """
    return DeviceSites(coords, distance, backend).covariance_block(kernel, params)
