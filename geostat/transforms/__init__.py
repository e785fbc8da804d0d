r"""Transforms of the target: a Gaussian process for ``z = g(y)``, predictions of ``y``.

With ``SpatialGP(target_transform=...)`` the process is fitted to ``z = g(y)`` and
kriging gives the Gaussian predictive distribution ``Z ~ N(mu, s^2)`` at a new site. A
monotone increasing transform maps it to predictions of ``y``: median ``g^{-1}(mu)``,
quantiles ``g^{-1}(mu + s Phi^{-1}(q))``, and the moments of ``g^{-1}(Z)``. The density
of ``y`` adds the Jacobian: ``loglik(y) = loglik_gauss(g(y)) + sum_i log g'(y_i)``.

* :class:`Identity`: ``g(y) = y``.
* :class:`Log`: ``g(y) = log y``, lognormal kriging [2]_.
* :class:`BoxCox`: ``g(y) = (y^lambda - 1) / lambda`` [1]_, ``lambda`` fixed or
  estimated by maximum likelihood, as in transformed Gaussian random fields [3]_.

References
----------
.. [1] Box, G. E. P., Cox, D. R. (1964). An analysis of transformations. Journal of the
   Royal Statistical Society, Series B, 26(2), 211–252.
.. [2] Cressie, N. (1993). Statistics for Spatial Data, revised ed., §3.2.2. Wiley.
.. [3] De Oliveira, V., Kedem, B., Short, D. A. (1997). Bayesian prediction of
   transformed Gaussian random fields. Journal of the American Statistical Association,
   92(440), 1422–1433.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import cache

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy import optimize, special

from geostat.errors import GeostatWarning

__all__ = ["TRANSFORM_NAMES", "Transform", "Identity", "Log", "BoxCox", "get_transform"]

#: The names of the transforms, as ``target_transform`` and model files spell them.
TRANSFORM_NAMES = ("identity", "log", "boxcox")
#: Nodes of the Gauss–Hermite rule of the Box-Cox moments; they span mu ± 14.9 s.
GAUSS_HERMITE_NODES = 64
#: Below this distance (in standard deviations) between mu and the boundary of the range
#: of a Box-Cox transform with lambda > 0, its moments use the closed form.
CLOSED_FORM_DISTANCE = 7.0
#: The smallest lambda whose moments near the boundary use the closed form: its orders
#: ``k / lambda`` stay <= 60, where SciPy's parabolic cylinder function is accurate to
#: 1e-9. Below, the clipped integrand has ``1/lambda - 1`` continuous derivatives and the
#: quadrature is used throughout.
CLOSED_FORM_LAMBDA = 1.0 / 30.0
#: Grid cells per block of the quadrature (bounds its temporaries to a few MiB).
_BLOCK = 8192


class Transform:
    """A monotone increasing transform ``g``, and predictions of ``y`` from a Gaussian
    ``Z = g(Y) ~ N(mu, s^2)``.

    Subclasses define :meth:`forward`, :meth:`inverse`, :meth:`log_derivative`,
    :meth:`mean` and :meth:`std`. ``mu`` and ``s`` of the prediction methods broadcast
    together (``s >= 0``; NaN stays NaN); results have their broadcast shape (a NumPy
    scalar for scalars).
    """

    name: str = ""

    # ------------------------------------------------------------------ the transform
    def forward(self, y):
        """``z = g(y)`` elementwise, as a float ndarray; NaN stays NaN.

        Raises ValueError for a value of `y` that is ``<= 0`` where ``g`` needs positive
        values (:class:`Log`, :class:`BoxCox`).
        """
        raise NotImplementedError

    def inverse(self, z):
        """``y = g^{-1}(z)``, elementwise, as a float ndarray; NaN stays NaN."""
        raise NotImplementedError

    def log_derivative(self, y):
        """``log g'(y)`` elementwise, at values where ``g`` is defined."""
        raise NotImplementedError

    def log_jacobian(self, y):
        r"""``sum_i log g'(y_i)`` (a float) over the observed (not NaN) values of `y`.

        ``loglik(y) = loglik_gauss(g(y)) + log_jacobian(y)`` is the log-likelihood of the
        data in their own units. Raises ValueError as :meth:`forward`.
        """
        y = self._checked(y)
        observed = y[~np.isnan(y)]
        return float(np.sum(self.log_derivative(observed))) if observed.size else 0.0

    def _checked(self, y):
        """`y` as a float array (not copied; never written to)."""
        return _floats(y, "y")

    # ------------------------------------------------------------------ predictions
    def mean(self, mu, s):
        """The mean of ``g^{-1}(Z)`` for ``Z ~ N(mu, s^2)``."""
        raise NotImplementedError

    def std(self, mu, s):
        """The standard deviation of ``g^{-1}(Z)`` for ``Z ~ N(mu, s^2)``."""
        raise NotImplementedError

    def median(self, mu, s):
        """The median of ``g^{-1}(Z)``: ``g^{-1}(mu)`` (``g`` is increasing)."""
        mu, s = _gaussian(mu, s)
        return _out(np.where(np.isnan(s), np.nan, self.inverse(mu)))

    def quantile(self, mu, s, q):
        """The `q` quantile of ``g^{-1}(Z)``: ``g^{-1}(mu + s * Phi^{-1}(q))``.

        Parameters
        ----------
        mu, s : array-like
            Mean and standard deviation of ``Z``.
        q : float or array-like
            Probabilities in (0, 1), broadcast with `mu` and `s`.

        Raises
        ------
        ValueError
            If `q` is not in (0, 1).
        """
        q = _floats(q, "q")
        inside = (q > 0) & (q < 1)
        if not inside.all():
            raise ValueError(
                f"q must hold probabilities strictly between 0 and 1; got {_first_bad(q, inside)}."
            )
        mu, s = _gaussian(mu, s)
        return _out(self.inverse(mu + s * special.ndtri(q)))

    def interval(self, mu, s, level=0.9):
        """The ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of ``g^{-1}(Z)``.

        Parameters
        ----------
        mu, s : array-like
            Mean and standard deviation of ``Z``.
        level : float, default 0.9
            Coverage, in (0, 1).

        Returns
        -------
        low, high : ndarray or numpy scalar

        Raises
        ------
        ValueError
            If `level` is not a number in (0, 1).
        """
        if (
            isinstance(level, bool)
            or not isinstance(level, (int, float, np.floating))
            or not 0 < level < 1
        ):
            raise ValueError(f"level must be a number in (0, 1), e.g. 0.9; got {level!r}.")
        return self.quantile(mu, s, (1 - level) / 2), self.quantile(mu, s, (1 + level) / 2)

    # ------------------------------------------------------------------ model files
    def to_dict(self):
        """The transform as a JSON-ready dict: ``{"name": ...}`` and, for a
        :class:`BoxCox` with a ``lambda``, ``"lmbda"``."""
        return {"name": self.name}

    @classmethod
    def from_dict(cls, state):
        """The transform a dict of :meth:`to_dict` describes:
        ``{"name": "identity" | "log" | "boxcox"}``, with a finite ``"lmbda"`` allowed for
        ``"boxcox"`` only. Called on a subclass it also requires that subclass.

        Raises ValueError naming a field that is missing, unknown, or of a bad type or
        value.
        """
        if not isinstance(state, dict):
            raise ValueError(
                f"a transform is stored as a dict with a 'name'; got a {type(state).__name__}."
            )
        name = state.get("name")
        if not isinstance(name, str) or name not in TRANSFORM_NAMES:
            raise ValueError(
                f"the transform's field 'name' must be one of {list(TRANSFORM_NAMES)}; got "
                f"{_brief(name)}."
            )
        allowed = {"name", "lmbda"} if name == "boxcox" else {"name"}
        unknown = sorted(_brief(key) for key in state if key not in allowed)
        if unknown:
            raise ValueError(
                f"the {name} transform has the unknown field(s) {', '.join(unknown[:3])}; "
                f"it has only {sorted(allowed)}."
            )
        if name != "boxcox":
            transform = Identity() if name == "identity" else Log()
        else:
            lmbda = state.get("lmbda")
            if "lmbda" in state and not _is_finite_number(lmbda):
                raise ValueError(
                    "the boxcox transform's field 'lmbda' must be a finite number; got "
                    f"{_brief(lmbda)}."
                )
            transform = BoxCox(lmbda)
        if not isinstance(transform, cls):
            raise ValueError(
                f"the transform's field 'name' is {name!r}, not a {cls.__name__} transform."
            )
        return transform

    # ------------------------------------------------------------------ estimation
    @property
    def n_estimated(self):
        """int: Parameters :meth:`resolve` estimates from the data (1 for a
        :class:`BoxCox` without ``lmbda``, else 0)."""
        return 0

    def resolve(self, y, profile_loglik):
        """The transform with its free parameters estimated from the observations `y`
        (NaN: missing) by :meth:`BoxCox.estimate`; itself when it has none."""
        return self


