"""Shared helpers of the property-based tests.

``call_checked`` runs one public call under the contract of ``docs/errors.md``: it returns
the result (and the warnings it gave) or ``None`` when the call raised an acceptable
exception; anything else fails the test with the reason. ``check_finite`` checks a result
is finite and of the right shape, or non-finite only with a warning. ``snapshot`` and
``assert_unchanged`` check that no input was modified.

Acceptable exceptions are the documented ones: ``ValueError``/``TypeError`` whose message
names an argument (or column) of the call and is not a NumPy message passed through;
``MemoryError`` naming the memory needed; ``NotPositiveDefiniteError`` with ``.tile``;
``FactorizationError``; ``GeneratorError`` naming the tile.
"""

from __future__ import annotations

import copy
import os
import re
import traceback
import warnings

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, event
from hypothesis.control import currently_in_test_context

import tlrcore

#: Settings of every property test: derandomized (the same examples on every machine and
#: run, as CI needs), no example database, no deadline (run times vary between machines).
PROPERTY_SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)

#: Folders of the two packages; an exception raised from code outside them (NumPy, SciPy,
#: pandas, scikit-learn, the standard library) was not checked and named by us.
_OUR_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (tlrcore, __import__("geostat")))

#: scikit-learn's input validation, which SpatialGP calls on purpose (its messages are held
#: to the same standard: they must name the argument).
_VALIDATORS = (os.path.join("sklearn", "utils", "validation.py"),)

#: Messages NumPy, SciPy or pandas give for input they cannot use.
RAW_MESSAGES = (
    "could not convert string to float",
    "setting an array element with a sequence",
    "zero-size array to reduction operation",
    "operands could not be broadcast",
    "mismatch in its core dimension",
    "inhomogeneous shape",
    "cannot be used to seed",
    "Eigenvalues did not converge",
    "SVD did not converge",
    "array must not contain infs or NaNs",
    "invalid literal for",
    "unsupported operand type",
    "object arrays are not supported",
    "Cannot cast",
    "can't multiply sequence",
    "not supported between instances",
    "ufunc",
)


def _innermost_file(exc):
    frames = traceback.extract_tb(exc.__traceback__)
    return frames[-1].filename if frames else ""


def _names_one_of(message, names):
    return any(
        re.search(rf"(?<![A-Za-z0-9_]){re.escape(str(name))}(?![A-Za-z0-9_])", message)
        for name in names
    )


def classify(exc, names):
    """``None`` if `exc` is an acceptable failure of a call with arguments `names`,
    else a sentence saying why not."""
    message = str(exc)
    kind = f"{type(exc).__module__}.{type(exc).__qualname__}: {message[:300]}"
    if isinstance(exc, tlrcore.NotPositiveDefiniteError):
        return None if exc.tile is not None else f"NotPositiveDefiniteError without .tile ({kind})"
    if isinstance(exc, tlrcore.FactorizationError):
        return None
    if isinstance(exc, np.linalg.LinAlgError):
        return f"raw LinAlgError, not one of tlrcore's ({kind})"
    if isinstance(exc, MemoryError):
        return None if "GiB" in message else f"MemoryError without the memory needed ({kind})"
    if isinstance(exc, tlrcore.GeneratorError):
        return None if "tile" in message else f"GeneratorError not naming the tile ({kind})"
    if isinstance(exc, (ValueError, TypeError)):
        origin = _innermost_file(exc)
        if not origin.startswith(_OUR_DIRS) and not origin.endswith(_VALIDATORS):
            return f"raised outside geostat/tlrcore, at {origin} ({kind})"
        raw = [m for m in RAW_MESSAGES if m.lower() in message.lower()]
        if raw:
            return f"NumPy message passed through ({kind})"
        if not _names_one_of(message, names):
            return f"message names none of {sorted(map(str, names))} ({kind})"
        return None
    return f"undocumented exception type ({kind})"


def call_checked(func, *args, names, **kwargs):
    """Run ``func(*args, **kwargs)``; return ``(result, warnings)`` or ``None`` when it
    raised an acceptable exception (see :func:`classify`); fail the test otherwise.

    RuntimeWarnings from geostat or tlrcore (NumPy's "invalid value", "overflow", ...)
    count as errors, as in the project's pytest settings."""
    result, caught, exc = call_checked_exc(func, *args, names=names, **kwargs)
    return None if exc is not None else (result, caught)


