"""Matérn correlation family [1]_.

``M(u) = 2**(1 - nu) / Gamma(nu) * u**nu * K_nu(u)``, ``u = d / range``, ``M(0) = 1``,
``K_nu`` the modified Bessel function of the second kind, ``nu`` the smoothness.

``nu`` in {0.5, 1.5, 2.5} uses the closed forms. Otherwise the scaled distances are
split by thresholds that depend on ``nu`` only (so chunked evaluation is bitwise
identical):

* ``u <= u_series(nu)`` (including 0): with ``x = u**2 / 4``, the series
  ``M = sum_k a_k x**k - Gamma(1 - nu) x**nu sum_k x**k / (k! Gamma(k + nu + 1))``,
  ``a_k = 1 / (k! (1 - nu)(2 - nu)...(k - nu))``, kept for ``k <= K <= nu - 1`` (and the
  term ``-b0 (u/2)**(2 nu)``, ``b0 = Gamma(1 - nu) / Gamma(1 + nu)``, for
  ``nu < 0.75``). The neglected terms are bounded by ``3 c x**p (|log x| + 3)**2``;
  ``u_series`` is where that bound reaches ``1e-17``.
* ``u_series < u <= 1e5``: the trapezoidal rule on
  ``K_nu(u) = int_0^inf exp(-u cosh t) cosh(nu t) dt`` and
  ``dK_nu/dnu = int_0^inf exp(-u cosh t) t sinh(nu t) dt``, analytic in the strip
  ``|Im t| < pi/2``, with step and truncation from the strip error bound (target
  relative error 1e-19) in bands ``u in (4**-b 1e5, 4**(1-b) 1e5]``. The sums have
  positive terms: relative error a few ulp. ``M = C u**nu exp(-u) S_nu``
  (``C = 2**(1-nu)/Gamma(nu)``), in log form for ``u > 600``, clipped to 1.
* ``u > 1e5``: ``M = 0`` (it underflows for every accepted ``nu``).

Derivatives: ``u dM/du = -C u**(nu+1) K_{nu-1}(u)`` and
``dM/dnu = M (log(u/2) - psi(nu) + (dK_nu/dnu) / K_nu)``, relative error about 1e-13
(absolute 1e-16 as ``u -> 0``).

References
----------
.. [1] Stein, M. L. (1999). Interpolation of Spatial Data: Some Theory for Kriging.
   Springer.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
from scipy import special

from geostat.kernels._base import Kernel

__all__ = ["Matern", "SMOOTHNESS_MAX"]

#: Largest accepted smoothness.
SMOOTHNESS_MAX = 100.0
# Absolute truncation tolerance of the small-argument series (M is ~1 there).
_SERIES_TOL = 1e-17
# Most terms of the series sum_k a_k x**k.
_SERIES_KMAX = 12
# The series is used at least up to here (x = u**2/4 underflows below ~1e-154).
_U_SERIES_MIN = 1e-150
# The scaled integral must stay below exp(_LOG_BIG): below that, use the series.
_LOG_BIG = 650.0
# Above this u, u**nu exp(-u) is formed in log space.
_U_PRODUCT_MAX = 600.0
# Above this u, M underflows for every accepted nu.
_U_ZERO = 1e5
# Quadrature bands (u_zero / ratio**b, u_zero / ratio**(b-1)].
_BAND_RATIO = 4.0
# -log of the target relative error of the quadrature.
_QUAD_LOG_TOL = 43.0
# Entries of one block of exponentials (nodes x distances).
_QUAD_BLOCK = 1 << 19
_LOG2 = math.log(2.0)

_CLOSED_FORM_NU = (0.5, 1.5, 2.5)


class _Plan(NamedTuple):
    """Scalars that depend on nu only."""

    nu: float
    c: float  # 2**(1-nu) / Gamma(nu)
    log_c: float
    psi: float  # digamma(nu)
    u_series: float
    coef: tuple  # a_k, k = 0..K
    coef_u: tuple  # 2 k a_k   (series of u dM/du)
    coef_nu: tuple  # d a_k / dnu
    b0: float  # Gamma(1-nu)/Gamma(1+nu) if the x**nu term is kept, else 0
    db0: float  # d log b0 / dnu


@functools.lru_cache(maxsize=64)
def _plan(nu):
    # Terms a_k x**k, k <= K, and the bound scale * x**power on what is left out.
    if nu < 0.75:
        n_terms = 1
    elif nu < _SERIES_KMAX + 2:
        n_terms = max(0, math.floor(nu) - 1)
    else:
        n_terms = _SERIES_KMAX
    coef, coef_nu = [1.0], [0.0]
    slope = 0.0  # sum_{j<=k} 1 / (j - nu) = d log a_k / dnu
    for k in range(1, n_terms + 1):
        coef.append(coef[-1] / (k * (k - nu)))
        slope += 1.0 / (k - nu)
        coef_nu.append(coef[-1] * slope)
    k_next = n_terms + 1
    b0 = db0 = 0.0
    if nu < 0.75:
        b0 = math.gamma(1.0 - nu) / math.gamma(1.0 + nu)
        db0 = -special.digamma(1.0 - nu) - special.digamma(1.0 + nu)
        a_next = coef[-1] / (k_next * (k_next - nu))
        power, scale = 1.0 + nu, 3.0 * (abs(a_next) + b0 / (1.0 + nu))
    elif nu < 1.0:
        power, scale = nu, 3.0 * max(1.0, math.gamma(2.0 - nu) / math.gamma(1.0 + nu))
    elif nu < _SERIES_KMAX + 2:
        n = math.floor(nu)
        power, scale = n, 3.0 / (math.factorial(n) * math.factorial(n - 1))
    else:  # nu >= k_next + 1: a_next has no pole
        a_next = coef[-1] / (k_next * (k_next - nu))
        power, scale = k_next, 3.0 * abs(a_next)
    # Solve scale * x**power * (|log x| + 3)**2 = tol for log x (fixed point).
    log_x = 0.0
    for _ in range(6):
        log_x = (math.log(_SERIES_TOL / scale) - 2.0 * math.log(abs(log_x) + 3.0)) / power
    log_x = min(log_x, 0.0)
    u_series = 2.0 * math.exp(0.5 * log_x)
    # Below u_series the integrals are not evaluated: cover the arguments where
    # K_nu(u) ~ Gamma(nu) 2**(nu-1) u**-nu would exceed exp(_LOG_BIG).
    log_u_overflow = (math.lgamma(nu) + (nu - 1.0) * _LOG2 - _LOG_BIG) / nu
    u_series = max(u_series, math.exp(log_u_overflow), _U_SERIES_MIN)
    return _Plan(
        nu=nu,
        c=2.0 ** (1.0 - nu) / math.gamma(nu),
        log_c=(1.0 - nu) * _LOG2 - math.lgamma(nu),
        psi=float(special.digamma(nu)),
        u_series=u_series,
        coef=tuple(coef),
        coef_u=tuple(2.0 * k * a for k, a in enumerate(coef)),
        coef_nu=tuple(coef_nu),
        b0=b0,
        db0=float(db0),
    )


@functools.lru_cache(maxsize=512)
def _quad_nodes(nu, band):
    """Trapezoidal nodes for ``u`` in band ``band``.

    Returns ``neg_c`` (``-(cosh t_k - 1)``), the weight matrix ``w`` with rows for
    ``K_nu``, ``K_{nu-1}`` and ``dK_nu/dnu`` (all scaled by ``exp(u)``), and the most
    negative exponent ``u_hi * neg_c[-1]``.
    """
    u_hi = _U_ZERO * _BAND_RATIO ** (1 - band)
    u_lo = max(_U_ZERO * _BAND_RATIO**-band, _plan(nu).u_series)
    order = max(nu, abs(nu - 1.0), 0.5)
    # Relative error target, counting that K_nu(u) e^u can be as small as ~sqrt(pi/2u).
    log_tol = _QUAD_LOG_TOL + max(0.0, 0.5 * math.log(2.0 * u_hi / math.pi))
    # Step: the error of the rule is about exp(-2 pi d / h) * K_nu(u cos d) / K_nu(u)
    # <= exp(-2 pi d / h + u (1 - cos d) - order log cos d) for 0 < d < pi/2.
    d = np.linspace(0.02, 1.5, 75)
    h = 0.9 * float(
        np.max(2.0 * np.pi * d / (log_tol + u_hi * (1.0 - np.cos(d)) - order * np.log(np.cos(d))))
    )
    # Truncation at T: u_lo (cosh T - 1) - order T >= log_tol + log(T / h) (margin 8).
    target = log_tol + max(0.0, -math.log(h)) + 8.0

    def excess(t):
        return u_lo * (math.cosh(t) - 1.0) - order * t - target

    low, high = 0.0, 1.0
    while excess(high) < 0.0:
        high *= 2.0
    for _ in range(60):
        mid = 0.5 * (low + high)
        if excess(mid) < 0.0:
            low = mid
        else:
            high = mid
    t = np.arange(int(math.ceil(high / h)) + 1) * h
    w = np.full(t.size, h)
    w[0] *= 0.5
    weights = np.stack([w * np.cosh(nu * t), w * np.cosh((nu - 1.0) * t), w * t * np.sinh(nu * t)])
    neg_c = -2.0 * np.sinh(0.5 * t) ** 2
    return neg_c, weights, u_hi * neg_c[-1]


def _scaled_bessel(u, nu, rows, xp):
    """``exp(u) * [K_nu(u), K_{nu-1}(u), dK_nu(u)/dnu][rows]`` for ``u_series < u <= 1e5``."""
    out = xp.empty((len(rows), u.size))
    band = xp.ceil(xp.log(_U_ZERO / u) * (1.0 / math.log(_BAND_RATIO))).astype(xp.int64)
    for b in range(int(band.min()), int(band.max()) + 1) if u.size else ():
        idx = xp.flatnonzero(band == b)
        if not idx.size:
            continue
        neg_c, weights, lowest = _quad_nodes(nu, b)
        nodes, weights = xp.asarray(neg_c)[:, None], xp.asarray(weights[rows])
        step = max(64, _QUAD_BLOCK // neg_c.size)
        for start in range(0, idx.size, step):
            part = idx[start : start + step]
            expo = nodes * u[part][None, :]
            if lowest < -700.0:  # avoid the slow underflow path of exp
                xp.maximum(expo, -745.0, out=expo)
            xp.exp(expo, out=expo)
            out[:, part] = _weighted_sum(weights, expo, xp)
    return [out[j] for j in range(len(rows))]


def _weighted_sum(weights, expo, xp):
    """``weights @ expo`` summed node by node with separately rounded operations.

    Unlike BLAS or einsum, whose rounding depends on the position of a column in the
    block, every entry gets the same operations, so chunked evaluation is bitwise
    identical to unchunked evaluation.
    """
    acc = weights[:, :1] * expo[0]
    term = xp.empty_like(acc)
    for k in range(1, expo.shape[0]):
        xp.multiply(weights[:, k : k + 1], expo[k], out=term)
        acc += term
    return acc


def _horner(coef, x, xp):
    out = xp.full_like(x, coef[-1])
    for a in coef[-2::-1]:
        out *= x
        out += a
    return out


def _closed_form(u, nu, xp, want_u):
    """``M`` and ``u dM/du`` (None unless `want_u`) at nu = 0.5, 1.5, 2.5 (in place where
    possible: these are the kernels of every TLR tile). Each product takes ``e^-u`` before
    its second power of ``u``, so a far distance gives 0 (``e^-u`` underflows), never
    ``inf * 0``, with no pass over `u` to clip it (on a GPU, no read of its maximum)."""
    e = xp.exp(-u)
    u_dm_du = None
    if nu == 0.5:  # M = e^-u, u M' = -u e^-u
        if want_u:
            u_dm_du = xp.multiply(u, e)
            xp.negative(u_dm_du, out=u_dm_du)
        return e, u_dm_du
    if nu == 1.5:  # M = (1 + u) e^-u, u M' = -u^2 e^-u
        if want_u:
            u_dm_du = xp.multiply(u, e)
            u_dm_du *= u
            xp.negative(u_dm_du, out=u_dm_du)
        m = xp.add(u, 1.0)
        m *= e
        return m, u_dm_du
    m = xp.multiply(u, 1.0 / 3.0)  # M = (1 + u + u^2/3) e^-u, u M' = -(u^2/3)(1 + u) e^-u
    if want_u:
        u_dm_du = xp.add(u, 1.0)
        u_dm_du *= e
        u_dm_du *= m
        u_dm_du *= u
        xp.negative(u_dm_du, out=u_dm_du)
    m += 1.0
    m *= e
    m *= u
    m += e  # e + u (1 + u/3) e
    return m, u_dm_du


def _series(u, p, xp, m_given, want_u, want_nu):
    """The small-argument series: ``(M or None when given, u dM/du, dM/dnu)``."""
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
    """The quadrature region: ``(M or None when given, u dM/du, dM/dnu)``."""
    rows = [0] + ([1] if want_u else []) + ([2] if want_nu else [])
    scaled = dict(zip(rows, _scaled_bessel(u, p.nu, rows, xp), strict=True))
    # C u**nu exp(-u), in log space above _U_PRODUCT_MAX where exp(-u) would lose range
    small = xp.minimum(u, _U_PRODUCT_MAX)
    factor = ((small**p.nu) * xp.exp(-small)) * p.c
    factor = xp.where(u > _U_PRODUCT_MAX, xp.exp(p.log_c + p.nu * xp.log(u) - u), factor)
    # rounding could give 1 + 1e-15
    m = xp.minimum(factor * scaled[0], 1.0) if m_given is None else m_given
    u_dm_du = -((factor * scaled[1]) * u) if want_u else None
    # d log M / dnu = log(u/2) - psi(nu) + (dK/dnu) / K
    dnu = (((scaled[2] / scaled[0]) + xp.log(0.5 * u)) - p.psi) * m if want_nu else None
    return (m if m_given is None else None), u_dm_du, dnu


def _general(u, nu, xp, m_given, want_u, want_nu):
    """The series, quadrature and zero regions; `m_given` (closed forms) is kept as M."""
    p = _plan(nu)
    series = u <= p.u_series
    zero = u > _U_ZERO
    if not (bool(series.any()) or bool(zero.any())):  # all in the quadrature: no gathers
        m, u_dm_du, dnu = _quadrature(u, p, xp, m_given, want_u, want_nu)
        return (m_given if m is None else m), u_dm_du, dnu
    m = xp.zeros_like(u) if m_given is None else m_given
    u_dm_du = xp.zeros_like(u) if want_u else None
    dnu = xp.zeros_like(u) if want_nu else None
    quad = xp.flatnonzero(~(series | zero))
    for idx, region in ((xp.flatnonzero(series), _series), (quad, _quadrature)):
        if not idx.size:
            continue
        m_part = None if m_given is None else m_given[idx]
        values = region(u[idx], p, xp, m_part, want_u, want_nu)
        for out, value in zip((m, u_dm_du, dnu), values, strict=True):
            if value is not None:
                out[idx] = value
    return m, u_dm_du, dnu


def matern_formula(u, nu, xp, derivatives):
    """``M``, ``u dM/du`` and ``dM/dnu`` of the Matérn family on scaled distances.

    `u` is a finite, non-negative 1-D array of module `xp`. `derivatives`: None for
    values only, ``()`` for ``u dM/du`` too, ``("smoothness",)`` also for ``dM/dnu``.
    Returns ``(m, u_dm_du or None, {"smoothness": dM/dnu} or {})``.
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