@dataclass(frozen=True)
class Identity(Transform):
    """``g(y) = y``: the Gaussian process models the target itself.

    Examples
    --------
    >>> Identity().interval(1.0, 2.0, level=0.95)
    (np.float64(-2.919927969080108), np.float64(4.919927969080108))
    """

    name = "identity"

    def forward(self, y):
        return self._checked(y).copy()

    def inverse(self, z):
        return _floats(z, "z").copy()

    def log_derivative(self, y):
        return np.zeros_like(y)

    def mean(self, mu, s):
        mu, s = _gaussian(mu, s)
        return _out(np.where(np.isnan(s), np.nan, mu))

    def std(self, mu, s):
        mu, s = _gaussian(mu, s)
        return _out(np.where(np.isnan(mu), np.nan, s))


@dataclass(frozen=True)
class Log(Transform):
    r"""``g(y) = log y``: lognormal kriging [1]_.

    With ``Z = log Y ~ N(mu, s^2)``:

    .. math::

        E[Y] = e^{\mu + s^2/2}, \qquad
        \operatorname{sd}[Y] = \sqrt{(e^{s^2} - 1)\, e^{2\mu + s^2}}.

    References
    ----------
    .. [1] Cressie, N. (1993). Statistics for Spatial Data, revised ed., §3.2.2. Wiley.
    """

    name = "log"

    def _checked(self, y):
        return _positive(y, "the log transform")

    def forward(self, y):
        return np.log(self._checked(y))

    def inverse(self, z):
        return np.exp(_floats(z, "z"))

    def log_derivative(self, y):
        return -np.log(y)

    def mean(self, mu, s):
        return _out(_lognormal_moments(*_gaussian(mu, s))[0])

    def std(self, mu, s):
        return _out(_lognormal_moments(*_gaussian(mu, s))[1])