def call_checked_exc(func, *args, names, **kwargs):
    """As :func:`call_checked`, returning ``(result, warnings, exception)``; the
    exception (acceptable, or the test has failed) is None when the call returned."""
    what = getattr(func, "__qualname__", str(func))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("error", category=RuntimeWarning, module=r"(geostat|tlrcore)(\.|$)")
        try:
            result = func(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - classified below
            record(f"{what}: {type(exc).__name__}")
            reason = classify(exc, names)
            if reason is not None:
                raise AssertionError(f"{what}: {reason}") from exc
            return None, list(caught), exc
    record(f"{what}: returned")
    return result, list(caught), None


def record(text):
    """Count outcomes in ``--hypothesis-show-statistics`` (inside a Hypothesis test only)."""
    if currently_in_test_context():
        event(text)


def warned(caught):
    """Whether a user-facing warning (a ``UserWarning``, e.g. GeostatWarning) was given."""
    return any(issubclass(w.category, UserWarning) for w in caught)


def check_finite(value, shape, caught, what):
    """`value` has `shape` and is finite, or non-finite only with a user-facing warning."""
    array = np.asarray(value, dtype=np.float64) if not isinstance(value, np.ndarray) else value
    assert array.shape == tuple(shape), f"{what}: shape {array.shape}, expected {tuple(shape)}"
    if not np.isfinite(array).all():
        assert warned(caught), f"{what}: non-finite values without a warning: {array.ravel()[:8]}"


# ---------------------------------------------------------------- inputs not modified
def snapshot(value):
    """A deep copy of an input, to compare with it after the call."""
    if isinstance(value, (pd.DataFrame, pd.Series)):
        return value.copy(deep=True)
    if isinstance(value, np.random.Generator | np.random.RandomState):
        return None  # drawing from a generator advances it: that is its purpose
    return copy.deepcopy(value)


def same(a, b):
    """Equality of inputs, NaN equal to NaN, dtypes and types included."""
    if isinstance(a, np.random.Generator | np.random.RandomState):
        return True  # drawing from a generator advances it: that is its purpose
    if type(a) is not type(b):
        return False
    if isinstance(a, pd.DataFrame | pd.Series):
        compare = (
            pd.testing.assert_frame_equal
            if isinstance(a, pd.DataFrame)
            else pd.testing.assert_series_equal
        )
        try:
            compare(a, b, check_exact=True)
        except AssertionError:
            return False
        return True
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype == object:
            return all(same(x, y) for x, y in zip(a.ravel(), b.ravel(), strict=True))
        return a.tobytes() == b.tobytes()
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (float, np.floating)) and np.isnan(a):
        return bool(np.isnan(b))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - objects without a usable ==
        return a is b


def assert_unchanged(before, after, what):
    """Fail if an input changed during the call."""
    assert same(after, before), f"{what} was modified by the call"


# ---------------------------------------------------------------- TLR log-likelihood error scale
def tlr_loglik_error_scale(X, Y, F, kernel, params, accuracy, reml=False, distance=None):
    """Size of the error a TLR evaluation at `accuracy` makes in a Gaussian log-likelihood.

    To first order the log-likelihood moves by ``tr(G E)`` when the covariance ``C`` of a
    missing-data group is replaced by ``L L^T = C + E``, with ``G = (w w^T - C^-1) / 2``
    (``w = C^-1 r``, ``r`` the GLS residual; envelope theorem for the profiled trend),
    plus ``C^-1 F (F^T C^-1 F)^-1 F^T C^-1 / 2`` for REML. The accuracy contract bounds
    ``||E||_F <= 2 accuracy ||C||_F`` (compression, then one tile tolerance per updated
    tile in the factorization). Cauchy-Schwarz, ``|tr(G E)| <= ||G||_F ||E||_F``, is
    rigorous but 10^4 times the errors seen; the compression residuals are not aligned
    with ``G``, and for ``E`` of that norm in a random direction ``tr(G E)`` has standard
    deviation ``sqrt(2) ||G||_F ||E||_F / n``. That is returned, summed over the groups
    (replicates with their own missing sites): assert a few times it.

    Euclidean distances unless `distance` (a ``geostat.distance.Distance``, such as the
    space-time one of a lag kernel) is given; `kernel` a geostat kernel, `params` in the
    convention of ``gs.log_likelihood``; ``Y`` of shape (n, r) with NaN for missing values.
    """
    import scipy.linalg

    from geostat.covariance import cross_correlation
    from geostat.distance import EUCLIDEAN

    theta = {k: params[k] for k in ("range", *kernel.shape_names) if k in params}
    C = params["variance"] * cross_correlation(kernel, distance or EUCLIDEAN, theta, X, X)
    C[np.diag_indices_from(C)] = params["variance"] + params.get("nugget", 0.0)
    total = 0.0
    for y in np.asarray(Y, dtype=float).reshape(len(X), -1).T:
        seen = ~np.isnan(y)
        Cg, Fg, yg = C[np.ix_(seen, seen)], F[seen], y[seen]
        factor = scipy.linalg.cho_factor(Cg, lower=True)
        Ci = scipy.linalg.cho_solve(factor, np.eye(len(yg)))
        CiF = Ci @ Fg
        M = Fg.T @ CiF
        w = Ci @ (yg - Fg @ np.linalg.solve(M, CiF.T @ yg)) if Fg.shape[1] else Ci @ yg
        G = 0.5 * (np.outer(w, w) - Ci)
        if reml and Fg.shape[1]:
            G += 0.5 * CiF @ np.linalg.solve(M, CiF.T)
        total += np.sqrt(2) * np.linalg.norm(G) * 2 * accuracy * np.linalg.norm(Cg) / len(yg)
    return total
