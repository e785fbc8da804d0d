"""K-fold cross-validation with the model refitted on each training fold."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import clone

__all__ = ["refit_predictions"]


def refit_predictions(model, labels):
    """Predictions of the observations of each fold by a clone of `model` fitted on the
    other folds.

    Each clone (:func:`sklearn.base.clone`: the settings, not the estimates, with the
    fitted target transform held) is fitted by maximum likelihood on the training sites
    of the other folds and predicts the fold's sites in the Gaussian scale ``g(y)`` of
    the transform, its nugget (and any diagonal shift it needed, ``shift_``) and the
    known noise variance of each held-out site (``noise_variance_`` of `model`, which the
    clone is fitted with on its training sites) added to the kriging variance of the
    latent process: the result predicts the observation.

    Parameters
    ----------
    model : geostat.SpatialGP
        Fitted; its training data (``_training``) are split.
    labels : ndarray of shape (n,)
        Fold label of each training site; sites with no observation are in no training
        fold and never predicted.

    Returns
    -------
    site, replicate : ndarray of int
        Training site and replicate (column of ``y``) of each held-out observation.
    mean, std : ndarray of float
        Predictive mean and standard deviation of ``g(y)`` for each observation (in the
        units of ``y`` without a transform).
    """
    training = model._training
    transform = model._transform()
    observed = transform.inverse(training.y * model._scale.factor)
    seen = ~np.isnan(observed)
    table = _training_table(model)
    known = None if training.noise is None else training.noise * model._scale.factor**2
    sites, replicates, means, stds = [], [], [], []
    for label in np.unique(labels[seen.any(axis=1)]):
        held = labels == label
        kept = ~held & seen.any(axis=1)
        values = observed[kept, 0] if model._y_one_d else observed[kept]
        estimator = clone(model).set_params(target_transform=transform)
        estimator.fit(
            _rows(table, kept), values, noise_variance=None if known is None else known[kept]
        )
        mean, std = estimator._gaussian_prediction(
            estimator._new_sites(_rows(table, held)), include_nugget=True
        )
        if known is not None:
            std = np.sqrt(std**2 + known[held][:, None])
        rows, columns = np.nonzero(seen[held])
        sites.append(np.flatnonzero(held)[rows])
        replicates.append(columns)
        means.append(mean[rows, columns])
        stds.append(std[rows, columns])
    return tuple(np.concatenate(a) for a in (sites, replicates, means, stds))


def _training_table(model):
    """The training sites as the fitted input: coordinates and covariates in the fitted
    column order, a DataFrame with the fitted column names (an array for a model fitted
    on arrays). Coordinates are as the fit stored them (dates of a space-time fit as float
    days, :attr:`geostat.SpatialGP.time_unit_`)."""
    n_columns, coord_pos, cov_pos = model._layout
    training = model._training
    table = np.empty((training.coords.shape[0], n_columns))
    table[:, coord_pos] = training.coords
    if cov_pos:
        table[:, cov_pos] = training.design[:, 1:]  # an intercept, then the covariates
    if hasattr(model, "feature_names_in_"):
        return pd.DataFrame(table, columns=list(model.feature_names_in_))
    return table


def _rows(table, mask):
    """The rows `mask` of a training table, a DataFrame re-indexed from 0."""
    if isinstance(table, pd.DataFrame):
        return table.loc[mask].reset_index(drop=True)
    return table[mask]