@dataclass(frozen=True)
class BoxCox(Transform):
    r"""The Box-Cox transform ``g(y) = (y^lambda - 1) / lambda`` (``log y`` at 0) [1]_.

    Parameters
    ----------
    lmbda : float or None, default None
        ``lambda``; None: to be estimated (:meth:`estimate`, or :meth:`resolve` in a
        fit). 1 is a shift, 1/2 a square root, 0 the logarithm, -1 the reciprocal.

    Notes
    -----
    ``g'(y) = y^(lambda - 1)``; ``g^{-1}(z) = (1 + lambda z)^(1/lambda)``, extended
    beyond the boundary ``1 + lambda z = 0`` of the range of ``g`` by its limit: 0 for
    ``lambda > 0`` (``Y = max(1 + lambda Z, 0)^(1/lambda)``), +inf for ``lambda < 0``
    (a pole). :meth:`inverse`, :meth:`median`, :meth:`quantile` follow it exactly.

    :meth:`mean` and :meth:`std` use a 64-node Gauss–Hermite rule (nodes up to 14.9
    standard deviations from ``mu``). The clipped integrand has a kink, so for
    ``lambda >= 1/30`` (:data:`CLOSED_FORM_LAMBDA`) and a boundary within 7 standard
    deviations of ``mu`` (:data:`CLOSED_FORM_DISTANCE`) they use the closed form [2]_,
    with ``a = (1 + lambda mu) / (lambda s)``, ``p = 1 / lambda``, ``D`` the parabolic
    cylinder function:

    .. math::

        E[Y^k] = (\lambda s)^{kp}\, \Gamma(kp + 1)\, e^{-a^2/4}\, D_{-kp-1}(-a) / \sqrt{2\pi}.

    Accuracy: about 1e-8 relative for ``lambda`` in [1/30, 2] and ``a`` in [-6, 20].
    For ``lambda < 0`` the exact moments are infinite; the rule neglects the tail beyond
    its outermost node (probability below 1e-49) and returns ``+inf`` when the pole is
    within 14.9 standard deviations of ``mu``, a finite value otherwise. Prefer
    :meth:`median` and :meth:`quantile` there: they are exact.

    References
    ----------
    .. [1] Box, G. E. P., Cox, D. R. (1964). An analysis of transformations. Journal of
       the Royal Statistical Society, Series B, 26(2), 211–252.
    .. [2] Gradshteyn, I. S., Ryzhik, I. M. (2007). Table of Integrals, Series, and
       Products, 7th ed., formula 3.462.1. Academic Press.

    Examples
    --------
    >>> BoxCox(0.5).forward([1.0, 4.0])
    array([0., 2.])
    >>> float(BoxCox(0.5).median(2.0, 0.3))
    4.0
    """

    lmbda: float | None = None
    name = "boxcox"

    def __post_init__(self):
        if self.lmbda is not None:
            if not _is_finite_number(self.lmbda):
                raise ValueError(
                    "lmbda must be a finite number (or None to estimate it); got "
                    f"{_brief(self.lmbda)}."
                )
            object.__setattr__(self, "lmbda", float(self.lmbda))

    @property
    def n_estimated(self):
        return int(self.lmbda is None)

    def _lambda(self):
        if self.lmbda is None:
            raise ValueError(
                "this BoxCox transform has no lmbda yet: give one, BoxCox(lmbda=0.5), or "
                "estimate it with BoxCox.estimate(y, profile_loglik)."
            )
        return self.lmbda

    def _checked(self, y):
        return _positive(y, "the Box-Cox transform")

    def forward(self, y):
        return _box_cox(self._checked(y), self._lambda())

    def inverse(self, z):
        return _box_cox_inverse(_floats(z, "z"), self._lambda())

    def log_derivative(self, y):
        return (self._lambda() - 1.0) * np.log(y)

    def mean(self, mu, s):
        return _out(self._moments(mu, s)[0])

    def std(self, mu, s):
        return _out(self._moments(mu, s)[1])

    def _moments(self, mu, s):
        """Mean and standard deviation of ``g^{-1}(Z)``, as in the class notes."""
        lmbda = self._lambda()
        mu, s = _gaussian(mu, s)
        if lmbda == 0.0:
            return _lognormal_moments(mu, s)
        flat_mu, flat_s = mu.ravel(), s.ravel()
        mean, std = np.empty_like(flat_mu), np.empty_like(flat_mu)
        for start in range(0, flat_mu.size, _BLOCK):
            block = slice(start, start + _BLOCK)
            mean[block], std[block] = _box_cox_moments(flat_mu[block], flat_s[block], lmbda)
        return mean.reshape(mu.shape), std.reshape(mu.shape)

    def to_dict(self):
        return {"name": self.name} | ({} if self.lmbda is None else {"lmbda": float(self.lmbda)})

    def resolve(self, y, profile_loglik):
        return self if self.lmbda is not None else BoxCox.estimate(y, profile_loglik)

    @classmethod
    def estimate(cls, y, profile_loglik, bounds=(-1.0, 2.0)):
        r"""``lambda`` by maximum likelihood.

        Maximizes over ``lambda`` in `bounds` (bounded scalar search, ``xatol`` 1e-5)
        the profile log-likelihood of the data in their own units [1]_:

        .. math::

            \ell(\lambda) = \ell_{\mathrm{prof}}(g_\lambda(y)) + (\lambda - 1) \sum_i \log y_i.

        The Jacobian is kept explicit rather than scaling ``g`` by the geometric mean of
        `y` (Box and Cox's form, same estimate), so that ``g`` does not depend on the
        data it was fitted to.

        Parameters
        ----------
        y : array-like
            Positive observations; NaN (missing) values are passed on as NaN in ``z``
            and left out of the Jacobian.
        profile_loglik : callable
            ``profile_loglik(z) -> float``: the Gaussian log-likelihood of transformed
            data ``z`` (same shape as `y`), maximized over the other parameters. A
            non-finite value marks a ``lambda`` the model cannot fit.
        bounds : (float, float), default (-1, 2)
            The search interval of ``lambda``.

        Returns
        -------
        BoxCox
            With ``lmbda`` the estimate.

        Raises
        ------
        ValueError
            For a value of `y` that is ``<= 0``, bad `bounds`, or when
            `profile_loglik` gives no finite value.
        TypeError
            If `profile_loglik` is not callable.

        Warns
        -----
        GeostatWarning
            When the estimate lies on a bound (widen `bounds`).

        References
        ----------
        .. [1] Box, G. E. P., Cox, D. R. (1964). An analysis of transformations. Journal
           of the Royal Statistical Society, Series B, 26(2), 211–252.
        """
        if not callable(profile_loglik):
            raise TypeError(
                "profile_loglik must be a function of the transformed data z returning its "
                f"maximized Gaussian log-likelihood; got {type(profile_loglik).__name__}."
            )
        low, high = _bounds(bounds)
        y = _positive(y, "the Box-Cox transform")
        log_y = np.log(y[~np.isnan(y)])
        total = float(np.sum(log_y))

        def objective(lmbda):
            value = float(profile_loglik(_box_cox(y, lmbda))) + (lmbda - 1.0) * total
            return -value if math.isfinite(value) else math.inf

        found = optimize.minimize_scalar(
            objective, bounds=(low, high), method="bounded", options={"xatol": 1e-5}
        )
        if not math.isfinite(found.fun):
            raise ValueError(
                f"profile_loglik gave no finite log-likelihood for lambda in [{low:g}, "
                f"{high:g}]; check that it fits the transformed data z."
            )
        lmbda = float(found.x)
        if min(lmbda - low, high - lmbda) < 1e-3 * (high - low):
            warnings.warn(
                f"the Box-Cox lambda estimate {lmbda:.4g} lies on a bound of [{low:g}, "
                f"{high:g}]; widen bounds, or fix lambda with BoxCox(lmbda=...).",
                GeostatWarning,
                stacklevel=2,
            )
        return cls(lmbda)


