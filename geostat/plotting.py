r"""Plots: semivariograms, kriging maps, profile likelihoods and TLR rank heatmaps.

matplotlib (and cartopy, for coastlines) is imported only when a plotting function is
called. Every plotting function draws on the Axes it is given (or on new ones) and
returns them. The fitted semivariogram is
:math:`\gamma(h) = \tau^2 + \sigma^2 (1 - M(h / \rho))`, the empirical one Matheron's
estimator (:func:`empirical_variogram`) [1]_.

References
----------
.. [1] Cressie, N. (1993). Statistics for Spatial Data, revised ed. Wiley.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import stats
from scipy.spatial.distance import pdist
from sklearn.utils.validation import check_is_fitted

from geostat.checks import check_positive_int, check_random_state
from geostat.data import XARRAY_POSITIONS, Trend, prepare_coords, prepare_y
from geostat.distance import get_distance
from geostat.errors import GeostatWarning
from geostat.optimize.intervals import ProfileLikelihood, check_level, one_sided_critical, wald

if TYPE_CHECKING:  # matplotlib is imported only when a plot is drawn
    from typing import Protocol

    from matplotlib.axes import Axes

    from geostat.data.types import (
        Observations,
        Seed,
        SitesLike,
        XarrayDataArray,
        XarrayDataset,
        XarrayObject,
    )
    from geostat.distance import Distance
    from geostat.estimator import SpatialGP

    class _TileRanks(Protocol):
        """What :func:`plot_ranks` reads of a ``tlrcore.TLRMatrix``."""

        n: int
        n_tiles: int
        tile_size: int
        accuracy: float

        @property
        def ranks(self) -> NDArray[np.int64]: ...
        @property
        def mean_rank(self) -> float: ...
        @property
        def nbytes(self) -> int: ...


__all__ = [
    "MAX_VARIOGRAM_SITES",
    "empirical_variogram",
    "plot_field",
    "plot_kriging",
    "plot_profile",
    "plot_ranks",
    "plot_standardized_residuals",
    "plot_variogram",
]

#: The empirical semivariogram uses a random subsample of at most this many sites
#: (4.5 million pairs).
MAX_VARIOGRAM_SITES = 3000
#: Parameters whose profile is drawn on a logarithmic axis (when its interval is positive).
LOG_AXIS = ("range", "nugget", "variance")
_KERNEL_TITLES = {
    "matern": "Matérn",
    "exponential": "exponential",
    "gaussian": "Gaussian",
    "powered_exponential": "powered exponential",
}


# ---------------------------------------------------------------------- variogram
def empirical_variogram(
    X: SitesLike,
    y: Observations,
    *,
    n_bins: int = 15,
    max_distance: float | None = None,
    distance: str | Distance = "auto",
    random_state: Seed = 0,
) -> pd.DataFrame:
    r"""Empirical semivariogram (Matheron's estimator) in equal-width distance bins.

    .. math::

        \hat\gamma(h_k) = \frac{1}{2 |N_k|} \sum_{(i, j) \in N_k} (y_i - y_j)^2,

    where :math:`N_k` holds the pairs of sites ``i < j`` whose separation falls in bin
    ``k`` of ``[0, max_distance]``; with replicates (columns of `y`), the pairs of every
    replicate with both values observed are pooled.

    Parameters
    ----------
    X : array-like of shape (n, d) or DataFrame
        Site coordinates; `distance` as for :class:`geostat.SpatialGP`.
    y : array-like of shape (n,) or (n, r)
        Observations; NaN marks a site missing on a replicate.
    n_bins : int, default 15
    max_distance : float, optional
        Largest separation binned; default half the largest separation of the sites used.
    distance : {"auto", "euclidean", "chordal", "great_circle"}, default "auto"
    random_state : int or numpy Generator, default 0
        Seeds the subsample of :data:`MAX_VARIOGRAM_SITES` sites drawn when there are more.

    Returns
    -------
    pandas.DataFrame
        One row per non-empty bin: ``distance`` (mean separation of its pairs),
        ``semivariance`` and ``pairs`` (their number).

    Raises
    ------
    ValueError, TypeError
        For bad coordinates or observations, a non-positive `n_bins` or `max_distance`.
    """
    data, distance_name = prepare_coords(X, Trend.parse(None), distance)
    values, _, _ = prepare_y(y, data.n)
    return _variogram(data.coords, values, distance_name, n_bins, max_distance, random_state)


def _variogram(coords, values, distance_name, n_bins, max_distance, random_state):
    """:func:`empirical_variogram` on checked arrays (``values`` of shape (n, r))."""
    n_bins = check_positive_int(n_bins, "n_bins")
    rng = check_random_state(random_state)
    if coords.shape[0] > MAX_VARIOGRAM_SITES:
        keep = np.sort(rng.choice(coords.shape[0], size=MAX_VARIOGRAM_SITES, replace=False))
        coords, values = coords[keep], values[keep]
    h = get_distance(distance_name).pairwise(coords)
    if max_distance is None:
        max_distance = 0.5 * float(h.max()) if h.size else 0.0
    elif isinstance(max_distance, (bool, np.bool_)) or not isinstance(
        max_distance, (int, float, np.number)
    ):
        raise TypeError(f"max_distance must be a positive number or None; got {max_distance!r}.")
    if not (np.isfinite(max_distance) and max_distance > 0):
        raise ValueError(
            f"max_distance must be positive and finite (the largest separation binned); got "
            f"{max_distance!r}. X needs at least two distinct sites."
        )
    inside = h <= max_distance
    h = h[inside]
    index = np.minimum((h / max_distance * n_bins).astype(int), n_bins - 1)
    pairs = np.zeros(n_bins)
    total_h = np.zeros(n_bins)
    total_sq = np.zeros(n_bins)
    for column in values.T:
        squared = pdist(column[:, None], "sqeuclidean")[inside]
        seen = ~np.isnan(squared)
        pairs += np.bincount(index[seen], minlength=n_bins)
        total_h += np.bincount(index[seen], weights=h[seen], minlength=n_bins)
        total_sq += np.bincount(index[seen], weights=squared[seen], minlength=n_bins)
    full = pairs > 0
    return pd.DataFrame(
        {
            "distance": total_h[full] / pairs[full],
            "semivariance": 0.5 * total_sq[full] / pairs[full],
            "pairs": pairs[full].astype(np.int64),
        }
    )


def model_semivariogram(
    estimator: SpatialGP, h: ArrayLike, angle: float | None = None
) -> NDArray[np.float64]:
    r"""The fitted semivariogram :math:`\gamma(h) = \tau^2 + \sigma^2 (1 - M(h / \rho))` for
    ``h > 0`` (0 at ``h = 0``); for an anisotropic model along `angle` (default: the major
    axis), for a space-time model at time lag 0.

    Parameters
    ----------
    estimator : geostat.SpatialGP
        Fitted.
    h : array-like of float
        Non-negative distances in the fit's units.
    angle : float, optional
        Direction (radians counterclockwise from x / east) of an anisotropic model's
        separations; ignored by isotropic ones.

    Returns
    -------
    ndarray like `h`
    """
    params = estimator.params_
    kernel = estimator.kernel_
    h = np.asarray(h, dtype=float)
    shape = {name: params[name] for name in kernel.free_shape}
    if kernel.structured:
        correlation = _lag_correlation_along(
            estimator, h, params.get("anisotropy_angle", 0.0) if angle is None else angle
        )
    else:
        correlation = kernel.correlation(h, params["range"], **shape)
    gamma = params["nugget"] + params["variance"] * (1.0 - correlation)
    return np.where(h > 0, gamma, 0.0)


def _lag_correlation_along(estimator, h, angle):
    """The correlation of a lag kernel at separations `h` in the direction `angle` of the
    first two embedded axes, every other coordinate difference zero."""
    kernel, params = estimator.kernel_, estimator.params_
    n_axes = estimator._likelihood.distance.embed(estimator._training.coords[:1]).shape[1]
    flat = h.reshape(-1)
    deltas = [np.zeros_like(flat) for _ in range(n_axes)]
    deltas[0] = flat * math.cos(angle)
    deltas[1] = flat * math.sin(angle)
    shape = kernel.resolve_shape({k: params[k] for k in kernel.shape_names})
    return kernel.lag_evaluate(deltas, params["range"], shape)[0].reshape(h.shape)


def _training_residuals(estimator):
    """Coordinates of the training sites and ``y - F beta_hat`` there, shape (n, r)."""
    likelihood = estimator._likelihood
    observed = likelihood.y * estimator._scale.factor
    return likelihood.coords, observed - likelihood.design @ estimator.result_.coef.T


def _new_residuals(estimator, X, y):
    """Coordinates of new sites and ``y - F(X) beta_hat`` there, shape (m, r)."""
    data = estimator._new_sites(X)
    values, _, _ = prepare_y(y, data.n)
    coef = estimator.result_.coef
    if values.shape[1] != coef.shape[0]:
        raise ValueError(
            f"y has {values.shape[1]} column(s) but the model was fitted with {coef.shape[0]} "
            "replicate(s); pass one column per fitted replicate."
        )
    return data.coords, values - data.design @ coef.T


def _sites_by_times(coords, residuals):
    """Space-time residuals as a table of distinct sites by distinct times (NaN where
    missing), so that the empirical variogram pairs sites at the same time."""
    sites, site = np.unique(coords[:, :-1], axis=0, return_inverse=True)
    times, time = np.unique(coords[:, -1], return_inverse=True)
    table = np.full((sites.shape[0], times.size), np.nan)
    table[site.reshape(-1), time.reshape(-1)] = residuals[:, 0]
    return sites, table


def _distance_label(distance_name):
    return "distance (km)" if distance_name in ("chordal", "great_circle") else "distance"


def _model_title(estimator):
    """``"<kernel> (shape): variance v, range r [km], nugget t"`` of a fitted model."""
    params, kernel = estimator.params_, estimator.kernel_
    # the exponential's smoothness 0.5 is in its name
    names = () if kernel.name == "exponential" else kernel.shape_names
    shape = ", ".join(f"{name} {params[name]:.3g}" for name in names)
    unit = " km" if estimator.distance_ in ("chordal", "great_circle") else ""
    name = _KERNEL_TITLES.get(kernel.name, kernel.name)
    return (
        f"{name}{f' ({shape})' if shape else ''}: variance {params['variance']:.4g}, "
        f"range {params['range']:.4g}{unit}, nugget {params['nugget']:.4g}"
    )


def plot_variogram(
    estimator: SpatialGP,
    X: SitesLike | None = None,
    y: Observations | None = None,
    *,
    n_bins: int = 15,
    max_distance: float | None = None,
    ax: Axes | None = None,
) -> Axes:
    r"""Empirical semivariogram of the GLS residuals with the fitted model's.

    Points: :func:`empirical_variogram` of the residuals ``y - F beta_hat`` of the
    training data (or of `X`, `y`; a space-time model's at equal times), marker area
    proportional to the pair count. Line: :func:`model_semivariogram` (an anisotropic
    model's along the major axis and, dashed, the minor axis).

    Parameters
    ----------
    estimator : geostat.SpatialGP
        Fitted.
    X, y : optional
        Other data (same columns as at fit time); both or neither.
    n_bins : int, default 15
    max_distance : float, optional
        Default: half the largest separation.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt

    check_is_fitted(estimator)
    if (X is None) != (y is None):
        raise ValueError("pass both X and y (other data) or neither (the training data).")
    coords, residuals = (
        _training_residuals(estimator) if X is None else _new_residuals(estimator, X, y)
    )
    if estimator.kernel_.time_axis:
        coords, residuals = _sites_by_times(coords, residuals)
    # the estimator's seed when it has one (a Generator of its own is not drawn from)
    seed = estimator.random_state if isinstance(estimator.random_state, (int, np.integer)) else 0
    table = _variogram(coords, residuals, estimator.distance_, n_bins, max_distance, seed)
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.4))
    sizes = 120.0 * table["pairs"] / table["pairs"].max()
    ax.scatter(
        table["distance"],
        table["semivariance"],
        s=sizes,
        color="C0",
        edgecolor="k",
        linewidth=0.5,
        label="empirical (GLS residuals)",
        zorder=3,
        gid="empirical",
    )
    right = 1.02 * max(table["distance"].max(), max_distance or 0.0)
    h = np.linspace(right / 400, right, 400)
    if estimator.kernel_.anisotropic:
        major = estimator.params_["anisotropy_angle"]
        ax.plot(
            h,
            model_semivariogram(estimator, h),
            color="C1",
            linewidth=2,
            label="fitted model, major axis",
            gid="model",
        )
        ax.plot(
            h,
            model_semivariogram(estimator, h, major + 0.5 * math.pi),
            color="C1",
            linewidth=2,
            linestyle="--",
            label="fitted model, minor axis",
            gid="model-minor",
        )
    else:
        ax.plot(
            h,
            model_semivariogram(estimator, h),
            color="C1",
            linewidth=2,
            label="fitted model",
            gid="model",
        )
    ax.set_xlim(0, right)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(_distance_label(estimator.distance_))
    ax.set_ylabel("semivariance")
    ax.set_title(_model_title(estimator), fontsize=10)
    ax.legend(loc="lower right")
    return ax


# ---------------------------------------------------------------------- maps
def _position(da, argname):
    """The names ``(x, y)`` of a DataArray's horizontal coordinates and whether they are
    longitude/latitude."""
    for position in XARRAY_POSITIONS:
        if set(position) <= set(da.coords):
            return position, position[0] != "x"
    raise ValueError(
        f"{argname} has no horizontal coordinates: give it coordinates named lon/lat (or "
        f"longitude/latitude, or x/y); it has {sorted(map(str, da.coords))}."
    )


def _cartopy_crs(coastlines, lonlat):
    """cartopy's ``crs`` module when coastlines are to be drawn and can be, else None."""
    if coastlines not in ("auto", True, False):
        raise ValueError(f"coastlines must be 'auto', True or False; got {coastlines!r}.")
    if coastlines is False or not lonlat:
        return None
    try:
        import cartopy.crs as ccrs
    except ImportError:
        if coastlines is True:
            warnings.warn(
                "coastlines=True needs cartopy, which is not installed; the map is drawn without "
                "coastlines (pip install cartopy).",
                GeostatWarning,
                stacklevel=3,
            )
        return None
    return ccrs


def _grid_values(da, x_name, y_name):
    """``(x, y, values)`` for pcolormesh: 1-D coordinates of a grid, or 2-D ones."""
    x, y = da.coords[x_name], da.coords[y_name]
    if x.ndim == 1 and y.ndim == 1 and x.dims != y.dims:
        return x.values, y.values, da.transpose(y.dims[0], x.dims[0]).values
    if x.ndim == 2 and y.ndim == 2:
        dims = x.dims
        return x.transpose(*dims).values, y.transpose(*dims).values, da.transpose(*dims).values
    raise ValueError(
        f"da must be on a grid: its coordinates {x_name!r} and {y_name!r} must span its two "
        "dimensions (1-D each along its own, or both 2-D)."
    )


def _colorbar_label(da):
    units = da.attrs.get("units")
    name = "" if da.name is None else str(da.name)
    return f"{name} ({units})" if units and name else (name or units or "")


def _site_columns(sites, position):
    """``(x, y)`` arrays of an ``(n, 2)`` array or a DataFrame (its position columns, or
    its first two)."""
    if isinstance(sites, pd.DataFrame):
        columns = list(position) if set(position) <= set(sites.columns) else list(sites.columns[:2])
        sites = sites[columns]
    array = np.asarray(sites, dtype=float)
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(
            f"sites must be an (n, 2) array or DataFrame of positions; got shape {array.shape}."
        )
    return array[:, 0], array[:, 1]


def plot_field(
    da: XarrayDataArray,
    ax: Axes | None = None,
    *,
    cmap: str = "viridis",
    title: str | None = None,
    sites: SitesLike | None = None,
    coastlines: bool | Literal["auto"] = "auto",
    **kwargs: Any,
) -> Axes:
    """Map of a 2-D ``xarray.DataArray`` on lon/lat (or x/y) coordinates.

    Parameters
    ----------
    da : xarray.DataArray
        Two dimensions, with coordinates lon/lat (longitude/latitude) or x/y: 1-D along
        each dimension (a regular or irregular grid) or both 2-D (curvilinear).
    ax : matplotlib Axes, optional
    cmap : str, default "viridis"
    title : str, optional
    sites : array-like of shape (n, 2) or DataFrame, optional
        Observation sites (x-like first, or columns named like the coordinates), drawn as
        small dots.
    coastlines : {"auto", True, False}, default "auto"
        For lon/lat coordinates with cartopy installed, draw on a PlateCarree map with
        coastlines (on new Axes; `ax`, if given, must then be a cartopy GeoAxes).
        Without cartopy: plain Axes (``True`` then warns).
    **kwargs
        Passed to ``pcolormesh`` (``vmin``, ``vmax``, ``norm``, ...).

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If `da` is not 2-D or lacks position coordinates.
    """
    import matplotlib.pyplot as plt

    if not hasattr(da, "dims") or hasattr(da, "data_vars"):
        raise TypeError(f"da must be an xarray DataArray; got {type(da).__name__}.")
    if da.ndim != 2:
        raise ValueError(
            f"da must be 2-D; it has dimensions {list(da.dims)}: select one field first, "
            "e.g. da.isel(time=0)."
        )
    (x_name, y_name), lonlat = _position(da, "da")
    ccrs = _cartopy_crs(coastlines, lonlat)
    if ax is None:
        fig = plt.figure(figsize=(6.4, 4.4))
        ax = fig.add_subplot(projection=ccrs.PlateCarree()) if ccrs else fig.add_subplot()
    geo = ccrs is not None and hasattr(ax, "coastlines")
    extra = {"transform": ccrs.PlateCarree()} if geo else {}
    x, y, values = _grid_values(da, x_name, y_name)
    mesh = ax.pcolormesh(x, y, values, cmap=cmap, shading="auto", gid="field", **extra, **kwargs)
    # in an inset, the colorbar keeps the height of the map whatever its aspect
    ax.figure.colorbar(mesh, cax=ax.inset_axes((1.03, 0.0, 0.035, 1.0)), label=_colorbar_label(da))
    if sites is not None:
        sx, sy = _site_columns(sites, (x_name, y_name))
        ax.scatter(
            sx, sy, s=3, color="k", marker=".", linewidths=0, label="sites", gid="sites", **extra
        )
    if geo:
        ax.coastlines(linewidth=0.6)  # type: ignore[union-attr]  # a cartopy GeoAxes (hasattr above)
    else:
        _label_axes(ax, x_name, y_name, lonlat, y)
    if title is not None:
        ax.set_title(title)
    return ax


def _label_axes(ax, x_name, y_name, lonlat, y):
    """Axis labels, and an aspect with equal ground distances at the mid-latitude for a
    lon/lat map (equal units for x/y)."""
    if lonlat:
        ax.set_xlabel("longitude")
        ax.set_ylabel("latitude")
        middle = 0.5 * (np.nanmin(y) + np.nanmax(y))
        ax.set_aspect(1.0 / max(math.cos(math.radians(middle)), 0.1))
    else:
        ax.set_xlabel(x_name)
        ax.set_ylabel(y_name)
        ax.set_aspect("equal")


def plot_kriging(
    estimator: SpatialGP,
    template: XarrayObject,
    *,
    axes: Sequence[Axes] | None = None,
    sites: bool | SitesLike = True,
    cmap: str = "viridis",
    replicate: int = -1,
    coastlines: bool | Literal["auto"] = "auto",
) -> NDArray[np.object_]:
    """Kriging mean and standard deviation on an xarray template, side by side.

    Parameters
    ----------
    estimator : geostat.SpatialGP
        Fitted on lon/lat (or x/y) positions.
    template : xarray.DataArray or xarray.Dataset
        A 2-D grid with the fitted position coordinates, read and drawn by the fitted
        names; every cell is predicted.
    axes : sequence of 2 matplotlib Axes, optional
    sites : bool or array-like, default True
        ``True`` overlays the training sites, an ``(n, 2)`` array other sites.
    cmap : str, default "viridis"
    replicate : int, default -1
        With replicates, the one drawn (position, default the last).
    coastlines : {"auto", True, False}, default "auto"
        As for :func:`plot_field`.

    Returns
    -------
    ndarray of 2 matplotlib Axes
        Mean, standard deviation.
    """
    import matplotlib.pyplot as plt

    mean, std = estimator.predict(template, return_std=True)
    spatial = [d for d in mean.dims if d in template.dims]
    extra = [d for d in mean.dims if d not in spatial]
    if extra:
        mean, std = (a.isel({extra[0]: replicate}) for a in (mean, std))
    names = estimator._coordinate_names()
    if any(set(pair) == set(names) for pair in XARRAY_POSITIONS):  # drawn on the fitted coordinates
        others = [
            c for pair in XARRAY_POSITIONS for c in pair if c in mean.coords and c not in names
        ]
        mean, std = (a.drop_vars(others) for a in (mean, std))
    if sites is True:
        sites = pd.DataFrame(estimator._likelihood.coords, columns=list(names))
    elif sites is False:
        sites = None
    if axes is None:
        _, lonlat = _position(mean, "template")
        ccrs = _cartopy_crs(coastlines, lonlat)
        fig = plt.figure(figsize=(12, 4.4))
        axes = [
            fig.add_subplot(1, 2, i + 1, **({"projection": ccrs.PlateCarree()} if ccrs else {}))
            for i in range(2)
        ]
        fig.subplots_adjust(wspace=0.35)  # room for the first map's colorbar
    titles = ("kriging mean", "kriging standard deviation")
    for ax, field, title in zip(axes, (mean, std), titles, strict=False):
        plot_field(
            field.rename(title), ax, cmap=cmap, title=title, sites=sites, coastlines=coastlines
        )
    return np.asarray(axes)


# ---------------------------------------------------------------------- profiles
def plot_profile(
    estimator: SpatialGP,
    parameter: str,
    *,
    level: float = 0.95,
    n_points: int = 15,
    ax: Axes | None = None,
) -> Axes:
    r"""Profile log-likelihood of one covariance parameter with its confidence intervals.

    Draws :math:`\ell_p(\theta)` over the profile interval with a margin, the threshold
    :math:`\hat\ell - \chi^2_1(\text{level}) / 2`, the interval's endpoints, and the Wald
    interval :math:`\hat\theta \pm z\,\mathrm{se}` shaded. The range, nugget and variance
    are drawn on a logarithmic axis (linear when the interval reaches 0).

    Parameters
    ----------
    estimator : geostat.SpatialGP
        Fitted.
    parameter : str
        An estimated parameter (``estimator.result_.estimated``).
    level : float, default 0.95
    n_points : int, default 15
        Evenly spread values of the curve (each a maximization over the other
        parameters; values already profiled are reused).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt

    level = check_level(level)
    n_points = check_positive_int(n_points, "n_points")
    profile = ProfileLikelihood.of(estimator)
    name = profile.check_parameter(parameter)
    lower, upper, _ = profile.interval(name, level)
    estimate = estimator.params_[name]
    logarithmic = name in LOG_AXIS and lower > 0
    grid = _profile_grid(
        lower,
        upper,
        estimate,
        n_points,
        logarithmic,
        profile.bounds(name),
        profile.profiled_values(name),
    )
    values = np.array([profile(name, v) for v in grid])
    one_sided = name in profile.sides
    critical = one_sided_critical(level) ** 2 if one_sided else stats.chi2.ppf(level, 1)
    threshold = estimator.loglik_ - 0.5 * critical
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.4))
    if logarithmic:
        ax.set_xscale("log")
    ax.plot(
        grid, values, "o-", color="C0", markersize=3, label="profile log-likelihood", gid="profile"
    )
    ax.plot([estimate], [estimator.loglik_], "D", color="k", label="estimate", gid="estimate")
    critical_label = rf"\chi^2_1({2 * level - 1:g})" if one_sided else rf"\chi^2_1({level:g})"
    ax.axhline(
        threshold,
        color="C3",
        linestyle=":",
        label=rf"$\hat\ell - {critical_label}/2$",
        gid="threshold",
    )
    ax.axvline(
        lower,
        color="C3",
        linestyle="--",
        label=f"profile {level:.0%} interval",
        gid="profile interval",
    )
    ax.axvline(upper, color="C3", linestyle="--", gid="profile interval")
    z = stats.norm.ppf(0.5 + level / 2)
    w_low, w_high = wald(estimate, estimator.stderr_[name], z)
    left = grid[0]
    ax.axvspan(
        max(w_low, left),
        w_high,
        color="C2",
        alpha=0.15,
        label=f"Wald {level:.0%} interval",
        gid="wald",
    )
    ax.set_xlim(left, grid[-1])
    # the region around the threshold, not the far tails
    drop = estimator.loglik_ - threshold
    ax.set_ylim(estimator.loglik_ - 2.5 * drop, estimator.loglik_ + 0.15 * drop)
    if logarithmic and grid[-1] < 10 * grid[0]:
        _plain_log_ticks(ax.xaxis)
    unit = " (km)" if name == "range" and estimator.distance_ in ("chordal", "great_circle") else ""
    ax.set_xlabel(f"{name}{unit}")
    ax.set_ylabel("profile log-likelihood")
    ax.set_title(f"{name}: {level:.0%} profile interval [{lower:.4g}, {upper:.4g}]", fontsize=10)
    ax.legend(fontsize=8, loc="lower center")
    return ax


def _plain_log_ticks(axis):
    """Label the ticks of a logarithmic axis spanning less than a decade as plain numbers."""
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda value, _: f"{value:.3g}")
    axis.set_major_formatter(plain)
    axis.set_minor_formatter(plain)


def _profile_grid(lower, upper, estimate, n_points, logarithmic, bounds, known):
    """`n_points` values, evenly in log or linear scale, from a margin below `lower` to a
    margin above `upper` (within `bounds`), with the endpoints, the estimate and the
    `known` values in the span (even values within half a spacing of those dropped)."""
    if logarithmic:
        span = math.log(upper / lower)
        ends = math.log(lower) - 0.25 * span, math.log(upper) + 0.25 * span
        even = np.exp(np.linspace(*ends, n_points))
    else:
        span = upper - lower
        even = np.linspace(lower - 0.25 * span, upper + 0.25 * span, n_points)
    even = np.clip(even, *bounds)
    known = np.asarray(known, dtype=float)
    known = known[(known >= even.min()) & (known <= even.max())]
    scale = (
        (lambda v: np.log(np.maximum(v, np.finfo(float).tiny))) if logarithmic else (lambda v: v)
    )
    if known.size and n_points > 1:
        spacing = (scale(even.max()) - scale(even.min())) / (n_points - 1)
        near = np.abs(scale(even)[:, None] - scale(known)[None, :]).min(axis=1) <= 0.5 * spacing
        even = even[~near]
    return np.unique(np.concatenate([even, known, [lower, estimate, upper]]))


# ---------------------------------------------------------------------- ranks
def plot_ranks(
    matrix: _TileRanks, ax: Axes | None = None, cmap: str = "viridis", annotate: bool | None = None
) -> Axes:
    """Heatmap of the tile ranks of a TLR matrix.

    Parameters
    ----------
    matrix : tlrcore.TLRMatrix
    ax : matplotlib Axes, optional
    cmap : str, default "viridis"
    annotate : bool, optional
        Write each rank in its cell; default when there are at most 16 tiles per side.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt

    ranks = matrix.ranks.astype(float)
    np.fill_diagonal(ranks, np.nan)  # dense diagonal tiles: not a rank
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4.2))
    image = ax.imshow(ranks, cmap=cmap, interpolation="nearest")
    ax.figure.colorbar(image, ax=ax, label="rank")
    ax.set_title(
        f"TLR ranks: n = {matrix.n}, tile {matrix.tile_size}, accuracy {matrix.accuracy:.0e}\n"
        f"mean rank {matrix.mean_rank:.1f}, memory {matrix.nbytes / 2**20:.1f} MiB"
    )
    ax.set_xlabel("tile column")
    ax.set_ylabel("tile row")
    if annotate if annotate is not None else matrix.n_tiles <= 16:
        for (i, j), value in np.ndenumerate(matrix.ranks):
            if i != j:
                ax.text(j, i, str(value), ha="center", va="center", fontsize=7, color="w")
    return ax


