r"""Sites on an array back end: distances, correlation matrices and covariance blocks.

Every likelihood forms its matrices here. The sites are copied to the back end once, as
the coordinates in which the distance is Euclidean
(:meth:`geostat.distance.Distance.embed`), or as longitude/latitude in radians for the
great-circle distance. Whole matrices (the dense likelihood) are expanded from the
``n (n - 1) / 2`` pair distances, computed once; blocks ``block(rows, cols)`` and
scattered entries ``block.entries(i, j)`` (the TLR build) from distances formed on the
back end by the same sums. The covariance is

    ``C_ij = variance * M(d_ij / range) + (nugget + noise_i) [i == j]``.
"""

from __future__ import annotations

import numpy as np

from geostat.distance import central_angle, check_lonlat
from geostat.kernels._base import array_namespace, map_chunks
from geostat.kernels.lags import requested_names
from geostat.kernels.tabulation import LogDistanceTable, RadialFunction, RadialTable

__all__ = [
    "LAG_BLOCK",
    "NEGLIGIBLE_DERIVATIVE",
    "TABULATE_PAIRS",
    "PairCorrelation",
    "Sites",
    "condensed_pairs",
    "cross_correlation",
    "lag_rows",
]

#: Entries per block of rows in which a kernel of coordinate differences is evaluated
#: (:func:`lag_rows`): each block's temporaries stay in the cache.
LAG_BLOCK = 1 << 15

#: Pair counts between which costly kernels (Bessel functions) are evaluated through a
#: :class:`~geostat.kernels.tabulation.LogDistanceTable`; above the upper one its weights
#: would need more memory than the covariance matrix itself.
TABULATE_PAIRS = (100_000, 50_000_000)

#: Entries of a correlation derivative below this are set to zero: next to the unit
#: diagonal of the correlation they are below rounding, and a TLR matrix of entries
#: near the underflow threshold cannot be compressed (its norms underflow).
NEGLIGIBLE_DERIVATIVE = 1e-100


def condensed_pairs(coords, distance, kernel):
    """The pairs ``i < j`` of sites (``pdist`` order) as `kernel` reads them.

    Returns the distances, ``(n (n - 1) / 2,)``, or for a kernel of coordinate
    differences a list of ``points[i] - points[j]`` per embedded axis.
    """
    if not kernel.structured:
        return distance.pairwise(coords)
    points = distance.embed(coords)
    i, j = np.triu_indices(points.shape[0], 1)
    return [points[i, k] - points[j, k] for k in range(points.shape[1])]


class PairCorrelation:
    """The correlation at fixed pairs of sites, given by their `distances` (or the list of
    their differences along each axis, :func:`condensed_pairs`), through a
    :class:`~geostat.kernels.tabulation.LogDistanceTable` for a costly kernel between
    :data:`TABULATE_PAIRS` pairs."""

    def __init__(self, distances):
        self.distances = distances
        self._table = None

    @property
    def size(self):
        """int: The number of pairs."""
        return (self.distances[0] if isinstance(self.distances, list) else self.distances).size

    def evaluate(self, kernel, theta, gradient=False):
        """``(values, grads)``: the correlation at `theta` (``range`` and the shape
        parameters) and, with `gradient`, its derivatives in ``"range"`` and each free
        shape parameter (else an empty dict)."""
        shape = kernel.resolve_shape({k: v for k, v in theta.items() if k != "range"})
        d = self.distances
        if kernel.structured:
            return kernel.lag_evaluate(d, theta["range"], shape, gradient)
        if getattr(kernel, "costly", False) and TABULATE_PAIRS[0] <= d.size <= TABULATE_PAIRS[1]:
            if self._table is None:
                self._table = LogDistanceTable(d)
            return self._table.evaluate(kernel, theta["range"], shape, gradient)
        return kernel.evaluate(d, theta["range"], shape, gradient)


def cross_correlation(kernel, distance, theta, a, b):
    """The correlation ``(m, n)`` between the sites `a` ``(m, d)`` and `b` ``(n, d)`` on
    the host, at `theta` (``range`` and the kernel's shape parameters), written over the
    distances it is computed from (validated coordinates: the distances are not checked
    again)."""
    shape = kernel.resolve_shape({k: v for k, v in theta.items() if k != "range"})
    if kernel.structured:
        return lag_rows(kernel, distance.embed(a), distance.embed(b), theta["range"], shape)[0]
    d = np.ascontiguousarray(distance.cross(a, b), dtype=np.float64)
    return kernel.evaluate(d, float(theta["range"]), shape, overwrite_d=True)[0]