def get_transform(spec):
    """The transform of a ``target_transform`` setting: None or ``"identity"``,
    ``"log"`` (:class:`Log`), ``"boxcox"`` (:class:`BoxCox`, ``lambda`` to be estimated),
    or a :class:`Transform` (returned as it is); ValueError for any other value."""
    if spec is None:
        return Identity()
    if isinstance(spec, Transform):
        return spec
    if isinstance(spec, str) and spec in TRANSFORM_NAMES:
        return {"identity": Identity, "log": Log, "boxcox": BoxCox}[spec]()
    raise ValueError(
        f"target_transform must be None, 'identity', 'log', 'boxcox' (lambda estimated) or a "
        f"transform such as BoxCox(lmbda=0.5); got {_brief(spec)}."
    )


# ---------------------------------------------------------------------- helpers
def _box_cox(y, lmbda):
    """``(y^lambda - 1) / lambda`` as ``expm1(lambda log y) / lambda`` (``log y`` at 0)."""
    log_y = np.log(y)
    return log_y if lmbda == 0.0 else np.expm1(lmbda * log_y) / lmbda


def _box_cox_inverse(z, lmbda):
    """``(1 + lambda z)^(1/lambda)``, extended beyond ``1 + lambda z <= 0`` by its limit
    (0 for lambda > 0, +inf for lambda < 0)."""
    if lmbda == 0.0:
        return np.exp(z)
    inside = 1.0 + lmbda * z > 0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        values = np.exp(np.log1p(lmbda * z) / lmbda)
    return np.where(inside, values, np.where(np.isnan(z), np.nan, 0.0 if lmbda > 0 else np.inf))


