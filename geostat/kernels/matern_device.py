"""The Matérn correlation with the operations of an array module only (NumPy or CuPy).

The device counterpart of :func:`geostat.kernels.matern._matern_fill`, for
:meth:`geostat.kernels.Kernel.device_correlation`. CuPy has no Bessel function of
general order, and none is needed: the CPU method already evaluates ``K_nu`` without
SciPy inside the loop. Everything that depends on ``nu`` only (the series coefficients,
the region thresholds, the quadrature nodes and weights) comes from the same cached host
computations (:func:`~geostat.kernels.matern._plan`,
:func:`~geostat.kernels.matern._quad_nodes`); per distance there are only elementwise
``exp``, ``log``, powers, sums and one matrix product, in the same regions as on the CPU:

* closed forms for ``nu`` in {0.5, 1.5, 2.5} (with NumPy standing in, equal to the CPU
  values bit for bit, as is the series);
* ``u <= u_series(nu)``: the small-argument series;
* ``u_series < u <= 1e5``: the trapezoidal rule, its weighted sums of exponentials as a
  matrix product (``weights @ exp(nodes x distances)``, in blocks of 128 MiB); the sums
  have positive terms, so only their order differs from the CPU's: a few ulp;
* ``u > 1e5``: ``M = 0``.

The regions are gathered with integer indices (``flatnonzero``), which costs a host
synchronization per region and quadrature band.
"""

import math

from geostat.kernels.matern import (
    _BAND_RATIO,
    _CLOSED_FORM_NU,
    _LOG2,
    _U_PRODUCT_MAX,
    _U_ZERO,
    _horner,
    _plan,
    _quad_nodes,
)

__all__ = ["matern_device_fill"]

# Entries of one block of exponentials (nodes x distances): 128 MiB.
_QUAD_BLOCK = 1 << 24


def matern_device_fill(u, nu, xp, derivatives):
    """``M``, ``u dM/du`` and ``dM/dnu`` of the Matérn family on scaled distances.

    Parameters
    ----------
    u : 1-D array of module `xp`
        Scaled distances (>= 0, finite).
    nu : float
        Smoothness.
    xp : module
    derivatives : tuple of str or None
        None for values only; ``("smoothness",)`` also gives ``dM/dnu``; ``()`` only
        ``u dM/du``.

    Returns
    -------
    m : array
    u_dm_du : array or None
    dshape : dict
        ``{"smoothness": dM/dnu}`` when asked for, else empty.
    """
    want_u = derivatives is not None
    want_nu = want_u and "smoothness" in derivatives
    if nu in _CLOSED_FORM_NU:
        m, u_dm_du = _closed_form(u, nu, xp, want_u)
        if not want_nu:
            return m, u_dm_du, {}
        _, _, dnu = _general(u, nu, xp, m, False, True)
        return m, u_dm_du, {"smoothness": dnu}
    m, u_dm_du, dnu = _general(u, nu, xp, None, want_u, want_nu)
    return m, u_dm_du, ({"smoothness": dnu} if want_nu else {})


def _closed_form(u, nu, xp, want_u):
    u = xp.minimum(u, _U_ZERO)  # keep u**2 finite; exp(-u) = 0 there anyway
    e = xp.exp(-u)
    if nu == 0.5:  # M = e^-u, u M' = -u e^-u
        return e, (-(u * e) if want_u else None)
    if nu == 1.5:  # M = (1 + u) e^-u, u M' = -u^2 e^-u
        return (u + 1.0) * e, (-((u * u) * e) if want_u else None)
    third = u * (1.0 / 3.0)  # M = (1 + u + u^2/3) e^-u, u M' = -(u^2/3)(1 + u) e^-u
    u_dm_du = -((((u + 1.0) * third) * u) * e) if want_u else None
    return ((third + 1.0) * u + 1.0) * e, u_dm_du


