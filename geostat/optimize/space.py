"""The parameter space of the optimizer: what is estimated, bounds, and coordinates.

The optimizer's vector ``z`` has box bounds: ``log range``, each shape parameter in its
log (those of :attr:`~geostat.kernels.Kernel.linear_shape` on their natural scale), and
the log nugget-to-variance ratio with the variance profiled out, or, when the variance or
a non-zero nugget is fixed or bounded or the data have known noise ``V`` (then
``K = R + eta I + V / variance`` depends on the variance), ``log variance`` and
``log nugget``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

__all__ = ["PLATEAU_RATIO", "RATIO_FLOOR", "ParameterSpace"]

#: Smallest nugget-to-variance ratio the optimizer tries (its lower bound).
RATIO_FLOOR = 1e-9
#: Below this nugget-to-variance ratio the log-likelihood is about linear in the ratio, so
#: flat in its logarithm (the optimizer's coordinate): a plateau on which searches creep.
PLATEAU_RATIO = 1e-5


@dataclass
class ParameterSpace:
    """Which parameters are estimated, their bounds and the optimizer's coordinates.

    Parameters
    ----------
    kernel : geostat.kernels.Kernel
    nugget : bool or float
        ``True`` estimates the nugget, ``False`` or a non-negative float fixes it.
    fixed : dict, optional
        ``"variance"`` and/or ``"range"`` held fixed.
    bounds : dict, optional
        ``(low, high)`` for ``"range"``, ``"variance"``, ``"nugget"`` and shape parameters.
    max_distance, data_variance : float
        Largest site separation and detrended data variance; scale the default bounds.
    spans : dict, optional
        Extent of the coordinate axis of each :attr:`~geostat.kernels.Kernel.spanned`
        parameter (a time range's time span), scaling its default bounds.
    known_noise : bool, default False
        Known noise variances on the diagonal: the variance is a coordinate, never profiled.
    zero_floor : bool, default False
        A profiled space's nugget-to-variance ratio on its lower bound :data:`RATIO_FLOOR`
        means a zero nugget (:meth:`with_zero_floor`).

    Raises
    ------
    ValueError
        For a fixed parameter other than the variance or range, a value that is not positive
        and finite, an unknown bound, one not finite ``low < high`` (``0 < low`` for a
        parameter searched in its log), or a bound on a fixed parameter.
    TypeError
        If a fixed value or the nugget is not a number.
    """

    kernel: object
    nugget: object = True
    fixed: dict = field(default_factory=dict)
    bounds: dict = field(default_factory=dict)
    max_distance: float = 1.0
    data_variance: float = 1.0
    spans: dict = field(default_factory=dict)
    known_noise: bool = False
    zero_floor: bool = False

    def __post_init__(self):
        for name in self.fixed:
            if name not in ("variance", "range"):
                raise ValueError(
                    f"fixed={{{name!r}: ...}} is not supported; fix 'variance' or 'range' here, "
                    "the nugget with nugget=<value> and shape parameters in the kernel, "
                    "e.g. Matern(smoothness=1.5)."
                )
            _check_positive(self.fixed[name], f"fixed[{name!r}]")
        if isinstance(self.nugget, (bool, np.bool_)):
            self.nugget_value = None if self.nugget else 0.0
        else:
            _check_positive(self.nugget, "nugget", allow_zero=True)
            self.nugget_value = float(self.nugget)
        estimated = {
            "variance": "variance" not in self.fixed,
            "range": "range" not in self.fixed,
            "nugget": self.nugget_value is None,
        }
        for name in self.bounds:
            if not estimated.get(name, True):
                held = "nugget=" + repr(self.nugget) if name == "nugget" else f"fixed[{name!r}]"
                raise ValueError(
                    f"bounds[{name!r}] is given but {name} is held by {held}; drop one of the two."
                )
        # A bound on the variance or the nugget needs both as coordinates of the search, as
        # does known noise (K then depends on the variance).
        self.profiled = (
            "variance" not in self.fixed
            and not self.nugget_value
            and not {"variance", "nugget"} & set(self.bounds)
            and not self.known_noise
        )
        span = self.max_distance if self.max_distance > 0 else 1.0
        default = {
            "range": (1e-4 * span, 1e2 * span),
            "variance": (1e-8 * self.data_variance, 1e4 * self.data_variance),
            "nugget": (1e-10 * self.data_variance, 1e3 * self.data_variance),
            "ratio": (RATIO_FLOOR, 1e3),
            **self.kernel.shape_bounds,
        }
        for name in self.kernel.spanned:
            extent = self.spans.get(name, 1.0)
            extent = extent if extent > 0 else 1.0
            default[name] = (1e-4 * extent, 1e2 * extent)
        for name, pair in self.bounds.items():
            if name not in default or name == "ratio":
                raise ValueError(
                    f"bounds has unknown parameter {name!r}; use one of {sorted(default)}."
                )
            try:
                low, high = (float(v) for v in pair)
            except (TypeError, ValueError):
                raise ValueError(
                    f"bounds[{name!r}] must be a pair of numbers (low, high); got {pair!r}."
                ) from None
            if not (
                np.isfinite(low)
                and low < high < np.inf
                and (0 < low or name in self.kernel.linear_shape)
            ):
                raise ValueError(f"bounds[{name!r}] must satisfy 0 < low < high; got {pair}.")
            default[name] = (low, high)
        self.natural_bounds = default
        names = []
        if not self.profiled and "variance" not in self.fixed:
            names.append("variance")
        if "range" not in self.fixed:
            names.append("range")
        names += list(self.kernel.free_shape)
        if self.nugget_value is None:
            names.append("ratio" if self.profiled else "nugget")
        self.names = names
        self.log_scale = np.array([n not in self.kernel.linear_shape for n in names], dtype=bool)

    @property
    def estimated(self):
        """Natural parameters that are estimated (the variance always, when profiled)."""
        out = [] if "variance" in self.fixed else ["variance"]
        if "range" not in self.fixed:
            out.append("range")
        out += list(self.kernel.free_shape)
        if self.nugget_value is None:
            out.append("nugget")
        return out

    def z_bounds(self):
        """Box bounds of the optimizer's vector."""
        out = []
        for name, log in zip(self.names, self.log_scale, strict=True):
            low, high = self.natural_bounds[name]
            out.append((np.log(low), np.log(high)) if log else (low, high))
        return out

    def to_natural(self, z):
        """Map the optimizer's vector to a dict of the named free values."""
        values = np.where(self.log_scale, np.exp(np.minimum(z, 700.0)), z)
        return dict(zip(self.names, values.tolist(), strict=True))

    def to_z(self, values):
        """Map named free values to the optimizer's vector."""
        v = np.array([values[n] for n in self.names], dtype=float)
        v[self.log_scale] = np.log(v[self.log_scale])
        return v

    def theta(self, free):
        """Correlation parameters (range and all shape parameters)."""
        theta = {"range": free.get("range", self.fixed.get("range"))}
        theta.update(self.kernel.fixed_shape)
        theta.update({k: free[k] for k in self.kernel.free_shape})
        return dict(self.kernel.wrap(theta))

    def with_zero_floor(self):
        """This space where the ratio's lower bound stands for a zero nugget (a profiled
        space whose nugget is estimated; itself otherwise).

        Fisher scoring of a TLR likelihood searches in it: a nugget whose maximum is zero
        is then scored at zero, where the standard errors and the accuracy check take the
        search's last factor, instead of at the floor and tried at zero after the search
        (another factorization, and the information at another point).
        """
        return replace(self, zero_floor=True) if "ratio" in self.names else self

    def _ratio(self, free):
        """The nugget-to-variance ratio of a profiled space at the free values `free`."""
        ratio = free.get("ratio", 0.0)
        if self.zero_floor and ratio <= self.natural_bounds["ratio"][0] * (1 + 1e-9):
            return 0.0
        return ratio

    def point(self, free):
        """``(theta, eta, noise_ratio)`` of an evaluation at the free values `free`: the
        correlation parameters, the nugget ratio and ``1 / variance`` where the space has
        known noise (None otherwise); a profiled space's ratio is its coordinate (zero on its
        floor with :attr:`zero_floor`)."""
        theta = self.theta(free)
        if self.profiled:
            return theta, self._ratio(free), None
        params = self.natural(free)
        noise_ratio = 1.0 / params["variance"] if self.known_noise else None
        return theta, params["nugget"] / params["variance"], noise_ratio

    def natural(self, free, profiled_variance=None):
        """Full natural parameters from free values (and the profiled variance)."""
        params = {"variance": self.fixed.get("variance", free.get("variance", profiled_variance))}
        params.update(self.theta(free))
        if self.nugget_value is not None:
            params["nugget"] = self.nugget_value
        elif self.profiled:
            params["nugget"] = self._ratio(free) * params["variance"]
        else:
            params["nugget"] = free["nugget"]
        return params


def _check_positive(value, name, allow_zero=False):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"{name} must be a number; got {type(value).__name__}.")
    ok = np.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        raise ValueError(
            f"{name} must be {'non-negative' if allow_zero else 'positive'} and finite; "
            f"got {value}."
        )