@cache
def _hermite_rule():
    """Nodes and weights of the Gauss–Hermite rule for the standard normal density."""
    nodes, weights = hermegauss(GAUSS_HERMITE_NODES)
    return nodes, weights / math.sqrt(2.0 * math.pi)


def _box_cox_moments(mu, s, lmbda):
    """Mean and standard deviation of ``g^{-1}(Z)``, ``Z ~ N(mu, s^2)``, for 1-D `mu`, `s`
    and ``lambda != 0`` (see :class:`BoxCox`)."""
    nodes, weights = _hermite_rule()
    values = _box_cox_inverse(mu[:, None] + s[:, None] * nodes, lmbda)
    with np.errstate(invalid="ignore", over="ignore"):
        mean = values @ weights
        std = np.sqrt(((values - mean[:, None]) ** 2) @ weights)
    std[np.isinf(mean)] = np.inf
    if lmbda >= CLOSED_FORM_LAMBDA:
        with np.errstate(divide="ignore", invalid="ignore"):
            # of the boundary below mu, in standard deviations
            distance = (1.0 + lmbda * mu) / (lmbda * s)
        near = (distance <= CLOSED_FORM_DISTANCE) & (s > 0)
        if near.any():
            first, second = (
                _clipped_moment(distance[near], lmbda * s[near], k / lmbda) for k in (1, 2)
            )
            mean[near] = first
            std[near] = np.sqrt(np.maximum(second - first**2, 0.0))
    return mean, std


