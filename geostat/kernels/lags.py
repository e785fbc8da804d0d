r"""Kernels of coordinate differences: the shared base of anisotropic and space-time models.

A *lag kernel* is a function of the coordinate differences ``delta = x_i - x_j`` of two
sites (one array per embedded axis, time last for a space-time model). Each one here
scales the differences to a dimensionless ``u >= 0`` and evaluates an isotropic family
``M`` there; along a geometric parameter ``p``,

.. math::

    \frac{\partial M}{\partial p} = u\,\frac{dM}{du}\;
        \frac{\partial u^2 / \partial p}{2 u^2},

which is zero where ``u = 0`` (there ``u dM/du = 0`` and the ratio of two quadratic forms
in ``delta`` is bounded).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from geostat.kernels._base import Kernel, check_in_domain

__all__ = [
    "LagKernel",
    "as_float",
    "check_real_axes",
    "family_derivatives",
    "requested_names",
    "scaled_derivative",
]


class LagKernel(Kernel):
    """Abstract correlation of coordinate differences (see the module docstring).

    Subclasses set the instance attributes of the shape bookkeeping
    (``_SHAPE_NAMES``, ``_SHAPE_DOMAIN``, ``_DEFAULT_BOUNDS``, ``_DEFAULT_START``) before
    calling :meth:`Kernel.__init__`, and implement :meth:`lag_evaluate`,
    :meth:`check_axes` and :meth:`init_arguments`.
    """

    structured = True

    def lag_evaluate(self, deltas, range_, shape, gradient=False):
        """The correlation (and gradient) at coordinate differences, without validation.

        `deltas` holds one array of (finite) differences per embedded axis, all of one
        shape and module; `range_` is the (major) spatial range; `shape` every shape
        parameter's value; `gradient` as for :meth:`Kernel.evaluate`. Returns
        ``(m, grads)``, arrays of the shape of the differences.
        """
        raise NotImplementedError

    def check_axes(self, n_axes, lonlat):
        """Raise ValueError unless the model applies to `n_axes` coordinate columns (time
        included), longitude/latitude when `lonlat`."""
        raise NotImplementedError

    def _check_shape_value(self, key, value, argname=None):
        """Validate one shape value against this instance's domains (made from its parts)."""
        return check_in_domain(key, value, self._SHAPE_DOMAIN[key], argname)

    def _formula(self, u, shape, xp, derivatives):
        return self.evaluate(u, 1.0, shape)

    def evaluate(self, d, range_, shape, gradient=False, overwrite_d=False):
        """Not defined on distances: a lag kernel needs coordinate differences."""
        raise TypeError(
            f"{type(self).__name__} is a function of coordinate differences, not of a distance; "
            "evaluate it with lag_evaluate."
        )

    def great_circle_valid_at(self, shape: Mapping[str, float | None]) -> bool:
        """bool: False: a lag kernel needs coordinates with Euclidean differences."""
        return False

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.init_arguments() == other.init_arguments()

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))

    def __repr__(self) -> str:
        args = ", ".join(
            f"{k}={v!r}"
            for k, v in self.init_arguments().items()
            if v is not None and v is not False
        )
        return f"{type(self).__name__}({args})"


def family_derivatives(family, u, shape, names):
    """``(M(u), u dM/du, dshape)`` of an isotropic `family` on scaled distances
    ``u >= 0``: with `names` None the values only (``(m, None, {})``), else also the
    derivatives in the family's shape parameters `names`."""
    if names is None:
        return family.evaluate(u, 1.0, shape)[0], None, {}
    m, grads = family.evaluate(u, 1.0, shape, gradient=("range", *names))
    u_dm_du = -grads.pop("range")  # dM/drange at range 1 is -u dM/du
    return m, u_dm_du, grads


def requested_names(kernel, gradient):
    """The parameter names `gradient` asks for: none, ``"range"`` and every free shape
    parameter (True), or ``"range"`` and the free ones among a tuple's."""
    if not gradient:
        return ()
    free = kernel.free_shape
    return ("range", *(free if gradient is True else (n for n in free if n in gradient)))


def scaled_derivative(u_dm_du, u2, du2, xp):
    """``u dM/du * du2 / (2 u2)``: the derivative of ``M(u)`` along a parameter whose
    derivative of ``u^2`` is `du2`, zero where ``u2 = 0``."""
    positive = u2 > 0
    return xp.where(positive, u_dm_du * du2 / xp.where(positive, 2.0 * u2, 1.0), 0.0)


def check_real_axes(n_axes, expected, lonlat, model):
    """Raise ValueError unless there are `expected` Euclidean axes (a tuple of counts)."""
    if lonlat:
        raise ValueError(
            f"{model} needs projected coordinates (x/y in a plane); longitude/latitude are not "
            "supported by it. Project the sites first (e.g. to km east/north of the data's centre) "
            "and fit on x/y."
        )
    if n_axes not in expected:
        raise ValueError(
            f"{model} applies to {' or '.join(map(str, expected))} coordinate columns, got "
            f"{n_axes}."
        )


def as_float(value):
    """A Python float of a NumPy scalar (keeps model files and reprs readable)."""
    return None if value is None else float(np.float64(value))
