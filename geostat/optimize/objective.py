"""The optimizer's objective: negative log-likelihood per observation in its coordinates."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from geostat.errors import NotPositiveDefiniteError
from geostat.optimize.progress import current_progress

__all__ = ["Objective", "run_lbfgsb"]


class Objective:
    """Negative log-likelihood per observation of `likelihood` in the coordinates of `space`,
    reporting its evaluations to the fit's progress as of `stage` (e.g. ``"pilot subsample"``,
    :func:`~geostat.optimize.progress.current_progress`)."""

    def __init__(self, likelihood, space, stage="full data"):
        self.likelihood = likelihood
        self.space = space
        self.stage = stage
        self.n_evaluations = 0
        self.n_failures = 0
        self.worst = 0.0

    def evaluate(self, z, gradient=True, accuracy=None):
        """The objective (and with `gradient` its gradient) at `z`; a TLR likelihood's at
        `accuracy` instead of its own when given."""
        space = self.space
        other = {} if accuracy is None else {"accuracy": accuracy}
        free = space.to_natural(np.asarray(z, dtype=float))
        theta, eta, noise_ratio = space.point(free)
        self.n_evaluations += 1
        factorizations = getattr(self.likelihood, "n_factorizations", None)
        try:
            if space.profiled:
                terms = self.likelihood.terms(theta, eta, gradient, **other)
                value = terms.profiled_value()
                if gradient:
                    keys = {n: ("eye" if n == "ratio" else n) for n in space.names}
                    g = terms.profiled_gradient(set(keys.values()))
                    grad = np.array([g[keys[n]] for n in space.names])
            else:
                params = space.natural(free)
                terms = self.likelihood.terms(
                    theta, eta, gradient, noise_ratio=noise_ratio, **other
                )
                value = terms.full_value(params["variance"])
                if gradient:
                    g = terms.full_gradient(params["variance"], eta, space.names)
                    grad = np.array([g[n] for n in space.names])
        except NotPositiveDefiniteError:
            if self.likelihood.on_failure == "raise":
                raise
            value = np.nan
        # A TLR value read again from kept factors is no new evaluation: the fit counts
        # factorizations (MLEResult.n_evaluations).
        counted = factorizations is None or self.likelihood.n_factorizations > factorizations
        current_progress().evaluation(self.stage, value, self.likelihood.n_eff, free, counted)
        if not np.isfinite(value):
            # A covariance that is not positive definite is a handled event: the line
            # search sees a value worse than any seen so far and steps back.
            self.n_failures += 1
            penalty = self.worst + 1.0
            return (penalty, np.zeros(len(z))) if gradient else penalty
        scale = self.likelihood.n_obs
        f = -value / scale
        self.worst = max(self.worst, f)
        if not gradient:
            return f
        chain = np.where(space.log_scale, np.array([free[n] for n in space.names]), 1.0)
        return f, -grad * chain / scale

    def __call__(self, z):
        return self.evaluate(z, gradient=True)


def run_lbfgsb(objective, z0, bounds, options, callback=None):
    """Minimize `objective` (value and gradient) by L-BFGS-B within box `bounds`; a
    `callback` that raises ``StopIteration`` ends the run at the current iterate."""
    return minimize(
        objective,
        z0,
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options=options,
        callback=callback,
    )