def lag_rows(kernel, a, b, range_, shape, gradient=False):
    """A kernel of coordinate differences between the points `a` and `b`, evaluated by
    blocks of rows of about :data:`LAG_BLOCK` entries (temporaries stay in the cache).

    Returns ``(R, dR)``, ``(m, n)`` each, for `a` ``(m, k)`` and `b` ``(n, k)``;
    `gradient` as for :meth:`~geostat.kernels.lags.LagKernel.lag_evaluate`.
    """
    xp = array_namespace(a)
    m, n = a.shape[0], b.shape[0]
    names = requested_names(kernel, gradient)
    R = xp.empty((m, n))
    dR = {name: xp.empty((m, n)) for name in names}
    step = max(1, LAG_BLOCK // max(1, n))
    columns = [b[None, :, k] for k in range(b.shape[1])]
    for start in range(0, m, step):
        rows = slice(start, min(start + step, m))
        part = a[rows]
        R[rows], grads = kernel.lag_evaluate(
            [part[:, k, None] - column for k, column in enumerate(columns)], range_, shape, gradient
        )
        for name in names:
            dR[name][rows] = grads[name]
    return R, dR


class Sites:
    """Sites held on an array back end, with their distances and covariance matrices.

    Parameters
    ----------
    coords : ndarray of shape (n, d)
        Host coordinates (longitude/latitude in degrees for spherical distances).
    distance : geostat.distance.Distance
    backend : tlrcore.backends.Backend
        Where the matrices are formed (:func:`geostat.solvers.get_backend`).

    Attributes
    ----------
    n : int
    points : array of the back end, shape (n, k)
        The coordinates the distances are computed from.
    """

    def __init__(self, coords, distance, backend):
        self.coords = coords
        self.distance = distance
        self.backend = backend
        points = distance.embed(coords)
        self._spherical = points is None
        if self._spherical:  # great circle: longitude and latitude in radians
            points = np.radians(check_lonlat(coords, "coords"))
        self.points = backend.asarray(points)
        self.n = points.shape[0]
        self._pairs = None
        self._correlation = None
        self._axes = None

    def __reduce__(self):
        """Pickle the host coordinates, distance and back end only; the points are
        recomputed bit for bit and the caches are not sent (small Dask tasks)."""
        return Sites, (self.coords, self.distance, self.backend)

    # ------------------------------------------------------------------ whole matrices
    def pair_distances(self):
        """Condensed distances of all pairs ``i < j`` on the back end (computed once)."""
        if self._pairs is None:
            self._pairs = self.backend.asarray(self.distance.pairwise(self.coords))
        return self._pairs

    def correlation(self, kernel, theta, gradient=False):
        """``(R, dR)``: the correlation matrix ``(n, n)`` on the back end and, with
        `gradient`, its derivatives (as :meth:`PairCorrelation.evaluate`)."""
        if kernel.structured:
            return self._lag_correlation(kernel, theta, gradient)
        if self._correlation is None:
            self._correlation = PairCorrelation(self.pair_distances())
        values, grads = self._correlation.evaluate(kernel, theta, gradient)
        square = self.backend.squareform
        dR = {k: square(v, self.n, 0.0) for k, v in grads.items()}
        return square(values, self.n, 1.0), dR

    def _lag_correlation(self, kernel, theta, gradient):
        """:meth:`correlation` of a kernel of coordinate differences (:func:`lag_rows`)."""
        shape = kernel.resolve_shape({k: v for k, v in theta.items() if k != "range"})
        return lag_rows(kernel, self.points, self.points, theta["range"], shape, gradient)

    def lags_between(self, i, j):
        """Coordinate differences of the sites `i` and `j` (broadcasting), one per axis."""
        return [axis[i] - axis[j] for axis in self._point_axes()]

    def _point_axes(self):
        """Each coordinate of the points, contiguous: gathers of single values."""
        if self._axes is None:
            xp = self.backend.xp
            self._axes = [
                xp.ascontiguousarray(self.points[:, k]) for k in range(self.points.shape[1])
            ]
        return self._axes

    # ------------------------------------------------------------------ blocks
    def at(self, index):
        """The points at the index array `index`, host (moved to the back end explicitly,
        as a GPU's arrays require) or of the back end."""
        return self.points[self.backend.xp.asarray(index)]

    def distances(self, rows=None, cols=None):
        """Distances ``(len(rows), len(cols))`` between the sites `rows` and `cols` (1-D
        index arrays; None: all sites), on the back end."""
        a = self.points if rows is None else self.at(rows)
        b = self.points if cols is None else self.at(cols)
        if self._spherical:
            xp = self.backend.xp
            return (
                central_angle(a[:, 0, None], a[:, 1, None], b[None, :, 0], b[None, :, 1], xp=xp)
                * self.distance.radius
            )
        return self.backend.cdist(a, b)

    def between(self, i, j):
        """Distances between the sites `i` and `j` (index arrays that broadcast), on the
        back end, by the same sums as :meth:`distances`."""
        x = self._point_axes()
        if self._spherical:
            xp = self.backend.xp
            return central_angle(x[0][i], x[1][i], x[0][j], x[1][j], xp=xp) * self.distance.radius
        d2 = x[0][i] - x[0][j]
        d2 *= d2
        for axis in x[1:]:
            diff = axis[i] - axis[j]
            diff *= diff
            d2 += diff
        return self.backend.xp.sqrt(d2, out=d2)

    def covariance_block(self, kernel, params, diagonal=None):
        """Block generator of the covariance matrix of these sites.

        `params` holds ``variance``, ``range``, ``nugget`` (default 0) and the shape
        parameters; `diagonal` ``(n,)`` known noise variances. Returns
        ``block(rows, cols)`` -> ``variance * M(d / range) + (nugget + diagonal[rows])
        [rows == cols]`` on the back end, for 1-D index arrays, and
        ``block.entries(i, j)``, the same elementwise for index arrays that broadcast.
        """
        return (_LagCovarianceBlock if kernel.structured else _CovarianceBlock)(
            self, kernel, params, diagonal
        )

    def gradient_block(self, kernel, theta, name):
        """Block generator (as :meth:`covariance_block`) of ``dR / d name``, `name`
        ``"range"`` or a free shape parameter, at `theta`; entries below
        :data:`NEGLIGIBLE_DERIVATIVE` in magnitude are set to zero."""
        return (_LagGradientBlock if kernel.structured else _GradientBlock)(
            self, kernel, theta, name
        )


class _CovarianceBlock:
    """The covariance of the sites by blocks or elementwise (:meth:`Sites.covariance_block`)."""

    #: Distances are symmetric bit for bit, so tlrcore need not check the diagonal tiles.
    symmetric_blocks = True

    def __init__(self, sites, kernel, params, diagonal=None):
        self._sites = sites
        shape = kernel.resolve_shape({k: params[k] for k in kernel.shape_names if k in params})
        self._correlation = _radial(kernel, params["range"], shape)
        self._set_diagonal(params, diagonal)

    def _set_diagonal(self, params, diagonal):
        """Store the variance, nugget and per-site `diagonal` (None: none) on the back end."""
        self._variance = float(params["variance"])
        self._nugget = float(params.get("nugget", 0.0))
        self._diagonal = None if diagonal is None else self._sites.backend.asarray(diagonal)

    def _covariance(self, d):
        """The covariance at the distances `d`, written over `d` chunk by chunk."""
        return _in_place(self._scaled_correlation, d)

    def _scaled_correlation(self, d):
        C = self._correlation(d, overwrite_d=True)
        C *= self._variance
        return C

    def _block(self, rows, cols):
        """The covariance without the nugget between the sites `rows` and `cols`."""
        return self._covariance(self._sites.distances(rows, cols))

    def _pairs(self, i, j):
        """The covariance without the nugget between the sites `i` and `j`, elementwise."""
        return self._covariance(self._sites.between(i, j))

    def _on_diagonal(self, sites):
        """The nugget plus the per-site diagonal at the index array `sites` (host or back
        end)."""
        if self._diagonal is None:
            return self._nugget
        return self._nugget + self._diagonal[self._sites.backend.xp.asarray(sites)]

    def __call__(self, rows, cols):
        C = self._block(rows, cols)
        if (self._nugget or self._diagonal is not None) and _overlap(rows, cols):
            # where the indices are (tlrcore's are on the host): no read back from a device
            ns = array_namespace(rows)
            xp = self._sites.backend.xp
            if (
                rows.shape == cols.shape
                and bool(ns.all(rows == cols))
                and bool(ns.all(rows[1:] > rows[:-1]))
            ):
                # the same increasing (so distinct) sites: the diagonal, without an m x m mask
                diagonal = xp.arange(rows.size)
                C[diagonal, diagonal] += self._on_diagonal(rows)
            else:
                i, j = ns.nonzero(rows[:, None] == cols[None, :])
                C[xp.asarray(i), xp.asarray(j)] += self._on_diagonal(rows[i])
        return C

    def entries(self, i, j):
        """The covariance between the sites `i` and `j` (broadcasting), elementwise."""
        C = self._pairs(i, j)
        if (self._nugget or self._diagonal is not None) and _overlap(i, j):
            xp = self._sites.backend.xp
            i, j = xp.broadcast_arrays(xp.asarray(i), xp.asarray(j))
            same = i == j
            C[same] += self._on_diagonal(i[same])
        return C


def _in_place(func, d):
    """The elementwise `func` of the new array `d`, written over it (or a C-ordered copy)
    chunk by chunk."""
    d = array_namespace(d).ascontiguousarray(d)
    flat = d.reshape(-1)
    map_chunks(func, flat, flat)
    return d


def _radial(kernel, range_, shape, name=None):
    """The correlation of `kernel` (or its derivative `name`) as a function of distance,
    interpolated by a :class:`~geostat.kernels.tabulation.RadialTable` for a costly
    kernel."""
    function = RadialTable if getattr(kernel, "costly", False) else RadialFunction
    return function(kernel, range_, shape, name)


def _overlap(i, j):
    """Whether the index ranges of `i` and `j` overlap (else the nugget adds nothing)."""
    return bool(i.min() <= j.max()) and bool(j.min() <= i.max())


class _GradientBlock:
    """``dR / d name`` of the sites by blocks or elementwise (:meth:`Sites.gradient_block`)."""

    #: As :attr:`_CovarianceBlock.symmetric_blocks`.
    symmetric_blocks = True

    def __init__(self, sites, kernel, theta, name):
        self._sites = sites
        shape = kernel.resolve_shape({k: v for k, v in theta.items() if k != "range"})
        self._derivative_of = _radial(kernel, theta["range"], shape, name)

    def _derivative(self, d):
        """The derivative at the distances `d`, written over `d` chunk by chunk."""
        return _in_place(self._significant_derivative, d)

    def _significant_derivative(self, d):
        D = self._derivative_of(d)
        D[abs(D) < NEGLIGIBLE_DERIVATIVE] = 0.0
        return D

    def __call__(self, rows, cols):
        return self._derivative(self._sites.distances(rows, cols))

    def entries(self, i, j):
        """The derivative between the sites `i` and `j`, elementwise."""
        return self._derivative(self._sites.between(i, j))


class _LagCovarianceBlock(_CovarianceBlock):
    """:class:`_CovarianceBlock` of a kernel of coordinate differences.

    Tiles are compressed from whole tiles, not by cross approximation: a space-time tile
    can hold a small block of near-variance entries (one site at times on either side
    of the tile boundary) that ACA's pivots miss.
    """

    cross_approximation = False

    def __init__(self, sites, kernel, params, diagonal=None):
        self._sites = sites
        self._kernel = kernel
        self._range = float(params["range"])
        self._shape = kernel.resolve_shape(
            {k: params[k] for k in kernel.shape_names if k in params}
        )
        self._set_diagonal(params, diagonal)

    def _block(self, rows, cols):
        sites = self._sites
        C = lag_rows(self._kernel, sites.at(rows), sites.at(cols), self._range, self._shape)[0]
        C *= self._variance
        return C

    def _pairs(self, i, j):
        C = self._kernel.lag_evaluate(self._sites.lags_between(i, j), self._range, self._shape)[0]
        C *= self._variance
        return C


class _LagGradientBlock:
    """``dR / d name`` of a kernel of coordinate differences, as :class:`_GradientBlock`,
    compressed from whole tiles as :class:`_LagCovarianceBlock`."""

    symmetric_blocks = True
    cross_approximation = False

    def __init__(self, sites, kernel, theta, name):
        self._sites = sites
        self._kernel = kernel
        self._range = theta["range"]
        self._shape = kernel.resolve_shape({k: v for k, v in theta.items() if k != "range"})
        self._name = name

    def _significant(self, D):
        D[abs(D) < NEGLIGIBLE_DERIVATIVE] = 0.0
        return D

    def __call__(self, rows, cols):
        a, b = self._sites.at(rows), self._sites.at(cols)
        return self._significant(
            lag_rows(self._kernel, a, b, self._range, self._shape, (self._name,))[1][self._name]
        )

    def entries(self, i, j):
        """The derivative between the sites `i` and `j`, elementwise."""
        deltas = self._sites.lags_between(i, j)
        return self._significant(
            self._kernel.lag_evaluate(deltas, self._range, self._shape, (self._name,))[1][
                self._name
            ]
        )
