"""Type aliases of the inputs and outputs of geostat's public functions.

They only annotate (``py.typed`` ships with the package and ``tests/test_typing.py`` runs
mypy on the public modules): no function looks at them at run time. xarray is optional and
is never imported here at run time: to a type checker that has it, :data:`XarrayObject` is
``xarray.DataArray | xarray.Dataset``; at run time it is ``typing.Any``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "Device",
    "FieldOutput",
    "FloatArray",
    "Method",
    "Observations",
    "OnFailure",
    "Ordering",
    "Params",
    "Seed",
    "SitesLike",
    "SitesOrField",
    "TableOutput",
    "TrendSpec",
    "XarrayDataArray",
    "XarrayDataset",
    "XarrayObject",
]

if TYPE_CHECKING:
    import xarray as xr

    XarrayDataArray: TypeAlias = xr.DataArray
    XarrayDataset: TypeAlias = xr.Dataset
    XarrayObject: TypeAlias = xr.DataArray | xr.Dataset
else:
    XarrayDataArray = XarrayDataset = XarrayObject = Any

#: A float64 NumPy array.
FloatArray: TypeAlias = NDArray[np.float64]
#: Sites as a table: an ``(n, d)`` array (or nested sequence) or a DataFrame whose columns
#: are the coordinates (and trend covariates).
SitesLike: TypeAlias = ArrayLike | pd.DataFrame
#: Sites, or a field: an xarray ``DataArray`` or ``Dataset`` (see :meth:`geostat.SpatialGP.fit`).
SitesOrField: TypeAlias = ArrayLike | pd.DataFrame | XarrayObject
#: Observations ``(n,)`` or ``(n, r)``: an array, a Series or a DataFrame of replicates.
Observations: TypeAlias = ArrayLike | pd.Series | pd.DataFrame
#: Covariance parameters by name (``variance``, ``range``, ``nugget``, shape parameters).
Params: TypeAlias = Mapping[str, float]
#: What seeds a NumPy ``Generator``: None (fresh entropy), a non-negative integer, a
#: ``Generator`` or a legacy ``RandomState``.
Seed: TypeAlias = int | np.integer | np.random.Generator | np.random.RandomState | None
#: The trend: None, ``"none"``, ``"constant"``, ``"linear"``, or the covariate columns of ``X``.
TrendSpec: TypeAlias = str | Sequence[Hashable] | pd.Index | NDArray[Any] | None
#: How the likelihood is evaluated.
Method: TypeAlias = Literal["auto", "exact", "tlr"]
#: The site ordering of the TLR method.
Ordering: TypeAlias = Literal["kdtree", "morton", "none"]
#: Where the likelihood is evaluated.
Device: TypeAlias = Literal["cpu", "gpu"]
#: What a covariance that is not numerically positive definite does during a fit.
OnFailure: TypeAlias = Literal["shift", "compensate", "step", "raise"]
#: A prediction for a DataFrame of sites: a Series (one replicate) or a DataFrame.
TableOutput: TypeAlias = pd.Series | pd.DataFrame
#: A prediction on an xarray template.
FieldOutput: TypeAlias = XarrayDataArray
