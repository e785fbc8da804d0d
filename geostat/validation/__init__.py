r"""Cross-validation of a fitted :class:`geostat.SpatialGP` at its estimated parameters.

Each observation (or fold of sites) is held out and predicted from the others by
universal kriging, the GLS trend re-estimated without it; the predictive variance
includes the nugget. With :math:`C` the covariance of the observations and :math:`F`
the trend design, let :math:`P = C^{-1} - C^{-1} F (F^T C^{-1} F)^{-1} F^T C^{-1}`.
The held-out residuals and their covariance are [1]_

.. math::

    e_i = \frac{(P y)_i}{P_{ii}}, \quad \operatorname{Var}(e_i) = \frac{1}{P_{ii}};
    \qquad e_V = P_{VV}^{-1} (P y)_V, \quad \operatorname{Cov}(e_V) = P_{VV}^{-1}

for one observation :math:`i` or a set :math:`V` of sites, all from one factorization
of :math:`C` (:mod:`geostat.validation.closed_form`). The scores
(:mod:`geostat.validation.scores`) include the CRPS and the log score [2]_.

References
----------
.. [1] Dubrule, O. (1983). Cross validation of kriging in a unique neighborhood.
   Mathematical Geology, 15(6), 687-699.
.. [2] Gneiting, T., Raftery, A. E. (2007). Strictly proper scoring rules, prediction,
   and estimation. Journal of the American Statistical Association, 102(477), 359-378.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from sklearn.utils.validation import check_is_fitted

from geostat.checks import check_bool, check_random_state
from geostat.data.fields import prediction_attrs, results_on_grid
from geostat.data.types import Seed, XarrayDataset
from geostat.optimize.intervals import check_level
from geostat.validation.closed_form import closed_form_residuals
from geostat.validation.refit import refit_predictions
from geostat.validation.scores import (
    SCORES,
    check_scoring,
    gaussian_crps,
    gaussian_log_score,
    score_predictions,
)

__all__ = [
    "FIELD_LABELS",
    "NO_FOLD",
    "RESULT_COLUMNS",
    "SCORES",
    "cross_validate",
    "gaussian_crps",
    "gaussian_log_score",
]

logger = logging.getLogger(__name__)

#: Columns of :func:`cross_validate`'s table besides the site coordinates.
RESULT_COLUMNS = ("site", "replicate", "fold", "observed", "mean", "std", "standardized")
#: The ``long_name`` of each variable of :func:`cross_validate`'s Dataset (for a model
#: fitted on a field), followed by " of <the field's long_name or name>" but for ``fold``.
FIELD_LABELS = {
    "observed": "observation",
    "mean": "cross-validation predictive mean",
    "std": "cross-validation predictive standard deviation",
    "standardized": "standardized cross-validation residual",
    "fold": "cross-validation fold",
}
#: The ``fold`` of the cells of a field without an observation (a label that `folds` may
#: also use: the cells with an observation are those where ``observed`` is not NaN).
NO_FOLD = -1


def cross_validate(
    model: Any,
    cv: Literal["loo"] | int = "loo",
    scoring: str | Iterable[str] | None = None,
    level: float = 0.9,
    refit: bool = False,
    random_state: Seed = 0,
    folds: ArrayLike | None = None,
    as_table: bool = False,
) -> pd.DataFrame | XarrayDataset:
    r"""Leave-one-out or K-fold cross-validation of a fitted model.

    Leave-one-out holds out one observation at a time; K-fold the sites of a fold
    together (at all their replicates). The prediction is universal kriging of the
    observation (trend re-estimated, nugget in the variance). Without `refit` the
    results come in closed form from the fitted factorization [1]_ (module docstring).

    Cost: an exact model computes the inverse of its covariance once per group of
    replicates sharing sites (about the cost and memory of its factorization). A TLR
    model computes the TLR inverse of its factor (about one likelihood evaluation, twice
    the factor's memory) and reads the diagonal and the folds' blocks of the inverse
    covariance from it; a fold of at least
    :data:`geostat.validation.closed_form.TLR_FOLD_SITES` sites is factored as a TLR
    matrix. Where the inverse factor would not fit, ``n`` triangular solves with
    columns of the identity, in blocks of
    :data:`geostat.validation.closed_form.SOLVE_BLOCK_BYTES` (leave-one-out) or a fold's
    at once (K-fold).

    Parameters
    ----------
    model : geostat.SpatialGP
        Fitted (on a table or a field; replicates and NaN observations allowed).
    cv : "loo" or int, default "loo"
        Leave-one-out, or the number of folds ``K`` (from 2 to the number of sites with
        an observation): the observed sites are shuffled (`random_state`) and dealt
        into ``K`` folds of sizes differing by at most one.
    scoring : str, sequence of str or None, default None
        Scores from :data:`SCORES` (None: all): ``"rmse"``, ``"mae"``, ``"crps"``,
        ``"log_score"`` (mean negative log predictive density), ``"coverage"`` (of the
        central `level` interval), ``"standardized_mean"``, ``"standardized_std"``
        (ideally 0 and 1). See :mod:`geostat.validation.scores`.
    level : float, default 0.9
        Nominal probability of the central predictive interval of ``"coverage"``, in (0, 1).
    refit : bool, default False
        K-fold only: refit a clone of `model` on the other folds for each fold (``K``
        fits) and predict the fold with it.
    random_state : int, numpy Generator or None, default 0
        Seeds the assignment of sites to folds (K-fold without `folds`).
    folds : array-like of int of shape (n,), optional
        A fold label for each training site (in the order of the fitted data; for a
        field, its cells observed at least once, in C order over its spatial dimensions),
        e.g. spatial blocks; replaces `cv` (an integer `cv` must equal the number of labels).
    as_table : bool, default False
        Give a model fitted on a field the table too (as for one fitted on a table).

    Returns
    -------
    pandas.DataFrame or xarray.Dataset
        For a model fitted on a table: one row per held-out observation, by site then
        replicate: ``site`` (index among the training sites), the site coordinates as
        fitted, ``replicate`` (with replicates), ``fold`` (K-fold), ``observed``,
        ``mean``, ``std`` (units of ``y``) and ``standardized = (observed - mean) / std``.
        ``.attrs`` holds ``"scores"`` (a dict), ``"cv"`` (``"loo"`` or the number of
        folds), ``"level"`` and ``"refit"``.

        For a model fitted on an xarray field (also one read back by :func:`geostat.load`,
        whose file keeps the grid where its coordinates are numbers, dates or strings): a
        ``Dataset`` on the field's
        dimensions, in its order, with its coordinates (dimensions of length 1 dropped by
        the fit are not among them). ``observed``, ``mean``, ``std`` and
        ``standardized`` are NaN at the cells without an observation; ``fold`` (K-fold,
        int64 on the spatial dimensions, every dimension of a space-time field) is each
        site's fold, :data:`NO_FOLD` (-1) where no replicate is observed. Variables have
        the field's ``units`` (``"1"`` for ``standardized``), ``standard_name`` and
        ``grid_mapping`` and a ``long_name`` (:data:`FIELD_LABELS`). ``.attrs`` holds
        ``"cv"``, ``"level"``, ``"refit"`` (0 or 1) and each score as ``"score_<name>"``,
        so that ``to_netcdf`` writes it.

        With a target transform ``g`` the mean and std are back-transformed;
        ``standardized``, ``coverage`` and ``crps`` are those of ``g(y)``, the log score
        that of the density of ``y``.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If `model` is not fitted.
    ValueError
        For a `cv` that is neither ``"loo"`` nor a number of folds in range, a `level`
        outside (0, 1), unknown `scoring` names, `refit` with leave-one-out, `folds` of
        the wrong length or with fewer than two labels, or a fold whose removal leaves
        the trend unidentifiable.
    TypeError
        For `folds` that are not integers, or a `refit` that is not a bool.
    MemoryError
        If the dense inverse (exact model) or a fold's block would not fit in memory.

    References
    ----------
    .. [1] Dubrule, O. (1983). Cross validation of kriging in a unique neighborhood.
       Mathematical Geology, 15(6), 687-699.

    Examples
    --------
    >>> result = cross_validate(est, cv=5)                        # doctest: +SKIP
    >>> result.attrs["scores"]["crps"], result.attrs["scores"]["coverage"]  # doctest: +SKIP
    >>> on_grid = cross_validate(est.fit(da), cv=5)  # a field: a Dataset  # doctest: +SKIP
    >>> on_grid["standardized"].isel(time=0).plot()               # doctest: +SKIP
    >>> on_grid.attrs["score_crps"]                               # doctest: +SKIP
    """
    check_is_fitted(model)
    names = check_scoring(scoring)
    level = check_level(level)
    refit = check_bool(refit, "refit")
    rng = check_random_state(random_state)
    training = model._training
    seen = ~np.isnan(training.y)
    observed_sites = np.flatnonzero(seen.any(axis=1))
    labels = _fold_labels(cv, folds, rng, training.coords.shape[0], observed_sites, refit)
    factor = model._scale.factor
    if refit:
        site, replicate, mean, std = refit_predictions(model, labels)
        observed = training.y[site, replicate] * factor
    else:
        site, replicate, observed_unit, residual, variance = _closed_form_rows(model, labels)
        observed, mean, std = (
            factor * observed_unit,
            factor * (observed_unit - residual),
            factor * np.sqrt(variance),
        )
    order = np.lexsort((replicate, site))
    site, replicate, observed, mean, std = (
        a[order] for a in (site, replicate, observed, mean, std)
    )
    standardized = (observed - mean) / std
    scores = score_predictions(observed, mean, std, names, level)
    transform = model._transform()
    if transform.name != "identity":
        observed, mean, std, scores = _in_units_of_y(transform, observed, mean, std, scores)
    attrs = {
        "scores": scores,
        "cv": "loo" if labels is None else int(np.unique(labels[observed_sites]).size),
        "level": level,
        "refit": refit,
    }
    logger.info(
        "cross-validation (%s) of %d observations at %d sites: %s",
        "leave-one-out"
        if labels is None
        else f"{attrs['cv']} folds" + (", refitted" if refit else ""),
        site.size,
        observed_sites.size,
        ", ".join(f"{name} {value:.4g}" for name, value in scores.items()),
    )
    grid = None if model._field is None or as_table else getattr(model._field, "grid", None)
    if grid is not None:
        columns = {"observed": observed, "mean": mean, "std": std, "standardized": standardized}
        return _result_field(grid, site, replicate, labels, columns, attrs)
    table = _result_table(
        model,
        site,
        replicate,
        None if labels is None else labels[site],
        observed,
        mean,
        std,
        standardized,
    )
    table.attrs.update(attrs)
    return table


def _fold_labels(cv, folds, rng, n, observed_sites, refit):
    """The fold label of each training site (None: leave-one-out), after checking `cv`,
    `folds` and `refit` together; random folds are drawn from the Generator `rng`."""
    m = observed_sites.size
    loo = isinstance(cv, str) and cv == "loo"
    if not loo and (
        isinstance(cv, (bool, np.bool_))
        or not isinstance(cv, (int, np.integer))
        or not 2 <= cv <= m
    ):
        raise ValueError(
            f"cv must be 'loo' (leave-one-out) or a number of folds from 2 to {m} (the sites "
            f"with an observation), such as cv=5; got {cv!r}."
        )
    if folds is not None:
        labels = np.asarray(folds)
        if labels.shape != (n,):
            raise ValueError(
                f"folds must hold one fold label per training site, shape ({n},); got shape "
                f"{labels.shape}."
            )
        if labels.dtype.kind not in "iu":
            raise TypeError(
                "folds must be integer fold labels (e.g. the block number of each site); got "
                f"dtype {labels.dtype}."
            )
        k = np.unique(labels[observed_sites]).size
        if k < 2:
            raise ValueError(
                "folds gives every observed site the same label; give at least 2 distinct "
                "labels (e.g. spatial blocks)."
            )
        if not loo and cv != k:
            raise ValueError(
                f"cv={cv} disagrees with the {k} labels of folds; leave cv at its default (the "
                "folds define the folds) or give folds with as many labels."
            )
        return labels
    if loo:
        if refit:
            raise ValueError(
                "refit=True refits the model for each fold of K-fold cross-validation; give a "
                "number of folds, such as cv=5, or use refit=False for leave-one-out."
            )
        return None
    labels = np.full(n, -1)
    labels[rng.permutation(observed_sites)] = np.arange(m) % cv
    return labels


def _closed_form_rows(model, labels):
    """``(site, replicate, observed, residual, variance)`` of every held-out observation,
    in fitting units, from the fitted factors."""
    y = model._training.y
    parts = []
    for group in closed_form_residuals(model._kriging, labels):
        site = np.broadcast_to(group.sites[:, None], group.residual.shape).ravel()
        replicate = np.broadcast_to(group.columns[None, :], group.residual.shape).ravel()
        variance = np.broadcast_to(group.variance[:, None], group.residual.shape).ravel()
        parts.append((site, replicate, y[site, replicate], group.residual.ravel(), variance))
    return tuple(np.concatenate(a) for a in zip(*parts, strict=True))


def _in_units_of_y(transform, observed, mean, std, scores):
    """Observations and predictions of ``g(y)`` in the units of ``y``, with the scores
    moved there: RMSE and MAE of the back-transformed means, the log score of the density
    of ``y`` (minus ``log g'(y)``); coverage, standardized residuals and CRPS stay those
    of ``g(y)``."""
    observed_y = transform.inverse(observed)
    mean_y, std_y = transform.mean(mean, std), transform.std(mean, std)
    error = observed_y - mean_y
    moved = {
        "rmse": lambda: np.sqrt(np.mean(error**2)),
        "mae": lambda: np.mean(np.abs(error)),
        "log_score": lambda: scores["log_score"] - np.mean(transform.log_derivative(observed_y)),
    }
    return (
        observed_y,
        mean_y,
        std_y,
        {name: float(moved[name]()) if name in moved else value for name, value in scores.items()},
    )


def _result_table(model, site, replicate, fold, observed, mean, std, standardized):
    """The table of :func:`cross_validate` (without its attrs)."""
    coords = model._training.coords[site]
    names = _coordinate_names(model, coords.shape[1])
    clashes = [name for name in names if name in RESULT_COLUMNS]
    if clashes:
        raise ValueError(
            f"the model's coordinate(s) {clashes} have the names of result columns "
            f"{RESULT_COLUMNS}; refit the model with those coordinate columns renamed."
        )
    columns = {"site": site, **{name: coords[:, j] for j, name in enumerate(names)}}
    if not model._y_one_d:
        labels = (
            np.asarray(model._y_names) if model._y_names else np.arange(model._training.y.shape[1])
        )
        columns["replicate"] = labels[replicate]
    if fold is not None:
        columns["fold"] = fold
    columns |= {"observed": observed, "mean": mean, "std": std, "standardized": standardized}
    return pd.DataFrame(columns)


def _result_field(grid, site, replicate, labels, columns, attrs):
    """The Dataset of :func:`cross_validate` for a model fitted on a field."""
    names = [*columns, *([] if labels is None else ["fold"])]
    clashes = [name for name in names if name in grid.coords.variables or name in grid.sizes]
    if clashes:
        raise ValueError(
            f"the fitted field has coordinate(s) or dimension(s) {clashes}, the names of "
            f"result variables {names}; rename them (da.rename(...)) and refit the model."
        )
    carried = [str(name) for name in grid.coords.variables]
    values = {
        name: (column, _variable_attrs(grid, name, carried)) for name, column in columns.items()
    }
    per_site = {}
    if labels is not None:
        per_site["fold"] = (
            labels.astype(np.int64),
            NO_FOLD,
            _variable_attrs(grid, "fold", carried),
        )
    metadata = {
        "cv": attrs["cv"],
        "level": attrs["level"],
        "refit": int(attrs["refit"]),
        **{f"score_{name}": value for name, value in attrs["scores"].items()},
    }
    return results_on_grid(grid, site, replicate, values, per_site, metadata)


def _variable_attrs(grid, name, carried):
    """CF attributes of a result variable: the field's ``units`` (``"1"`` for the
    standardized residual), ``standard_name`` and ``grid_mapping`` as
    :func:`~geostat.data.fields.prediction_attrs` copies them, and a ``long_name``."""
    if name == "fold":
        return {"long_name": FIELD_LABELS[name], "comment": f"{NO_FOLD}: no observation"}
    attrs = prediction_attrs(grid, "std" if name == "std" else "mean", carried)
    if name == "standardized":
        attrs = {"units": "1", **{k: v for k, v in attrs.items() if k == "grid_mapping"}}
    label = grid.attrs.get("long_name") or grid.name
    attrs["long_name"] = FIELD_LABELS[name] + ("" if label is None else f" of {label}")
    return attrs


def _coordinate_names(model, d):
    """The model's coordinate names, or ``x0, x1, ...`` where it has none."""
    try:
        return [str(name) for name in model._coordinate_names()]
    except ValueError:
        return [f"x{j}" for j in range(d)]
