"""Exponential correlation ``M(u) = exp(-u)``: the Matérn kernel with smoothness 0.5."""

from __future__ import annotations

from collections.abc import Mapping

from geostat.kernels._base import Kernel

__all__ = ["Exponential"]


class Exponential(Kernel):
    """Exponential correlation ``M(u) = exp(-u)``, ``u = d / range``.

    Identical to ``Matern(smoothness=0.5)``; its smoothness is fixed at 0.5 and is
    never estimated. Positive definite with great-circle distance on the sphere.
    """

    name = "exponential"
    _SHAPE_NAMES = ("smoothness",)
    _SHAPE_DOMAIN = {"smoothness": (0.0, float("inf"), False)}
    _DEFAULT_BOUNDS = {"smoothness": (0.05, 10.0)}
    _DEFAULT_START = {"smoothness": 1.0}

    def __init__(self) -> None:
        super().__init__({"smoothness": 0.5})

    @classmethod
    def _check_shape_value(cls, key, value, argname=None):
        value = super()._check_shape_value(key, value, argname)
        if value != 0.5:
            raise ValueError(
                f"Exponential has smoothness fixed at 0.5, got {value!r}; "
                "use Matern(smoothness=...) for other values."
            )
        return value

    def _check_bounds(self, bounds):
        return {"smoothness": self._DEFAULT_BOUNDS["smoothness"]}

    def great_circle_valid_at(self, shape: Mapping[str, float | None]) -> bool:
        """bool: Always True."""
        return True

    def _repr_args(self):
        return []

    def _formula(self, u, shape, xp, derivatives):
        m = xp.exp(xp.negative(u))
        if derivatives is None:
            return m, None, {}
        u_dm_du = xp.multiply(u, m)  # u dM/du = -u exp(-u)
        xp.negative(u_dm_du, out=u_dm_du)
        return m, u_dm_du, {}
