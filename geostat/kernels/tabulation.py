r"""Fast evaluation of costly correlation functions by interpolation in ``t = log d``.

A radial function ``g(d)`` (a correlation or one of its parameter derivatives) is
smooth in ``t``; it is evaluated at nodes uniform in ``t`` and interpolated with
four-point (cubic) Lagrange weights, so an evaluation costs ``O(nodes)`` special-function
calls plus four gathers per distance. :class:`LogDistanceTable` does so on the fixed
pair distances of a fit (weights computed once); :class:`RadialTable` on any distances
at fixed parameters (a TLR build), on nodes ``t_k = k h`` that do not depend on the
distances, so an entry's value depends on its distance alone. Distances outside
:data:`SPAN` (0 included) take the formula.

Accuracy: the cubic remainder is at most ``step^4 / 24 * max|g''''(t)| * 9/16``, about
``1e-13`` with the step ``1e-3`` for Matérn correlations.
"""

from __future__ import annotations

import math

import numpy as np

from geostat.kernels._base import array_namespace

__all__ = ["SPAN", "STEP", "LogDistanceTable", "RadialFunction", "RadialTable"]

#: Node spacing in ``log d`` of :class:`RadialTable`.
STEP = 1e-3
#: ``d / range`` between these is interpolated by :class:`RadialTable` (23,000 nodes).
SPAN = (1e-6, 1e4)


class LogDistanceTable:
    """Interpolation weights from nodes uniform in log distance to fixed pair distances.

    `distances` (any shape, non-negative) are fixed; zero distances take the value at
    distance 0 exactly. `step` is the node spacing in ``log d``.
    """

    def __init__(self, distances, step=1e-3):
        xp = self.xp = array_namespace(distances)
        distances = xp.asarray(distances, dtype=xp.float64)
        self.shape = distances.shape
        flat = distances.reshape(-1)
        self.zero = xp.flatnonzero(flat == 0.0)
        self.positive = xp.flatnonzero(flat > 0.0) if self.zero.size else None
        log_d = xp.log(flat[self.positive] if self.positive is not None else flat)
        low, high = float(log_d.min()), float(log_d.max())
        origin = low - step
        n_nodes = int(math.ceil((high - origin) / step)) + 3
        self.nodes = xp.exp(origin + step * xp.arange(n_nodes))
        s = (log_d - origin) / step
        index = xp.clip(xp.floor(s).astype(xp.int64), 1, n_nodes - 3)
        f = s - index
        self.index = index - 1  # first of the four nodes
        fm1, fm2, fp1 = f - 1.0, f - 2.0, f + 1.0
        self.weights = (
            -f * fm1 * fm2 / 6.0,
            0.5 * fp1 * fm1 * fm2,
            -0.5 * fp1 * f * fm2,
            fp1 * f * fm1 / 6.0,
        )

    def interpolate(self, node_values, value_at_zero):
        """Values at every pair distance (the shape given at construction) from
        `node_values` at :attr:`nodes` and the `value_at_zero`."""
        i = self.index
        w0, w1, w2, w3 = self.weights
        out = w0 * node_values[i]
        out += w1 * node_values[i + 1]
        out += w2 * node_values[i + 2]
        out += w3 * node_values[i + 3]
        if self.positive is None:
            return out.reshape(self.shape)
        full = self.xp.empty(self.zero.size + self.positive.size)
        full[self.positive] = out
        full[self.zero] = value_at_zero
        return full.reshape(self.shape)

    def evaluate(self, kernel, range_, shape, gradient):
        """``(values, grads)`` of the kernel at the pair distances, through the table, as
        :meth:`~geostat.kernels.Kernel.evaluate` returns them."""
        nodes, node_grads = kernel.evaluate(self.nodes, range_, shape, gradient)
        zero, zero_grads = kernel.evaluate(self.xp.zeros(1), range_, shape, gradient)
        grads = {k: self.interpolate(v, float(zero_grads[k][0])) for k, v in node_grads.items()}
        return self.interpolate(nodes, float(zero[0])), grads


