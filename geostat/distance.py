"""Distances between sites: Euclidean, chordal and great-circle.

Longitude/latitude coordinates are in degrees (column 0 longitude, column 1 latitude);
spherical distances are in km on a sphere of radius :data:`EARTH_RADIUS_KM`.
``chordal`` is the distance through the sphere, ``2 R sin(theta / 2)`` for a central
angle ``theta``: every kernel positive definite in three dimensions stays positive
definite with it. ``great_circle`` is ``R theta``, with which only some kernels are
positive definite [1]_ (:func:`warn_if_invalid_on_sphere`).

The functions :func:`euclidean`, :func:`chordal`, :func:`great_circle` return
cross-distance matrices; :class:`Distance` objects (:func:`get_distance`) have
``embed``, ``pairwise`` (condensed) and ``cross``.

References
----------
.. [1] Gneiting, T. (2013). Strictly and non-strictly positive definite functions on
   spheres. Bernoulli, 19(4).
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial import ConvexHull, QhullError, cKDTree
from scipy.spatial.distance import cdist, pdist

from geostat.errors import GeostatWarning

if TYPE_CHECKING:
    from geostat.kernels import Kernel

__all__ = [
    "CHORDAL",
    "DISTANCE_NAMES",
    "EARTH_RADIUS_KM",
    "EUCLIDEAN",
    "GREAT_CIRCLE",
    "Distance",
    "SpaceTimeDistance",
    "TANGENT_MAX_DEGREES",
    "TANGENT_WARN_DEGREES",
    "TangentPlaneDistance",
    "central_angle",
    "check_lonlat",
    "chordal",
    "distance_extremes",
    "euclidean",
    "find_lonlat",
    "get_distance",
    "great_circle",
    "lonlat_to_xyz",
    "model_distance",
    "ordering_points",
    "nearest_pair",
    "resolve_distance",
    "spherical_cap",
    "warn_if_invalid_on_sphere",
]

#: Mean Earth radius (km).
EARTH_RADIUS_KM = 6371.0
#: Names accepted by :func:`get_distance`.
DISTANCE_NAMES = ("euclidean", "chordal", "great_circle")

_LON_NAMES = frozenset({"lon", "long", "lng", "longitude"})
_LAT_NAMES = frozenset({"lat", "latitude"})
# Rows of a great-circle block are chosen so that a block holds about this many pairs.
_BLOCK_PAIRS = 1 << 20


# ---------------------------------------------------------------------- checks
def _as_points(coords, argname):
    """Return ``coords`` as a 2-D float array of points (1-D input: one column)."""
    try:
        array = np.asarray(coords, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{argname} must be a numeric array of coordinates.") from None
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValueError(f"{argname} must be 2-D (n_sites, n_dims); got {array.ndim} dimensions.")
    if not np.isfinite(array).all():
        raise ValueError(
            f"{argname} contains NaN or infinite coordinates; drop or fill those rows."
        )
    return array


def check_lonlat(coords: ArrayLike, argname: str = "X") -> NDArray[np.float64]:
    """Check longitude/latitude coordinates in degrees and return them as floats.

    Parameters
    ----------
    coords : array_like of shape (n, 2)
        Column 0 longitude in [-180, 360], column 1 latitude in [-90, 90].
    argname : str, default "X"
        Name of the argument in error messages.

    Returns
    -------
    ndarray of shape (n, 2)
        float64 (a new array when a conversion was needed).

    Raises
    ------
    ValueError
        Wrong number of columns, non-finite values, or values out of range.
    """
    array = _as_points(coords, argname)
    hint = "pass distance='euclidean' for projected coordinates"
    if array.shape[1] != 2:
        raise ValueError(
            f"{argname} must have exactly 2 columns (longitude, latitude in degrees) for a "
            f"spherical distance; got {array.shape[1]}. Select the two columns, or {hint}."
        )
    if array.size:
        lon, lat = array[:, 0], array[:, 1]
        if lon.min() < -180 or lon.max() > 360:
            raise ValueError(
                f"{argname} longitudes (column 0) must be degrees in [-180, 360]; found "
                f"[{lon.min():g}, {lon.max():g}]. Convert radians to degrees, or {hint}."
            )
        if lat.min() < -90 or lat.max() > 90:
            raise ValueError(
                f"{argname} latitudes (column 1) must be degrees in [-90, 90]; found "
                f"[{lat.min():g}, {lat.max():g}]. Check the column order (longitude first), "
                f"or {hint}."
            )
    return array


def _check_radius(radius):
    if isinstance(radius, (bool, np.bool_)) or not isinstance(radius, numbers.Real):
        raise TypeError(f"radius must be a positive number (km), got {radius!r}.")
    radius = float(radius)
    if not (math.isfinite(radius) and radius > 0):
        raise ValueError(f"radius must be finite and > 0, got {radius!r}.")
    return radius


def _pair(a, b, check, argnames=("a", "b")):
    a = check(a, argnames[0])
    b = a if b is None else check(b, argnames[1])
    if a.shape[1] != b.shape[1]:
        raise ValueError(
            f"{argnames[0]} and {argnames[1]} must have the same number of columns; "
            f"got {a.shape[1]} and {b.shape[1]}."
        )
    return a, b


# ---------------------------------------------------------------------- functions
def euclidean(a: ArrayLike, b: ArrayLike | None = None) -> NDArray[np.float64]:
    """Euclidean distances ``(n_a, n_b)`` between the points `a` ``(n_a, d)`` and `b`
    ``(n_b, d)`` (default `a`); a 1-D array is points on a line."""
    a, b = _pair(a, b, _as_points)
    return cdist(a, b)


def lonlat_to_xyz(lonlat: ArrayLike, radius: float = EARTH_RADIUS_KM) -> NDArray[np.float64]:
    """Cartesian coordinates ``(n, 3)``,
    ``(R cos(lat) cos(lon), R cos(lat) sin(lon), R sin(lat))``, of longitude/latitude
    points `lonlat` ``(n, 2)`` in degrees on a sphere of `radius` km."""
    radius = _check_radius(radius)
    lonlat = check_lonlat(lonlat, "lonlat")
    lon, lat = np.radians(lonlat[:, 0]), np.radians(lonlat[:, 1])
    xyz = np.empty((lonlat.shape[0], 3))
    cos_lat = np.cos(lat)
    xyz[:, 0] = cos_lat * np.cos(lon)
    xyz[:, 1] = cos_lat * np.sin(lon)
    xyz[:, 2] = np.sin(lat)
    xyz *= radius
    return xyz


def chordal(
    a: ArrayLike, b: ArrayLike | None = None, radius: float = EARTH_RADIUS_KM
) -> NDArray[np.float64]:
    """Chordal distances (km, through the sphere) ``(n_a, n_b)`` between
    longitude/latitude points `a` ``(n_a, 2)`` and `b` ``(n_b, 2)`` (default `a`), in
    degrees; absolute rounding error about ``1e-12 * radius``."""
    xa = lonlat_to_xyz(a, radius)
    xb = xa if b is None else lonlat_to_xyz(b, radius)
    return cdist(xa, xb)


def central_angle(lon_a: Any, lat_a: Any, lon_b: Any, lat_b: Any, xp: Any = np) -> Any:
    """Central angle (radians) between points given in radians, broadcasting.

    Haversine form ``theta = 2 atan2(sqrt(h), sqrt(1 - h))`` with ``1 - h`` computed as
    the haversine to the antipode: full relative accuracy for tiny and nearly antipodal
    separations. `xp` is the array module of the inputs.
    """
    cos_cos = xp.cos(lat_a) * xp.cos(lat_b)
    sin_half_dlon = xp.sin(0.5 * (lon_b - lon_a))
    cos_half_dlon = xp.cos(0.5 * (lon_b - lon_a))
    hav = xp.sin(0.5 * (lat_b - lat_a)) ** 2 + cos_cos * sin_half_dlon**2
    hav_antipode = xp.sin(0.5 * (lat_b + lat_a)) ** 2 + cos_cos * cos_half_dlon**2
    return 2.0 * xp.arctan2(xp.sqrt(hav), xp.sqrt(hav_antipode))


def great_circle(
    a: ArrayLike, b: ArrayLike | None = None, radius: float = EARTH_RADIUS_KM
) -> NDArray[np.float64]:
    """Great-circle distances ``radius * theta`` (km) ``(n_a, n_b)`` between
    longitude/latitude points `a` ``(n_a, 2)`` and `b` ``(n_b, 2)`` (default `a`), in
    degrees; ``theta`` is the :func:`central_angle`."""
    radius = _check_radius(radius)
    a, b = _pair(a, b, check_lonlat)
    ra, rb = np.radians(a), np.radians(b)
    angle = central_angle(ra[:, 0, None], ra[:, 1, None], rb[None, :, 0], rb[None, :, 1])
    return radius * angle


def _great_circle_condensed(coords, radius):
    """Condensed great-circle distances, by blocks of rows (bounded memory)."""
    r = np.radians(coords)
    n = r.shape[0]
    out = np.empty(n * (n - 1) // 2)
    rows = max(1, _BLOCK_PAIRS // max(n, 1))
    pos = 0
    for start in range(0, n - 1, rows):
        stop = min(start + rows, n - 1)
        block = central_angle(
            r[start:stop, 0, None], r[start:stop, 1, None], r[None, start:, 0], r[None, start:, 1]
        )
        # keep columns j > i: in row-major order this is the condensed order
        upper = np.arange(start, n)[None, :] > np.arange(start, stop)[:, None]
        values = block[upper]
        out[pos : pos + values.size] = values
        pos += values.size
    out *= radius
    return out


# ---------------------------------------------------------------------- objects
class Distance:
    """A distance between sites.

    Parameters
    ----------
    name : {"euclidean", "chordal", "great_circle"}
    radius : float, default EARTH_RADIUS_KM
        Sphere radius (km) of the spherical distances.

    Attributes
    ----------
    name : str
    radius : float
    lonlat : bool
        True when coordinates are longitude/latitude in degrees.
    """

    def __init__(
        self, name: Literal["euclidean", "chordal", "great_circle"], radius: float = EARTH_RADIUS_KM
    ) -> None:
        if name not in DISTANCE_NAMES:
            raise ValueError(f"Unknown distance {name!r}; valid names are {list(DISTANCE_NAMES)}.")
        self.name = name
        self.radius = _check_radius(radius)
        self.lonlat = name != "euclidean"

    def embed(self, coords: ArrayLike) -> NDArray[np.float64] | None:
        """Coordinates (a new float array) in which the Euclidean distance equals this
        distance: `coords` for euclidean, :func:`lonlat_to_xyz` for chordal, None for
        great_circle."""
        if self.name == "euclidean":
            points = _as_points(coords, "coords")
            return points.copy() if np.shares_memory(points, np.asarray(coords)) else points
        if self.name == "chordal":
            return lonlat_to_xyz(coords, self.radius)
        return None

    def pairwise(self, coords: ArrayLike) -> NDArray[np.float64]:
        """Condensed distances of all pairs ``i < j`` of `coords`, ``(n (n - 1) / 2,)``,
        in the order of ``scipy.spatial.distance.pdist``."""
        if self.name == "great_circle":
            return _great_circle_condensed(check_lonlat(coords, "coords"), self.radius)
        return pdist(self.embed(coords))

    def cross(self, a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
        """Distances between sites `a` ``(n_a, d)`` and `b` ``(n_b, d)``, ``(n_a, n_b)``."""
        if self.name == "euclidean":
            return euclidean(a, b)
        if self.name == "chordal":
            return chordal(a, b, self.radius)
        return great_circle(a, b, self.radius)

    def __repr__(self) -> str:
        if self.radius == EARTH_RADIUS_KM:
            return f"Distance({self.name!r})"
        return f"Distance({self.name!r}, radius={self.radius!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Distance):
            return NotImplemented
        return (self.name, self.radius) == (other.name, other.radius)

    def __hash__(self) -> int:
        return hash((self.name, self.radius))


#: Largest angle (degrees) between the centre of the sites and a site at which a tangent
#: plane projection is used without a warning: distances toward the centre shrink by the
#: cosine of that angle, 1.5 % at 10 degrees.
TANGENT_WARN_DEGREES = 10.0
#: Largest such angle at all (distances shrink by 29 % at 45 degrees).
TANGENT_MAX_DEGREES = 45.0


def spherical_cap(coords: ArrayLike) -> tuple[tuple[float, float], float]:
    """The centre (longitude, latitude) of longitude/latitude sites, the direction of the
    mean of their unit vectors, and the largest angle (degrees) of a site from it.

    Raises
    ------
    ValueError
        If the sites surround the globe (their unit vectors average to about zero).
    """
    unit = lonlat_to_xyz(check_lonlat(coords, "coords"), 1.0)
    mean = unit.mean(axis=0)
    norm = float(np.linalg.norm(mean))
    if norm < 1e-9:
        raise ValueError(
            "the sites surround the globe: no tangent plane represents them; fit them "
            "isotropically."
        )
    mean /= norm
    widest = float(np.degrees(np.arccos(np.clip(np.min(unit @ mean), -1.0, 1.0))))
    center = (
        float(np.degrees(np.arctan2(mean[1], mean[0]))),
        float(np.degrees(np.arcsin(mean[2]))),
    )
    return center, widest


class TangentPlaneDistance(Distance):
    """Longitude/latitude sites projected orthographically onto the plane tangent to the
    sphere at their centre, in km east and north (an anisotropy's angle is
    counterclockwise from east).

    The projection is linear in the chordal embedding, so a kernel positive definite in
    the plane stays positive definite. Distances toward the centre shrink by the cosine
    of a site's angle from it (1.5 % at 10 degrees).

    Parameters
    ----------
    center : tuple of float
        Longitude and latitude (degrees) of the tangent point.
    radius : float, default EARTH_RADIUS_KM
    """

    def __init__(self, center: tuple[float, float], radius: float = EARTH_RADIUS_KM) -> None:
        super().__init__("chordal", radius)
        lon, lat = np.radians(np.asarray(center, dtype=np.float64))
        self.center = (float(np.degrees(lon)), float(np.degrees(lat)))
        self._axes = np.array(
            [
                [-np.sin(lon), np.cos(lon), 0.0],
                [-np.sin(lat) * np.cos(lon), -np.sin(lat) * np.sin(lon), np.cos(lat)],
            ]
        )

    @classmethod
    def around(cls, coords: ArrayLike, radius: float = EARTH_RADIUS_KM) -> TangentPlaneDistance:
        """The tangent plane at the centre of the sites (the direction of the mean of
        their unit vectors), checked against their extent.

        Raises
        ------
        ValueError
            If a site lies more than :data:`TANGENT_MAX_DEGREES` from the centre.

        Warns
        -----
        GeostatWarning
            If a site lies more than :data:`TANGENT_WARN_DEGREES` from it.
        """
        center, widest = spherical_cap(coords)
        if widest > TANGENT_MAX_DEGREES:
            raise ValueError(
                f"the sites extend {widest:.0f} degrees from their centre; an anisotropy in "
                "one tangent plane distorts distances by "
                f"{100 * (1 - np.cos(np.radians(widest))):.0f} % there (at most "
                f"{TANGENT_MAX_DEGREES:g} degrees are accepted). Fit a smaller region, or an "
                "isotropic model."
            )
        if widest > TANGENT_WARN_DEGREES:
            warnings.warn(
                f"the sites extend {widest:.0f} degrees from their centre: in the tangent "
                "plane of the anisotropy distances toward the centre shrink by up to "
                f"{100 * (1 - np.cos(np.radians(widest))):.1f} %.",
                GeostatWarning,
                stacklevel=4,
            )
        return cls(center, radius)

    def embed(self, coords: ArrayLike) -> NDArray[np.float64]:
        """Kilometres east and north of the centre, in the tangent plane."""
        return lonlat_to_xyz(coords, self.radius) @ self._axes.T

    def lift(self, points: NDArray[np.float64]) -> NDArray[np.float64]:
        """The points of the sphere ``(n, 3)``, as :func:`lonlat_to_xyz` gives them, whose
        projections on the tangent plane are `points` ``(n, 2)``, on the hemisphere
        around the centre: the inverse of :meth:`embed` there (points beyond the radius
        go to the rim)."""
        normal = lonlat_to_xyz(np.array([self.center]), 1.0)[0]
        height = np.sqrt(np.maximum(self.radius**2 - np.einsum("ij,ij->i", points, points), 0.0))
        return points @ self._axes + height[:, None] * normal

    def pairwise(self, coords: ArrayLike) -> NDArray[np.float64]:
        """Condensed distances in the tangent plane."""
        return pdist(self.embed(coords))

    def cross(self, a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
        """Distances in the tangent plane."""
        return cdist(self.embed(a), self.embed(b))

    def __repr__(self) -> str:
        return f"TangentPlaneDistance(center={self.center!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TangentPlaneDistance):
            return NotImplemented
        return (self.center, self.radius) == (other.center, other.radius)

    def __hash__(self) -> int:
        return hash(("tangent", self.center, self.radius))


class SpaceTimeDistance(Distance):
    """Sites in space and time: a spatial :class:`Distance` of all columns but the last,
    which is time (in its own units).

    ``embed`` gives the embedded spatial coordinates then the time (what a space-time
    kernel reads); ``pairwise`` is the spatial distance; ``cross`` the Euclidean
    distance of the embedded points (zero only for one site at one time).

    Parameters
    ----------
    space : Distance
        ``"euclidean"`` or ``"chordal"`` (great-circle distances have no embedding).
    """

    def __init__(self, space: Distance) -> None:
        if not isinstance(space, Distance) or isinstance(space, SpaceTimeDistance):
            raise TypeError(f"space must be a spatial Distance, got {space!r}.")
        if space.embed(np.zeros((1, 2))) is None:
            raise ValueError(
                "a space-time model needs coordinates with Euclidean differences; "
                f"distance={space.name!r} has none. Use distance='chordal' for "
                "longitude/latitude."
            )
        super().__init__(space.name, space.radius)
        self.space = space

    def embed(self, coords: ArrayLike) -> NDArray[np.float64]:
        """Embedded spatial coordinates, then the time column."""
        points = _as_points(coords, "coords")
        space = cast("NDArray[np.float64]", self.space.embed(points[:, :-1]))  # never None
        return np.hstack([space, points[:, -1:]])

    def pairwise(self, coords: ArrayLike) -> NDArray[np.float64]:
        """Condensed spatial distances of all pairs (time ignored)."""
        return self.space.pairwise(_as_points(coords, "coords")[:, :-1])

    def cross(self, a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
        """Euclidean distances of the embedded space-time points."""
        return euclidean(self.embed(a), self.embed(b))

    def __repr__(self) -> str:
        return f"SpaceTimeDistance({self.space!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SpaceTimeDistance):
            return NotImplemented
        return self.space == other.space

    def __hash__(self) -> int:
        return hash(("space-time", self.space))


EUCLIDEAN = Distance("euclidean")
CHORDAL = Distance("chordal")
GREAT_CIRCLE = Distance("great_circle")
_BY_NAME = {d.name: d for d in (EUCLIDEAN, CHORDAL, GREAT_CIRCLE)}


def get_distance(name_or_instance: str | Distance) -> Distance:
    """The :class:`Distance` of a name (``"euclidean"``, ``"chordal"``,
    ``"great_circle"``, case-insensitive) or instance (returned as is).

    ``"auto"`` is resolved by :func:`resolve_distance`, not here. Raises ValueError for
    an unknown name, TypeError for neither a str nor a Distance.
    """
    if isinstance(name_or_instance, Distance):
        return name_or_instance
    if not isinstance(name_or_instance, str):
        raise TypeError(
            f"distance must be one of {list(DISTANCE_NAMES)} or a Distance, "
            f"got {type(name_or_instance).__name__}."
        )
    key = name_or_instance.strip().lower()
    if key not in _BY_NAME:
        extra = " Resolve 'auto' with resolve_distance first." if key == "auto" else ""
        raise ValueError(
            f"Unknown distance {name_or_instance!r}; valid names are {list(DISTANCE_NAMES)}.{extra}"
        )
    return _BY_NAME[key]


def model_distance(name: str, kernel: Kernel, coords: ArrayLike) -> Distance:
    """The :class:`Distance` of a model of the sites `coords`: the
    :class:`TangentPlaneDistance` at their centre for an anisotropic kernel on
    longitude/latitude, wrapped in a :class:`SpaceTimeDistance` for a space-time kernel."""
    distance = get_distance(name)
    spatial = np.asarray(coords)[:, :-1] if kernel.time_axis else coords
    if kernel.anisotropic and distance.lonlat:
        if distance.name != "chordal":
            raise ValueError(
                "an anisotropic model on longitude/latitude measures distances in a tangent "
                f"plane, not by distance={distance.name!r}; pass distance='chordal' or 'auto'."
            )
        distance = TangentPlaneDistance.around(spatial, distance.radius)
    return SpaceTimeDistance(distance) if kernel.time_axis else distance


def ordering_points(coords: NDArray[np.float64], distance: Distance) -> NDArray[np.float64]:
    """Points whose KD-tree clusters sites that are close in the covariance's sense.

    The embedded coordinates (the coordinates themselves for the great-circle distance);
    for a :class:`SpaceTimeDistance` the time axis is rescaled to the spatial extent, so
    that a tree splits space and time alike.
    """
    points = distance.embed(coords)
    if points is None:
        return coords
    if isinstance(distance, SpaceTimeDistance) and points.shape[0]:
        space_extent = float(np.max(np.ptp(points[:, :-1], axis=0))) if points.shape[1] > 1 else 0.0
        time_extent = float(np.ptp(points[:, -1]))
        if space_extent > 0 and time_extent > 0:
            points[:, -1] *= space_extent / time_extent
    return points


def find_lonlat(column_names: Sequence[Any]) -> tuple[int, int] | None:
    """Positions of the longitude and latitude columns among `column_names`.

    ``(i_lon, i_lat)`` when exactly one longitude (``lon``, ``long``, ``lng``,
    ``longitude``) and one latitude (``lat``, ``latitude``) name is found (any case,
    spaces ignored), else None.
    """
    names = [str(c).strip().lower() for c in column_names]
    lon = [i for i, c in enumerate(names) if c in _LON_NAMES]
    lat = [i for i, c in enumerate(names) if c in _LAT_NAMES]
    if len(lon) == 1 and len(lat) == 1:
        return lon[0], lat[0]
    return None


def resolve_distance(spec, column_names):
    """Resolve a distance specification against the coordinate column names.

    Parameters
    ----------
    spec : str or Distance
        ``"auto"``, ``"euclidean"``, ``"chordal"`` or ``"great_circle"``
        (case-insensitive).
    column_names : sequence of str or None
        Names of the coordinate columns (None for an unnamed array).

    Returns
    -------
    name : str
        ``"euclidean"``, ``"chordal"`` or ``"great_circle"``.
    lonlat_columns : tuple of (int, int) or None
        Positions ``(i_lon, i_lat)`` within `column_names`; ``(0, 1)`` for a spherical
        distance whose columns are not so named; None for euclidean.

    Notes
    -----
    ``"auto"`` gives ``"chordal"`` when there are exactly two coordinate columns named
    like longitude and latitude (:func:`find_lonlat`), otherwise ``"euclidean"`` (with a
    warning when other columns come with longitude and latitude).
    """
    if isinstance(spec, Distance):
        spec = spec.name
    if not isinstance(spec, str):
        raise TypeError(
            f"distance must be 'auto', 'euclidean', 'chordal' or 'great_circle', "
            f"got {type(spec).__name__}."
        )
    key = spec.strip().lower()
    found = None if column_names is None else find_lonlat(column_names)
    if key == "auto":
        if found is not None and len(column_names) == 2:
            return "chordal", found
        if found is not None:
            warnings.warn(
                f"Coordinate columns {list(column_names)} include longitude and latitude but "
                "also other columns; using distance='euclidean'. Pass only the longitude and "
                "latitude columns (or move the others into the trend) for a spherical distance.",
                GeostatWarning,
                stacklevel=2,
            )
        return "euclidean", None
    if key == "euclidean":
        return "euclidean", None
    if key in ("chordal", "great_circle"):
        return key, found if found is not None else (0, 1)
    raise ValueError(
        f"Unknown distance {spec!r}; valid values are 'auto', 'euclidean', 'chordal', "
        "'great_circle'."
    )


def warn_if_invalid_on_sphere(
    distance_name: str | Distance,
    kernel: Kernel,
    params: Mapping[str, float] | None = None,
    stacklevel: int = 3,
) -> None:
    """Warn when a kernel may not be positive definite with the chosen distance.

    Parameters
    ----------
    distance_name : str or Distance
        The resolved distance.
    kernel : geostat.kernels.Kernel
        The kernel; its validity on the sphere at the shape values decides.
    params : dict, optional
        Parameter values; their shape parameters take precedence over the kernel's.
    stacklevel : int, default 3
        Of the warning: the caller of the public function that calls this one.

    Warns
    -----
    GeostatWarning
        For ``great_circle`` with a kernel that is not positive definite on the
        sphere (Matérn with smoothness > 0.5 or estimated, Gaussian, powered
        exponential with power > 1 or estimated).
    """
    name = distance_name.name if isinstance(distance_name, Distance) else str(distance_name)
    shape = {
        **kernel.fixed_shape,
        **{k: v for k, v in (params or {}).items() if k in kernel.shape_names},
    }
    if name.strip().lower() == "great_circle" and not kernel.great_circle_valid_at(shape):
        values = ", ".join(f"{k}={shape.get(k, 'estimated')}" for k in kernel.shape_names)
        warnings.warn(
            f"{type(kernel).__name__}({values}) is not guaranteed to be positive definite "
            "with great-circle distance (only Matern with smoothness <= 0.5, Exponential and "
            "PoweredExponential with power <= 1 are), so the covariance matrix may not be "
            "positive definite. Use distance='chordal', which is valid for every kernel.",
            GeostatWarning,
            stacklevel=stacklevel,
        )


def _search_tree(coords, distance):
    """Points in which the distance is Euclidean (or monotone in it), and their KD-tree."""
    points = distance.embed(coords)
    if points is None:  # great circle: monotone in the chordal distance
        points = lonlat_to_xyz(coords, distance.radius)
    return points, cKDTree(points)


def nearest_pair(
    coords: NDArray[np.float64], distance: Distance, tree: Any = None
) -> tuple[int, int, float]:
    """``(i, j, gap)``: the rows ``i < j`` of the two closest of ``n >= 2`` sites, by a
    KD-tree (`tree`, of the embedded points, when the caller has it), and their
    distance."""
    if tree is None:
        tree = _search_tree(coords, distance)[1]
    gaps, nearest = tree.query(tree.data, k=2)
    # With duplicates the query may list a twin before the point itself.
    others = np.where(nearest[:, 0] == np.arange(len(nearest)), nearest[:, 1], nearest[:, 0])
    i = int(np.argmin(gaps[:, 1]))
    i, j = sorted((i, int(others[i])))
    return i, j, float(distance.cross(coords[i : i + 1], coords[j : j + 1])[0, 0])


#: Most convex hull vertices whose pairs :func:`distance_extremes` compares (8 million
#: pairs, 64 MB).
EXACT_HULL = 4096


def distance_extremes(coords: NDArray[np.float64], distance: Distance) -> tuple[float, float]:
    """Smallest and largest distance between two sites, without all pairs.

    The nearest pair comes from a KD-tree. The farthest pair is exact on the sphere (the
    site farthest from ``p`` is the one nearest to ``-p``) and in two and three
    dimensions when the convex hull has at most :data:`EXACT_HULL` vertices; otherwise
    two farthest-point sweeps give a lower bound within a factor of two.

    Returns ``(min_distance, max_distance)``; ``(inf, 0.0)`` for a single site.
    """
    n = coords.shape[0]
    if n < 2:
        return np.inf, 0.0
    if isinstance(distance, SpaceTimeDistance):  # nearest in space-time, farthest in space
        spatial = np.unique(coords[:, :-1], axis=0)
        return nearest_pair(coords, distance)[2], distance_extremes(spatial, distance.space)[1]
    points, tree = _search_tree(coords, distance)
    smallest = nearest_pair(coords, distance, tree)[2]
    if distance.lonlat:
        far = tree.query(-points)[1]
        j = int(np.argmax(np.einsum("ij,ij->i", points - points[far], points - points[far])))
        return smallest, float(distance.cross(coords[j : j + 1], coords[far[j] : far[j] + 1])[0, 0])
    if points.shape[1] in (2, 3):
        try:
            points = points[ConvexHull(points).vertices]
        except QhullError:  # flat or too few points: sweeps over all the points
            pass
        else:
            if points.shape[0] <= EXACT_HULL:
                return smallest, float(pdist(points).max())
    far, largest = 0, 0.0
    for _ in range(2):
        d = np.sqrt(np.sum((points - points[far]) ** 2, axis=1))
        far, largest = int(np.argmax(d)), max(largest, float(d.max()))
    return smallest, largest


class SiteDistanceExtremes:
    """Mixin: ``min_distance`` and ``max_distance`` of ``self.coords`` under
    ``self.distance`` (:func:`distance_extremes`), computed on first use."""

    _extremes = None

    @property
    def min_distance(self):
        """Smallest distance between two sites (0.0 for duplicate sites)."""
        return self._distance_extremes()[0]

    @property
    def max_distance(self):
        """Largest distance between two sites (exact, or a lower bound within a factor of two:
        :func:`distance_extremes`)."""
        return self._distance_extremes()[1]

    def _distance_extremes(self):
        if self._extremes is None:
            self._extremes = distance_extremes(self.coords, self.distance)
        return self._extremes
