"""K-fold cross-validation with the model refitted on each training fold."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import clone

__all__ = ["refit_predictions"]


def refit_predictions(model, labels):
    """Predictions of the observations of each fold by a clone of `model` fitted on the
    other folds.

    Each clone (the settings, with the fitted target transform held) is fitted on the
    other folds and predicts the fold's observations in the scale ``g(y)``: the kriging
    variance plus its nugget, its ``shift_`` and the known noise of each held-out site.

    `labels` gives each training site's fold. Returns ``(site, replicate, mean, std)``
    per held-out observation: its training site and replicate, and the predictive mean
    and standard deviation of ``g(y)``.
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
    """The training sites in the form of the fitted input (column order, a DataFrame
    with the fitted names or an array), dates as float days."""
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