def _clipped_moment(a, scale, p):
    """``E[(scale (X + a))_+^p]`` for standard normal ``X``: ``scale^p Gamma(p + 1)
    e^{-a^2/4} D_{-p-1}(-a) / sqrt(2 pi)`` (Gradshteyn & Ryzhik 3.462.1)."""
    # the moment is 0 in double precision there; pbdv fails on large arguments
    a = np.maximum(a, -40.0)
    cylinder, _ = special.pbdv(-p - 1.0, -a)
    with np.errstate(under="ignore"):
        return (
            np.exp(p * np.log(scale) + special.gammaln(p + 1.0) - a * a / 4.0)
            * cylinder
            / math.sqrt(2.0 * math.pi)
        )


def _lognormal_moments(mu, s):
    """Mean ``exp(mu + s^2/2)`` and standard deviation ``exp(mu + s^2/2) sqrt(expm1(s^2))``."""
    with np.errstate(over="ignore"):
        mean = np.exp(mu + s * s / 2.0)
        return mean, mean * np.sqrt(np.expm1(s * s))


def _floats(values, name):
    """`values` as a float array (not copied when it is one already; never written to)."""
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must hold numbers; got {_brief(values)}.") from None


def _positive(y, what):
    """`y` as floats, every non-NaN value > 0."""
    y = _floats(y, "y")
    bad = y <= 0
    if bad.any():
        raise ValueError(
            f"y has {int(bad.sum())} value(s) <= 0 (the smallest {np.nanmin(y):g}), but "
            f"{what} needs positive values: add an offset that makes every value positive "
            "(e.g. y - min(y) + 1), or fit without a transform (target_transform=None)."
        )
    return y


def _gaussian(mu, s):
    """`mu` and `s` as float arrays of their broadcast shape; `s` >= 0 (or NaN)."""
    mu, s = _floats(mu, "mu"), _floats(s, "s")
    if (s < 0).any():
        raise ValueError(
            f"s is a standard deviation and must be >= 0; got {_first_bad(s, ~(s < 0))}."
        )
    try:
        return tuple(np.broadcast_arrays(mu, s))
    except ValueError:
        raise ValueError(
            f"mu and s must have shapes that broadcast together; got {mu.shape} and {s.shape}."
        ) from None


def _out(values):
    """An array result, or a NumPy scalar for a 0-d one."""
    return np.asarray(values)[()]


def _bounds(bounds):
    """``(low, high)`` of a search interval, finite and increasing."""
    try:
        low, high = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(
            f"bounds must be two numbers (low, high), e.g. (-1, 2); got {_brief(bounds)}."
        ) from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(
            f"bounds must be finite with low < high, e.g. (-1, 2); got ({low:g}, {high:g})."
        )
    return low, high


def _is_finite_number(value):
    return (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, (bool, np.bool_))
        and math.isfinite(float(value))
    )


def _first_bad(values, good):
    """The first value of `values` where the mask `good` is False, for a message."""
    return f"{values[~good][0]:g}"


def _brief(value):
    """A short ``repr`` of a value for a message (a hostile one may be huge)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