class Matern(Kernel):
    """Matérn correlation ``M(u) = 2**(1-nu)/Gamma(nu) * u**nu * K_nu(u)``, ``u = d/range``.

    The parameterization of ExaGeoStat [1]_: the range divides the distance directly.
    scikit-learn's ``Matern(length_scale=l, nu=nu)`` equals this kernel with
    ``range = l / sqrt(2 * nu)``.

    Parameters
    ----------
    smoothness : float or None, default None
        Smoothness ``nu`` in ``(0, 100]``; ``None`` marks it as free (estimated).
        ``0.5`` is the exponential kernel; ``0.5``, ``1.5`` and ``2.5`` use closed
        forms.
    bounds : dict, optional
        Estimation bounds ``{"smoothness": (low, high)}``; default ``(0.05, 10.0)``.

    Notes
    -----
    Relative error about 1e-14 for ``M``; the derivative in the smoothness is analytic
    (:mod:`geostat.kernels.matern`).

    References
    ----------
    .. [1] Abdulah, S., Ltaief, H., Sun, Y., Genton, M. G., Keyes, D. E. (2018).
       ExaGeoStat: A high performance unified software for geostatistics on manycore
       systems. IEEE Transactions on Parallel and Distributed Systems, 29(12).
    """

    name = "matern"
    _SHAPE_NAMES = ("smoothness",)
    _SHAPE_DOMAIN = {"smoothness": (0.0, SMOOTHNESS_MAX, True)}
    _DEFAULT_BOUNDS = {"smoothness": (0.05, 10.0)}
    _DEFAULT_START = {"smoothness": 1.0}

    def __init__(
        self, smoothness: float | None = None, bounds: dict[str, tuple[float, float]] | None = None
    ) -> None:
        super().__init__({"smoothness": smoothness}, bounds)

    def great_circle_valid_at(self, shape: Mapping[str, float | None]) -> bool:
        """bool: True only for a smoothness <= 0.5."""
        nu = shape.get("smoothness")
        return nu is not None and nu <= 0.5

    @property
    def costly(self) -> bool:
        """bool: True unless the smoothness is fixed at a closed-form value (0.5, 1.5, 2.5)."""
        return self._shape["smoothness"] not in _CLOSED_FORM_NU

    def _formula(self, u, shape, xp, derivatives):
        return matern_formula(u, shape["smoothness"], xp, derivatives)
