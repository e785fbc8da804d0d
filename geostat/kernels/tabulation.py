r"""Fast evaluation of costly correlation functions on a fixed set of pair distances.

During a fit the pair distances never change; only the kernel parameters do. A radial
function ``g(d)`` (the correlation or one of its parameter derivatives) is smooth in
``t = log d``, so it is evaluated at nodes spaced uniformly in ``t`` across the span of the
data's distances and interpolated to every pair with four-point (cubic) Lagrange weights
that are computed once. Each evaluation then costs ``O(nodes)`` special-function calls,
instead of ``O(pairs)``, plus four gathers per pair.

Accuracy: the cubic Lagrange remainder is bounded by
``step^4 / 24 * max|g''''(t)| * 9/16``; with the default step of ``1e-3`` in ``log d``
and the ``t``-derivatives of Matern correlations (a few units at most) this is about
``1e-13``, far below what the likelihood can resolve.

The table lives in the array module of the distances (NumPy, or CuPy on a GPU): the
node values are computed there too and only the gathers touch every pair.
"""

from __future__ import annotations

import math

from geostat.kernels._base import array_namespace

__all__ = ["LogDistanceTable"]


class LogDistanceTable:
    """Interpolation weights from nodes uniform in log distance to fixed pair distances.

    Parameters
    ----------
    distances : ndarray
        Pair distances (any shape, non-negative). Zero distances are kept exactly: they
        take the value of the function at distance 0.
    step : float, default 1e-3
        Node spacing in ``log d``.
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
        """Values at every pair distance from values at :attr:`nodes`.

        Parameters
        ----------
        node_values : array of shape (n_nodes,)
        value_at_zero : float
            The function's value at distance 0.

        Returns
        -------
        array with the shape of the distances given at construction
        """
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
        """Kernel correlation (and gradient) at the pair distances through the table.

        Parameters
        ----------
        kernel : geostat.kernels.Kernel
        range_ : float
        shape : dict
            Every shape parameter's value (:meth:`~geostat.kernels.Kernel.resolve_shape`).
        gradient : bool

        Returns
        -------
        values : array
        grads : dict of str to array (empty unless `gradient`)
        """
        nodes, node_grads = kernel.evaluate(self.nodes, range_, shape, gradient)
        zero, zero_grads = kernel.evaluate(self.xp.zeros(1), range_, shape, gradient)
        grads = {k: self.interpolate(v, float(zero_grads[k][0])) for k, v in node_grads.items()}
        return self.interpolate(nodes, float(zero[0])), grads