class RadialFunction:
    """The correlation of a kernel at fixed parameters, or its derivative, as a function
    of the distance: ``g(d)``, by the kernel's formula.

    `shape` holds every shape parameter's value; `name` (``"range"`` or a free shape
    parameter) selects a derivative (default: the correlation itself).
    """

    def __init__(self, kernel, range_, shape, name=None):
        self.kernel, self.range, self.shape, self.name = kernel, float(range_), shape, name

    def __call__(self, d, overwrite_d=False):
        """``g`` at the distances `d` (any shape and array module), which the correlation
        may overwrite with `overwrite_d`."""
        if self.name is None:
            return self.kernel.evaluate(d, self.range, self.shape, overwrite_d=overwrite_d)[0]
        return self.kernel.evaluate(d, self.range, self.shape, gradient=(self.name,))[1][self.name]


class RadialTable(RadialFunction):
    """:class:`RadialFunction` interpolated from its values at the nodes ``t_k = k h`` of
    ``t = log d`` (``h`` = `step`) where ``d / range`` is in :data:`SPAN`; other
    distances take the formula.

    On ``[t_k, t_{k+1})``, with ``f = t / h - k`` and ``v_j = g(e^{t_{k+j}})``, the cubic
    through ``v_{-1}, v_0, v_1, v_2`` is ``v_0 + f c_1 + f^2 c_2 + f^3 c_3`` with
    ``c_1 = -v_{-1}/3 - v_0/2 + v_1 - v_2/6``, ``c_2 = v_{-1}/2 - v_0 + v_1/2``,
    ``c_3 = -v_{-1}/6 + v_0/2 - v_1/2 + v_2/6``. For Matérn correlations the error is
    at most 2e-13 of the correlation's largest value (1e-12 for a derivative). The
    coefficients are computed at the first call and are not pickled.
    """

    def __init__(self, kernel, range_, shape, name=None, step=STEP):
        super().__init__(kernel, range_, shape, name)
        self.step = step
        # (the logs added: the products can underflow or overflow; nodes beyond e^700 would)
        self._first = math.floor((math.log(self.range) + math.log(SPAN[0])) / step)
        self._count = (
            math.ceil(min(math.log(self.range) + math.log(SPAN[1]), 700.0) / step) - self._first
        )
        self._coefficients = None

    def __getstate__(self):
        return {**self.__dict__, "_coefficients": None}

    def _table(self, xp):
        if self._coefficients is None:
            nodes = xp.exp(
                self.step
                * xp.arange(self._first - 1, self._first + self._count + 3, dtype=xp.float64)
            )
            v = super().__call__(nodes)
            before, at, after, next_ = v[:-3], v[1:-2], v[2:-1], v[3:]
            self._coefficients = (
                at,
                -before / 3 - at / 2 + after - next_ / 6,
                before / 2 - at + after / 2,
                -before / 6 + at / 2 - after / 2 + next_ / 6,
            )
        return self._coefficients

    def __call__(self, d, overwrite_d=False):
        """``g`` at the distances `d` (an array of any shape and module; `overwrite_d`
        changes nothing: the interpolation's own temporaries are needed anyway)."""
        xp = array_namespace(d)
        c0, c1, c2, c3 = self._table(xp)
        flat = d.reshape(-1)
        with np.errstate(divide="ignore", invalid="ignore"):  # log 0 = -inf: outside
            s = xp.log(flat)
            s /= self.step
            k = xp.floor(s)
            f = s - k
            k -= self._first
            inside = (k >= 0) & (k <= self._count)
        interval = xp.where(inside, k, 0.0).astype(xp.int64)
        out = xp.take(c3, interval)
        out *= f
        out += xp.take(c2, interval)
        out *= f
        out += xp.take(c1, interval)
        out *= f
        out += xp.take(c0, interval)
        if not bool(xp.all(inside)):
            outside = xp.flatnonzero(~inside)
            out[outside] = super().__call__(flat[outside])
        return out.reshape(d.shape)
