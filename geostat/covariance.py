r"""Sites on an array back end: distances, correlation matrices and covariance blocks.

Every likelihood, on every back end, forms its matrices here. The sites are copied to
the back end once, as the coordinates in which the distance is Euclidean
(:meth:`geostat.distance.Distance.embed`: the coordinates themselves, or the 3-D points
of the chordal distance in km), or as longitude/latitude in radians for the great-circle
distance; blocks are then formed with the back end's operations only and stay there.

Two evaluation strategies, chosen by size and kernel cost, never by back end:

* **Whole matrices** (the dense likelihood): the ``n (n - 1) / 2`` pair distances are
  computed once (on the host, ``scipy.spatial.distance.pdist`` order) and kept; the
  correlation is evaluated on them and expanded to the symmetric matrix
  (``backend.squareform``). Costly kernels (a Matérn of general smoothness, whose Bessel
  functions dominate) go through a :class:`~geostat.kernels.tabulation.LogDistanceTable`
  between :data:`TABULATE_PAIRS` pairs.
* **Blocks** ``block(rows, cols)`` (the TLR likelihood and the tile generators): distances
  by ``backend.cdist`` (``scipy.spatial.distance.cdist`` on the host, the same sums by
  broadcasting elsewhere) or the haversine form on the sphere. The same covariance at
  scattered index pairs, ``block.entries(i, j)`` (the same sums, by broadcasting), lets
  the TLR build read the ACA columns of many tiles in one call.

Kernels are evaluated through :meth:`geostat.kernels.Kernel.evaluate`, which trusts its
arguments: the distances come from validated coordinates.
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
    """The pairs ``i < j`` of sites (``scipy.spatial.distance.pdist`` order) as a kernel reads
    them: their distances, or for a kernel of coordinate differences one array of
    differences ``points[i] - points[j]`` per embedded axis.

    Parameters
    ----------
    coords : ndarray of shape (n, d)
    distance : geostat.distance.Distance
    kernel : geostat.kernels.Kernel

    Returns
    -------
    ndarray of shape (n (n - 1) / 2,) or list of such arrays
    """
    if not kernel.structured:
        return distance.pairwise(coords)
    points = distance.embed(coords)
    i, j = np.triu_indices(points.shape[0], 1)
    return [points[i, k] - points[j, k] for k in range(points.shape[1])]


class PairCorrelation:
    """The correlation at fixed pairs of sites: their distances, through a
    :class:`~geostat.kernels.tabulation.LogDistanceTable` (made at the first use) for a
    costly kernel between :data:`TABULATE_PAIRS` pairs; or their coordinate differences
    for a kernel of them.

    Parameters
    ----------
    distances : 1-D array of the back end, or list of them
        The pair distances, or the differences along each embedded axis
        (:func:`condensed_pairs`).
    """

    def __init__(self, distances):
        self.distances = distances
        self._table = None

    @property
    def size(self):
        """int: The number of pairs."""
        return (self.distances[0] if isinstance(self.distances, list) else self.distances).size

    def evaluate(self, kernel, theta, gradient=False):
        """Correlation values and, with `gradient`, their derivatives.

        Parameters
        ----------
        kernel : geostat.kernels.Kernel
        theta : dict
            ``range`` and the kernel's shape parameters.
        gradient : bool

        Returns
        -------
        values : array like `distances`
        grads : dict of str to arrays like `distances`
            ``"range"`` and each free shape parameter (empty unless `gradient`).
        """
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
    """The correlation between two sets of sites, on the host.

    Parameters
    ----------
    kernel : geostat.kernels.Kernel
    distance : geostat.distance.Distance
    theta : dict
        ``range`` and the kernel's shape parameters.
    a : ndarray of shape (m, d)
    b : ndarray of shape (n, d)

    Returns
    -------
    ndarray of shape (m, n)
    """
    shape = kernel.resolve_shape({k: v for k, v in theta.items() if k != "range"})
    if kernel.structured:
        return lag_rows(kernel, distance.embed(a), distance.embed(b), theta["range"], shape)[0]
    return kernel.correlation(distance.cross(a, b), theta["range"], **shape)


def lag_rows(kernel, a, b, range_, shape, gradient=False):
    """A kernel of coordinate differences between the points `a` and `b`, by blocks of rows
    of about :data:`LAG_BLOCK` entries (whose differences and temporaries stay in the
    cache, instead of fresh arrays of the whole block's size, which the system zeroes at
    their first touch) written into the whole matrices.

    Parameters
    ----------
    kernel : geostat.kernels.lags.LagKernel
    a : array of shape (m, k) of the back end
    b : array of shape (n, k) of the back end
    range_ : float
    shape : dict
        Every shape parameter's value.
    gradient : bool or tuple of str
        As :meth:`~geostat.kernels.lags.LagKernel.lag_evaluate`.

    Returns
    -------
    R : array of shape (m, n)
    dR : dict of str to arrays of shape (m, n)
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
    coords : ndarray of shape (n, d)
    distance, backend
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
        """Pickle the host coordinates, the distance and the back end only: the points are
        recomputed from them (the same function of the same coordinates, so bit for bit)
        and the caches (pair distances, tables) are not sent. A block generator shipped to
        the workers of a Dask cluster (:mod:`geostat.solvers`) thus carries ``n x d``
        numbers, the kernel and its parameters."""
        return Sites, (self.coords, self.distance, self.backend)

    # ------------------------------------------------------------------ whole matrices
    def pair_distances(self):
        """Condensed distances of all pairs ``i < j`` on the back end (computed once)."""
        if self._pairs is None:
            self._pairs = self.backend.asarray(self.distance.pairwise(self.coords))
        return self._pairs

    def correlation(self, kernel, theta, gradient=False):
        """Correlation matrix ``R`` and, optionally, ``dR`` for each correlation parameter.

        Parameters
        ----------
        kernel, theta, gradient
            As :meth:`PairCorrelation.evaluate`, which evaluates the pairs.

        Returns
        -------
        R : array of shape (n, n) on the back end
        dR : dict of str to arrays of shape (n, n)
        """
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
        """Coordinate differences of the sites `i` and `j`, elementwise (integer arrays
        that broadcast together), one array per axis."""
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
    def distances(self, rows=None, cols=None):
        """Distances between the sites `rows` and the sites `cols`, on the back end.

        Parameters
        ----------
        rows, cols : 1-D integer arrays (host or back end), optional
            Site indices; None means all sites.

        Returns
        -------
        array of shape (len(rows), len(cols))
        """
        a = self.points if rows is None else self.points[rows]
        b = self.points if cols is None else self.points[cols]
        if self._spherical:
            xp = self.backend.xp
            return (
                central_angle(a[:, 0, None], a[:, 1, None], b[None, :, 0], b[None, :, 1], xp=xp)
                * self.distance.radius
            )
        return self.backend.cdist(a, b)

    def between(self, i, j):
        """Distances between the sites `i` and `j`, elementwise, on the back end.

        The same sums, coordinate by coordinate, as :meth:`distances` (whose blocks
        ``scipy.spatial.distance.cdist`` forms the same way on the host), for index pairs
        that need not form a block.

        Parameters
        ----------
        i, j : integer arrays that broadcast together (host or back end)

        Returns
        -------
        array of the broadcast shape
        """
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

        Parameters
        ----------
        kernel : geostat.kernels.Kernel
        params : dict
            ``variance``, ``range``, ``nugget`` (default 0) and the kernel's shape
            parameters.
        diagonal : array of shape (n,), optional
            A variance of each site added on the diagonal besides the nugget (known
            measurement-error variances), on the back end or the host (copied to the back
            end once).

        Returns
        -------
        callable
            ``block(rows, cols)`` -> ``variance * M(d / range) + (nugget + diagonal[rows])
            * [rows == cols]``, an array of the back end, for 1-D integer index arrays;
            ``block.entries(i, j)`` gives the same covariance between the sites ``i[k]``
            and ``j[k]``, elementwise for index arrays that broadcast together (the tile
            generators read scattered entries with it).
        """
        return (_LagCovarianceBlock if kernel.structured else _CovarianceBlock)(
            self, kernel, params, diagonal
        )

    def gradient_block(self, kernel, theta, name):
        """Block generator of ``dR / d name``, the derivative of the correlation matrix
        (entries below :data:`NEGLIGIBLE_DERIVATIVE` in magnitude set to zero).

        Parameters
        ----------
        kernel : geostat.kernels.Kernel
        theta : dict
            ``range`` and the kernel's shape parameters.
        name : str
            ``"range"`` or a free shape parameter of `kernel`.

        Returns
        -------
        callable
            ``block(rows, cols)`` -> derivative block (zero on coinciding sites), an
            array of the back end; ``block.entries(i, j)`` gives the same derivative
            elementwise, as for :meth:`covariance_block`.
        """
        return (_LagGradientBlock if kernel.structured else _GradientBlock)(
            self, kernel, theta, name
        )


class _CovarianceBlock:
    """``variance * M(d / range) + (nugget + diagonal_i) * [same site]`` of the sites, by
    blocks (``block(rows, cols)``) or elementwise (``block.entries(i, j)``); the parameters
    are validated once, when it is made (:meth:`Sites.covariance_block`)."""

    #: A function of the distances, which are symmetric (coordinate differences squared,
    #: or the haversine's even terms): tlrcore need not scan the diagonal tiles for
    #: asymmetry (:meth:`tlrcore.TLRMatrix.from_generator`).
    symmetric_blocks = True

    def __init__(self, sites, kernel, params, diagonal=None):
        self._sites = sites
        shape = kernel.resolve_shape({k: params[k] for k in kernel.shape_names if k in params})
        self._correlation = _radial(kernel, params["range"], shape)
        self._set_diagonal(params, diagonal)

    def _set_diagonal(self, params, diagonal):
        """The variance, the nugget and the per-site `diagonal` (None: none) on the back end."""
        self._variance = float(params["variance"])
        self._nugget = float(params.get("nugget", 0.0))
        self._diagonal = None if diagonal is None else self._sites.backend.asarray(diagonal)

    def _covariance(self, d):
        """The covariance at the distances `d`, a new array that it overwrites (in chunks:
        :func:`~geostat.kernels._base.map_chunks`)."""
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
        """What the diagonal adds at the (coinciding) `sites`: the nugget, plus the per-site
        diagonal there."""
        return self._nugget if self._diagonal is None else self._nugget + self._diagonal[sites]

    def __call__(self, rows, cols):
        C = self._block(rows, cols)
        if (self._nugget or self._diagonal is not None) and _overlap(rows, cols):
            xp = self._sites.backend.xp
            rows, cols = xp.asarray(rows), xp.asarray(cols)
            if (
                rows.shape == cols.shape
                and bool(xp.all(rows == cols))
                and bool(xp.all(rows[1:] > rows[:-1]))
            ):
                # the same increasing (so distinct) sites: the diagonal, without an m x m mask
                diagonal = xp.arange(rows.size)
                C[diagonal, diagonal] += self._on_diagonal(rows)
            else:
                i, j = xp.nonzero(rows[:, None] == cols[None, :])
                C[i, j] += self._on_diagonal(rows[i])
        return C

    def entries(self, i, j):
        """The covariance between the sites `i` and `j`, elementwise (integer arrays that
        broadcast together; the result has their broadcast shape)."""
        C = self._pairs(i, j)
        if (self._nugget or self._diagonal is not None) and _overlap(i, j):
            xp = self._sites.backend.xp
            i, j = xp.broadcast_arrays(xp.asarray(i), xp.asarray(j))
            same = i == j
            C[same] += self._on_diagonal(i[same])
        return C


def _in_place(func, d):
    """The elementwise `func` of the new array `d`, written over it (over a C-ordered copy
    if it is not C-ordered) chunk by chunk."""
    d = array_namespace(d).ascontiguousarray(d)
    flat = d.reshape(-1)
    map_chunks(func, flat, flat)
    return d


def _radial(kernel, range_, shape, name=None):
    """The correlation of `kernel` (or its derivative `name`) as a function of distance:
    a :class:`~geostat.kernels.tabulation.RadialTable` for a costly kernel, whose blocks'
    entries it interpolates 5-8 times faster than the formula, else the formula."""
    function = RadialTable if getattr(kernel, "costly", False) else RadialFunction
    return function(kernel, range_, shape, name)


def _overlap(i, j):
    """Whether the site indices `i` and `j` have overlapping ranges (else no pair of them
    is one site, and the nugget adds nothing)."""
    return bool(i.min() <= j.max()) and bool(j.min() <= i.max())


class _GradientBlock:
    """``dR / d name`` of the sites, by blocks (``block(rows, cols)``) or elementwise
    (``block.entries(i, j)``), entries below :data:`NEGLIGIBLE_DERIVATIVE` in magnitude
    set to zero (:meth:`Sites.gradient_block`)."""

    #: As :attr:`_CovarianceBlock.symmetric_blocks`.
    symmetric_blocks = True

    def __init__(self, sites, kernel, theta, name):
        self._sites = sites
        shape = kernel.resolve_shape({k: v for k, v in theta.items() if k != "range"})
        self._derivative_of = _radial(kernel, theta["range"], shape, name)

    def _derivative(self, d):
        """The derivative at the distances `d`, a new array that it overwrites (in chunks,
        as :meth:`_CovarianceBlock._covariance`)."""
        return _in_place(self._significant_derivative, d)

    def _significant_derivative(self, d):
        D = self._derivative_of(d)
        D[abs(D) < NEGLIGIBLE_DERIVATIVE] = 0.0
        return D

    def __call__(self, rows, cols):
        return self._derivative(self._sites.distances(rows, cols))

    def entries(self, i, j):
        """The derivative between the sites `i` and `j`, elementwise (as
        :meth:`_CovarianceBlock.entries`)."""
        return self._derivative(self._sites.between(i, j))


class _LagCovarianceBlock(_CovarianceBlock):
    """:class:`_CovarianceBlock` of a kernel of coordinate differences
    (:class:`~geostat.kernels.lags.LagKernel`): symmetric too, its differences entering
    through even functions.

    Its tiles are compressed from whole tiles (``cross_approximation = False``, see
    :meth:`tlrcore.TLRMatrix.from_generator`): an off-diagonal tile of space-time points
    can hold one site's values at the times on either side of the tile boundary, a
    block of a few rows and columns (rank one for a Markov temporal correlation such as
    the exponential) whose entries are near the variance while the rest decays; ACA's
    pivots and spot checks missed it on a separable exponential model (relative error
    2e-3 at accuracy 1e-8, against 6e-9 by ARA or SVD of the same tiles).
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
        points = self._sites.points
        C = lag_rows(self._kernel, points[rows], points[cols], self._range, self._shape)[0]
        C *= self._variance
        return C

    def _pairs(self, i, j):
        C = self._kernel.lag_evaluate(self._sites.lags_between(i, j), self._range, self._shape)[0]
        C *= self._variance
        return C


class _LagGradientBlock:
    """``dR / d name`` of a kernel of coordinate differences, by blocks or elementwise, as
    :class:`_GradientBlock`, compressed from whole tiles as :class:`_LagCovarianceBlock`."""

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
        points = self._sites.points
        return self._significant(
            lag_rows(
                self._kernel, points[rows], points[cols], self._range, self._shape, (self._name,)
            )[1][self._name]
        )

    def entries(self, i, j):
        """The derivative between the sites `i` and `j`, elementwise."""
        deltas = self._sites.lags_between(i, j)
        return self._significant(
            self._kernel.lag_evaluate(deltas, self._range, self._shape, (self._name,))[1][
                self._name
            ]
        )