def _general(u, nu, xp, m_given, want_u, want_nu):
    """The series, quadrature and zero regions; `m_given` (closed forms) is kept as M.

    Each region returns None for what it does not compute, M included when given.
    """
    p = _plan(nu)
    m = xp.zeros_like(u) if m_given is None else m_given
    u_dm_du = xp.zeros_like(u) if want_u else None
    dnu = xp.zeros_like(u) if want_nu else None
    series = xp.flatnonzero(u <= p.u_series)
    quad = xp.flatnonzero((u > p.u_series) & (u <= _U_ZERO))
    for idx, region in ((series, _series), (quad, _quadrature)):
        if not idx.size:
            continue
        m_part = None if m_given is None else m_given[idx]
        values = region(u[idx], p, xp, m_part, want_u, want_nu)
        for out, value in zip((m, u_dm_du, dnu), values):
            if value is not None:
                out[idx] = value
    return m, u_dm_du, dnu


def _series(u, p, xp, m_given, want_u, want_nu):
    x = 0.25 * u * u
    m = _horner(p.coef, x, xp) if m_given is None else None
    u_dm_du = _horner(p.coef_u, x, xp) if want_u else None
    dnu = _horner(p.coef_nu, x, xp) if want_nu else None
    if p.b0:  # term -b0 (u/2)**(2 nu), kept for nu < 0.75; zero at u = 0
        positive = u > 0
        log_half_u = xp.log(xp.where(positive, u, 1.0)) - _LOG2
        y = xp.where(positive, xp.exp(2.0 * p.nu * log_half_u) * p.b0, 0.0)
        if m is not None:
            m = m - y
        if want_u:
            u_dm_du = u_dm_du - 2.0 * p.nu * y
        if want_nu:
            dnu = dnu - y * (p.db0 + 2.0 * log_half_u)
    return m, u_dm_du, dnu


def _quadrature(u, p, xp, m_given, want_u, want_nu):
    rows = [0] + ([1] if want_u else []) + ([2] if want_nu else [])
    scaled = dict(zip(rows, _scaled_bessel(u, p.nu, rows, xp)))
    # C u**nu exp(-u), in log space above _U_PRODUCT_MAX where exp(-u) would lose range
    small = xp.minimum(u, _U_PRODUCT_MAX)
    factor = ((small**p.nu) * xp.exp(-small)) * p.c
    factor = xp.where(u > _U_PRODUCT_MAX, xp.exp(p.log_c + p.nu * xp.log(u) - u), factor)
    m = xp.minimum(factor * scaled[0], 1.0) if m_given is None else m_given  # rounding could give 1 + 1e-15
    u_dm_du = -((factor * scaled[1]) * u) if want_u else None
    # d log M / dnu = log(u/2) - psi(nu) + (dK/dnu) / K
    dnu = (((scaled[2] / scaled[0]) + xp.log(0.5 * u)) - p.psi) * m if want_nu else None
    return (m if m_given is None else None), u_dm_du, dnu


def _scaled_bessel(u, nu, rows, xp):
    """``exp(u) * [K_nu(u), K_{nu-1}(u), dK_nu(u)/dnu][rows]`` for ``u_series < u <= 1e5``.

    Band by band (the bands and nodes of the CPU path), the exponentials of a block of
    distances at all nodes are formed at once and summed by one matrix product: on a GPU
    this is about a third of the memory traffic, and far fewer kernel launches, than
    summing node by node.
    """
    band = xp.ceil(xp.log(_U_ZERO / u) * (1.0 / math.log(_BAND_RATIO))).astype(xp.int64)
    out = xp.empty((len(rows), u.size))
    for b in range(int(band.min()), int(band.max()) + 1):
        idx = xp.flatnonzero(band == b)
        if not idx.size:
            continue
        neg_c, weights, lowest = _quad_nodes(nu, b)
        nodes, weights = xp.asarray(neg_c)[:, None], xp.asarray(weights[rows])
        step = max(64, _QUAD_BLOCK // neg_c.size)
        for start in range(0, idx.size, step):
            part = idx[start:start + step]
            expo = nodes * u[part][None, :]
            if lowest < -700.0:  # avoid the slow underflow path of exp, as on the CPU
                xp.maximum(expo, -745.0, out=expo)
            xp.exp(expo, out=expo)
            out[:, part] = weights @ expo
    return [out[j] for j in range(len(rows))]