# ---------------------------------------------------------------------- cross-validation
def plot_standardized_residuals(
    cv_result: pd.DataFrame | XarrayDataset,
    *,
    axes: Sequence[Axes] | None = None,
    bins: int | str = "auto",
) -> NDArray[np.object_]:
    r"""Histogram and normal Q-Q plot of the standardized cross-validation residuals.

    Under the model :math:`z_i = (y_i - \hat y_{-i}) / \sigma_{-i}` is standard normal
    [1]_: the histogram is drawn with the :math:`N(0, 1)` density, the Q-Q panel the
    sorted :math:`z_i` against :math:`\Phi^{-1}((i - 1/2) / m)` with the identity line.

    Parameters
    ----------
    cv_result : pandas.DataFrame or xarray.Dataset
        The result of :func:`geostat.validation.cross_validate`: its table, or its Dataset
        for a model fitted on a field (the finite ``standardized`` cells are plotted).
    axes : sequence of 2 matplotlib Axes, optional
        Histogram, Q-Q plot; new ones side by side by default.
    bins : int or str, default "auto"
        Histogram bins, as :func:`numpy.histogram_bin_edges` takes them.

    Returns
    -------
    ndarray of 2 matplotlib Axes
        Histogram, Q-Q plot.

    Raises
    ------
    ValueError
        If `cv_result` has no ``standardized`` column (variable) or no finite value in it.

    References
    ----------
    .. [1] Dubrule, O. (1983). Cross validation of kriging in a unique neighborhood.
       Mathematical Geology, 15(6), 687-699.
    """
    import matplotlib.pyplot as plt

    z, scores, level = _standardized_residuals(cv_result)
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    histogram, qq = axes
    histogram.hist(
        z,
        bins=bins,
        density=True,
        color="C0",
        alpha=0.6,
        label="standardized residuals",
        gid="histogram",
    )
    reach = max(4.0, float(np.abs(z).max()))
    grid = np.linspace(-reach, reach, 201)
    histogram.plot(
        grid, stats.norm.pdf(grid), color="k", label="N(0, 1) density", gid="normal density"
    )
    histogram.set_xlabel("standardized residual")
    histogram.set_ylabel("density")
    spread = f", sd {np.std(z, ddof=1):.3g}" if z.size > 1 else ""
    histogram.set_title(
        f"{z.size} held-out observations: mean {np.mean(z):.3g}{spread}", fontsize=10
    )
    histogram.legend(fontsize=8)
    normal = stats.norm.ppf((np.arange(1, z.size + 1) - 0.5) / z.size)
    qq.plot(normal, z, "o", color="C0", markersize=3, gid="quantiles")
    ends = [min(normal[0], z[0]), max(normal[-1], z[-1])]
    qq.plot(ends, ends, color="k", linewidth=1, label="identity", gid="identity")
    qq.set_xlabel("N(0, 1) quantile")
    qq.set_ylabel("standardized residual")
    coverage = scores.get("coverage")
    qq.set_title(
        "normal Q-Q plot"
        + (
            f": {coverage:.1%} inside the central {level:.0%} intervals"
            if coverage is not None and level is not None
            else ""
        ),
        fontsize=10,
    )
    qq.legend(fontsize=8, loc="upper left")
    return np.asarray(axes)


def _standardized_residuals(cv_result):
    """``(sorted finite standardized residuals, scores, level)`` of a cross-validation
    table or Dataset (whose scores are its ``score_<name>`` attributes)."""
    dataset = hasattr(cv_result, "data_vars")
    names = cv_result.data_vars if dataset else getattr(cv_result, "columns", ())
    if not (dataset or isinstance(cv_result, pd.DataFrame)) or "standardized" not in names:
        raise ValueError(
            "cv_result must be the table of geostat.validation.cross_validate (or its Dataset, "
            "for a model fitted on a field), with a 'standardized' column; pass that "
            "function's result."
        )
    z = np.asarray(cv_result["standardized"], dtype=np.float64).ravel()
    z = np.sort(z[np.isfinite(z)])
    if not z.size:
        raise ValueError(
            "cv_result has no finite standardized residual to plot; pass the table (or "
            "Dataset) of geostat.validation.cross_validate."
        )
    attrs = cv_result.attrs
    if dataset:
        scores = {k.removeprefix("score_"): v for k, v in attrs.items() if k.startswith("score_")}
    else:
        scores = attrs.get("scores", {})
    return z, scores, attrs.get("level")
