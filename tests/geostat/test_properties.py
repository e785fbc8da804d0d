"""Property-based tests of the public geostat API.

Random shapes, dtypes, containers, NaN patterns, duplicate sites and parameter values go
into ``gs.log_likelihood``, ``gs.simulate`` and ``SpatialGP``. Every call must give a
finite result of the right shape (non-finite only with a warning) or a documented
exception naming the argument (``docs/errors.md``; see ``tests/strategies.py``), and must
leave its inputs as they were. Where the inputs are clean the value is also checked: the
log-likelihood against a direct NumPy evaluation, a fit against ``log_likelihood`` at its
estimate. Most generated inputs are bad ones that fail fast; the search is derandomized
(same examples on every run and machine) and bounded.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import (
    PROPERTY_SETTINGS,
    assert_unchanged,
    call_checked,
    check_finite,
    record,
    snapshot,
)

import geostat as gs

EPS = np.finfo(np.float64).eps
SHAPES = {
    "exponential": {},
    "matern": {"smoothness": 1.5},
    "gaussian": {},
    "powered_exponential": {"power": 1.5},
}
LL_ARGS = (
    "X",
    "y",
    "params",
    "kernel",
    "trend",
    "distance",
    "method",
    "accuracy",
    "tile_size",
    "ordering",
    "reml",
)
SIM_ARGS = (
    "X",
    "params",
    "kernel",
    "n_samples",
    "random_state",
    "distance",
    "method",
    "accuracy",
    "tile_size",
    "ordering",
)
FIT_ARGS = (
    "X",
    "y",
    "kernel",
    "smoothness",
    "nugget",
    "trend",
    "distance",
    "method",
    "accuracy",
    "tile_size",
    "ordering",
    "random_state",
    "n_starts",
)
PARAM_KEYS = ("variance", "range", "nugget", "smoothness", "power")


# ---------------------------------------------------------------- strategies
def pick(draw, good, bad, allow_bad, label=None):
    """One of `good`, or of `good + bad` when this argument may be bad."""
    return draw(st.sampled_from(good + bad if allow_bad else good), label=label)


@st.composite
def site_tables(draw, bad=True):
    """``X`` in some container and dtype, with its column names and a covariate key."""
    n = draw(st.one_of(st.integers(0, 40), st.integers(6, 30)) if bad else st.integers(4, 40))
    d = pick(draw, [2, 2, 2, 1, 3], [0], bad)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    layout = pick(
        draw,
        ["uniform"] * 5 + ["lonlat"] * 2 + ["duplicate", "near_duplicate", "integer_grid"],
        ["one_place", "nan", "inf", "huge", "tiny_spread", "ragged"],
        bad,
    )
    coords = rng.uniform(size=(n, d))
    lonlat = layout == "lonlat" and d == 2
    if lonlat:
        coords = np.column_stack([rng.uniform(-120, -70, n), rng.uniform(25, 50, n)])
    elif layout == "integer_grid":
        coords = rng.integers(0, 4, size=(n, d)).astype(float)
    elif layout == "one_place":
        coords[:] = 0.5
    elif layout == "huge":
        coords *= 1e200
    elif layout == "tiny_spread":
        coords *= 1e-200
    if n >= 2 and d and layout == "duplicate":
        coords[-1] = coords[0]
    if n >= 2 and d and layout == "near_duplicate":
        coords[-1] = coords[0] + 1e-12
    if n and d and layout in ("nan", "inf"):
        coords[rng.integers(n), rng.integers(d)] = np.nan if layout == "nan" else np.inf
    dtype = pick(
        draw, ["float64"] * 8 + ["float32", "int", "object"], ["bool", "object_str", "complex"], bad
    )
    values = {
        "float64": coords,
        "float32": coords.astype(np.float32),
        "int": np.round(coords * 10).astype(int),
        "bool": coords > 0.5,
        "object": coords.astype(object),
        "object_str": coords.astype(object),
        "complex": coords + (1j if draw(st.booleans()) else 0j),
    }[dtype]
    if dtype == "object_str" and values.size:
        values[0, 0] = "a"
    names = (
        (["lon", "lat"] if draw(st.booleans()) else ["Longitude", "Latitude"])
        if lonlat
        else [f"x{i}" for i in range(d)]
    )
    covariate = draw(st.booleans()) and n > 0
    string_column = bad and draw(st.integers(0, 4)) == 0
    container = draw(st.sampled_from(["ndarray", "ndarray", "list", "DataFrame", "DataFrame"]))
    if container == "DataFrame":
        X = pd.DataFrame(values, columns=names) if values.ndim == 2 else pd.DataFrame(values)
        if covariate:
            X["elev"] = rng.normal(size=n)
        if string_column:
            X["station"] = [f"s{i}" for i in range(n)]
        cov_key = "elev"
    else:
        X = values
        if covariate:
            X = np.column_stack([X, rng.normal(size=n)])
        if string_column:
            X = np.column_stack(
                [X.astype(object), np.array([f"s{i}" for i in range(n)], dtype=object)]
            )
        cov_key = X.shape[1] - 1 if X.ndim == 2 else 0
        if container == "list":
            X = X.tolist()
            if layout == "ragged" and n >= 2 and len(X[0]) >= 1:
                X[0] = X[0][:-1]
    return {
        "X": X,
        "n": n,
        "coords": coords,
        "lonlat": lonlat,
        "cov_key": cov_key if covariate else None,
        "names": [*names, "elev", "station"],
    }


@st.composite
def observations(draw, n, coords, bad=True):
    """``y`` for `n` sites: a field, replicates, NaN patterns, bad shapes and values."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = pick(
        draw,
        ["field"] * 4 + ["replicates"] * 2 + ["nan_some"],
        [
            "constant",
            "zeros",
            "nan_column",
            "nan_all",
            "inf",
            "wrong_length",
            "string",
            "ragged",
            "complex",
            "three_d",
            "no_columns",
        ],
        bad,
    )
    scale = draw(st.sampled_from([1.0] * 6 + [1e-150, 1e150, 1e-8, 1e8]))
    smooth = np.sin(3 * coords).sum(axis=1) if coords.ndim == 2 and coords.shape[1] else np.zeros(n)
    base = np.nan_to_num(smooth, nan=0.0, posinf=0.0, neginf=0.0) + rng.standard_normal(n)
    r = draw(st.integers(2, 3))
    if kind == "field":
        y = base
    elif kind == "replicates":
        y = base[:, None] + 0.5 * rng.standard_normal((n, r))
    elif kind == "constant":
        y = np.full(n, 2.5)
    elif kind == "zeros":
        y = np.zeros((n, r)) if draw(st.booleans()) else np.zeros(n)
    elif kind == "nan_some":
        y = base[:, None] + 0.5 * rng.standard_normal((n, r))
        y[rng.uniform(size=(n, r)) < 0.25] = np.nan
        y[: min(n, 3)] = base[: min(n, 3), None]  # at least three sites observed on every replicate
    elif kind == "nan_column":
        y = np.column_stack([base, np.full(n, np.nan)])
    elif kind == "nan_all":
        y = np.full(n, np.nan)
    elif kind == "inf":
        y = base.copy()
        if n:
            y[rng.integers(n)] = np.inf
    elif kind == "wrong_length":
        y = np.append(base, 1.0) if draw(st.booleans()) or n == 0 else base[:-1]
    elif kind == "string":
        y = base.astype(object)
        if n:
            y[0] = "wet"
    elif kind == "ragged":
        y = [[v, v] for v in base]
        if n:
            y[0] = [1.0]
    elif kind == "complex":
        y = base + 1j
    elif kind == "three_d":
        y = base.reshape(n, 1, 1)
    else:
        y = np.empty((n, 0))
    if isinstance(y, np.ndarray) and y.dtype.kind == "f":
        y = y * scale
    container = draw(st.sampled_from(["ndarray", "ndarray", "list", "pandas"]))
    if container == "list" and isinstance(y, np.ndarray):
        y = y.tolist()
    elif container == "pandas" and isinstance(y, np.ndarray) and y.ndim in (1, 2):
        y = (
            pd.Series(y, name="rain")
            if y.ndim == 1
            else pd.DataFrame(y, columns=[f"day{j}" for j in range(y.shape[1])])
        )
    return y


@st.composite
def parameter_dicts(draw, kernel_name, bad=True):
    """``params`` for `kernel_name`, valid or with one fault."""
    params = {
        "variance": draw(st.sampled_from([1.0, 1.0, 0.5, 2.0, 1e-150, 1e150])),
        "range": draw(st.sampled_from([0.2, 0.2, 0.05, 1.0, 500.0])),
        "nugget": draw(st.sampled_from([0.1, 0.1, 0.01, 0.0, 1e-300])),
    }
    if kernel_name == "matern":
        params["smoothness"] = draw(st.sampled_from([0.5, 1.5, 2.5, 0.8]))
    if kernel_name == "powered_exponential":
        params["power"] = draw(st.sampled_from([0.5, 1.0, 1.5, 2.0, 2.5]))
    fault = pick(
        draw,
        [None, None, "numpy"],
        ["missing", "unknown", "zero", "negative", "nan", "inf", "bool", "str", "none", "not_dict"],
        bad,
    )
    key = draw(st.sampled_from(sorted(params)))
    if fault == "missing":
        del params[key]
    elif fault == "unknown":
        params["lengthscale"] = 0.3
    elif fault == "not_dict":
        return list(params.values())
    elif fault == "numpy":
        with np.errstate(over="ignore"):  # a value beyond float32 becomes inf: bad input too
            params[key] = np.float32(params[key])
    elif fault is not None:
        params[key] = {
            "zero": 0.0,
            "negative": -1.0,
            "nan": np.nan,
            "inf": np.inf,
            "bool": True,
            "str": "1.0",
            "none": None,
        }[fault]
    return params


KERNEL_NAMES = ["exponential", "matern", "gaussian", "powered_exponential"]


@st.composite
def kernels(draw, bad=True):
    """``(kernel argument, kernel family)``: a name, a Kernel instance, or a bad value.
    The family ``"matern_fixed"`` is a Matern with its smoothness fixed by the instance."""
    name = draw(st.sampled_from(KERNEL_NAMES))
    form = pick(draw, ["name", "name", "name", "instance"], ["bad"], bad)
    if form == "instance" and name == "matern":
        smoothness = draw(st.sampled_from([0.5, 1.5, 2.5, None]))
        return gs.Matern(smoothness=smoothness), "matern" if smoothness is None else "matern_fixed"
    if form == "instance":
        return {
            "exponential": gs.Exponential(),
            "gaussian": gs.Gaussian(),
            "powered_exponential": gs.PoweredExponential(),
        }[name], name
    if form == "bad":
        return draw(st.sampled_from(["bogus", 3, None, "Matern-3/2"])), name
    return (name.upper() if draw(st.integers(0, 5)) == 0 else name), name


def trends(cov_key, design_rows=None, bad=True):
    options = [None, "constant", "constant", "linear"] + ([["nope"], "quadratic", 3] if bad else [])
    if cov_key is not None:
        options += [[cov_key], [cov_key]]
    if design_rows is not None:
        options.append(np.ones((design_rows, 1)))
    return st.sampled_from(options)


def choices(good, bad_values, bad):
    return st.sampled_from(good + bad_values if bad else good)


def tile_sizes(bad):
    return choices([None, None, 32, 40], [8, 0, "a", 2.5], bad)


#: Which argument of an example may be bad (each draws from good and bad values); "none":
#: all are good, so that a good share of the examples reach a result to check.
FAULTS = ["none"] * 3 + ["X", "X", "y", "y", "params", "kernel", "options"]


# ---------------------------------------------------------------- reference values
def correlation(name, d, shape):
    """``M(d)`` of docs: ExaGeoStat / fields convention."""
    if name == "exponential" or (name == "matern" and shape["smoothness"] == 0.5):
        return np.exp(-d)
    if name == "gaussian":
        return np.exp(-(d**2))
    if name == "powered_exponential":
        return np.exp(-(d ** shape["power"]))
    nu = shape["smoothness"]
    if nu == 1.5:
        return (1 + d) * np.exp(-d)
    if nu == 2.5:
        return (1 + d + d**2 / 3) * np.exp(-d)
    return None


def reference_log_likelihood(coords, y, params, name, trend):
    """Direct evaluation by dense Cholesky, replicate by replicate (observed sites only);
    ``(value, tolerance)`` or None where it does not apply or is ill-conditioned."""
    Y = y[:, None] if y.ndim == 1 else y
    h = np.sqrt(((coords[:, None, :] - coords[None, :, :]) ** 2).sum(-1))
    R = correlation(name, h / params["range"], params)
    if R is None:
        return None
    total, tol = 0.0, 0.0
    for j in range(Y.shape[1]):
        obs = ~np.isnan(Y[:, j])
        m = int(obs.sum())
        C = params["variance"] * R[np.ix_(obs, obs)] + params.get("nugget", 0.0) * np.eye(m)
        kappa = np.linalg.cond(C)
        if not np.isfinite(kappa) or kappa > 1e8:
            return None
        L = scipy.linalg.cholesky(C, lower=True)
        r = Y[obs, j]
        if trend == "constant":
            w = scipy.linalg.cho_solve((L, True), np.ones(m))
            r = r - (w @ r) / w.sum()
        z = scipy.linalg.solve_triangular(L, r, lower=True)
        quad, logdet = float(z @ z), 2.0 * float(np.log(np.diag(L)).sum())
        total += -0.5 * quad - 0.5 * logdet - 0.5 * m * math.log(2 * math.pi)
        # Both evaluations are backward stable: each term has a relative error of at most
        # about m * kappa * eps; a factor of 100 covers the constants and the GLS step.
        tol += 100 * m * kappa * EPS * (abs(quad) + abs(logdet) + m)
    return total, tol


LONLAT_NAMES = {"lon", "long", "lng", "longitude", "lat", "latitude"}


def as_float_table(value, ndim):
    """`value` (array, list or pandas) as a float64 array of `ndim` dimensions, or None
    when it is not one plainly (strings, complex, ragged)."""
    try:
        array = np.asarray(
            value.to_numpy() if isinstance(value, (pd.DataFrame, pd.Series)) else value
        )
        if array.dtype.kind not in "biuf" and not (
            array.dtype == object
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in array.ravel())
        ):
            return None
        array = array.astype(np.float64)
    except (ValueError, TypeError):
        return None
    return array if array.ndim in ndim else None


def clean_coords(X):
    """Finite Euclidean coordinates of ``X`` as float64, or None where ``X`` is not that
    plainly (named lon/lat columns, non-numeric, non-finite, empty)."""
    if isinstance(X, pd.DataFrame) and {str(c).lower() for c in X.columns} & LONLAT_NAMES:
        return None
    array = as_float_table(X, (2,))
    if array is None or not array.size or not np.isfinite(array).all():
        return None
    return array


def clean_y(y, n):
    array = as_float_table(y, (1, 2))
    if array is None or array.shape[0] != n or np.isinf(array).any():
        return None
    if array.ndim == 2 and (array.shape[1] == 0 or np.isnan(array).all(axis=0).any()):
        return None
    return array


def frame_is_lonlat(X):
    return isinstance(X, pd.DataFrame) and [c.lower() for c in X.columns] in (
        ["lon", "lat"],
        ["longitude", "latitude"],
    )


def names_for(args, X, params):
    names = set(args) | set(PARAM_KEYS)
    if isinstance(X, pd.DataFrame):
        names |= {str(c) for c in X.columns}
    if isinstance(params, dict):
        names |= {str(k) for k in params}
    return names | {"elev", "nope", "station"}


def snapshots(inputs):
    return {k: snapshot(v) for k, v in inputs.items()}


def assert_all_unchanged(inputs, before):
    for k, v in inputs.items():
        assert_unchanged(before[k], v, k)


# ---------------------------------------------------------------- the checks
def check_log_likelihood(X, y, params, **kw):
    inputs = {"X": X, "y": y, "params": params, **{k: v for k, v in kw.items() if k == "trend"}}
    before = snapshots(inputs)
    out = call_checked(gs.log_likelihood, X, y, params, names=names_for(LL_ARGS, X, params), **kw)
    assert_all_unchanged(inputs, before)
    if out is None:
        return
    value, caught = out
    assert isinstance(value, float), f"log_likelihood returned {type(value).__name__}"
    check_finite(value, (), caught, "log_likelihood")
    coords, kernel = clean_coords(X), kw.get("kernel", "matern")
    trend = kw.get("trend", "constant")
    if isinstance(trend, np.ndarray) and trend.shape[1:] == (1,) and (trend == 1).all():
        trend = "constant"
    plain = (
        kw.get("distance", "auto") in ("auto", "euclidean")
        and kw.get("method", "auto") != "tlr"
        and not kw.get("reml", False)
        and isinstance(kernel, str)
        and kernel.lower() in SHAPES
        and trend in (None, "constant")
    )
    yc = clean_y(y, len(coords) if coords is not None else -1)
    if plain and coords is not None and yc is not None and isinstance(params, dict):
        ref = reference_log_likelihood(coords, yc, params, kernel.lower(), trend)
        if ref is not None:
            expected, tol = ref
            assert abs(value - expected) <= tol, (
                f"log_likelihood {value!r} != direct evaluation {expected!r}"
            )
            record("log_likelihood: compared with a direct evaluation")
    if frame_is_lonlat(X) and kw.get("distance", "auto") == "auto":
        # "auto" on lon/lat columns is chordal: the same computation, so the same bits.
        chordal = gs.log_likelihood(X, y, params, **{**kw, "distance": "chordal"})
        assert value == chordal, (
            "log_likelihood(distance='auto') on lon/lat columns differs from 'chordal'"
        )


def check_simulate(X, params, n, **kw):
    inputs = {"X": X, "params": params}
    before = snapshots(inputs)
    out = call_checked(gs.simulate, X, params, names=names_for(SIM_ARGS, X, params), **kw)
    assert_all_unchanged(inputs, before)
    if out is None:
        return
    draws, caught = out
    k = kw.get("n_samples", 1)
    check_finite(draws, (n,) if k == 1 else (n, k), caught, "simulate")
    seed = kw.get("random_state")
    if isinstance(seed, int) and not isinstance(seed, bool):
        # The same call on the same data: bit-identical draws.
        np.testing.assert_array_equal(gs.simulate(X, params, **kw), draws)
    if frame_is_lonlat(X) and kw.get("distance", "auto") == "auto" and isinstance(seed, int):
        np.testing.assert_array_equal(
            gs.simulate(X, params, **{**kw, "distance": "chordal"}),
            draws,
            err_msg="simulate(distance='auto') on lon/lat columns is not chordal",
        )


def check_fit(X, y, n, **settings_):
    est = gs.SpatialGP(n_starts=1, **settings_)
    init = snapshot(est.get_params())
    inputs = {"X": X, "y": y}
    before = snapshots(inputs)
    out = call_checked(est.fit, X, y, names=names_for(FIT_ARGS, X, None))
    assert_all_unchanged(inputs, before)
    assert_unchanged(init, est.get_params(), "SpatialGP.get_params()")
    if out is None:
        return
    fitted, caught = out
    assert fitted is est, "fit did not return self"
    values = np.array([est.params_[k] for k in ("variance", "range", "nugget")], dtype=float)
    check_finite(values, (3,), caught, "params_")
    assert (values[:2] > 0).all() and values[2] >= 0, f"params_ out of range: {est.params_}"
    check_finite(est.loglik_, (), caught, "loglik_")
    assert est.method_ in ("exact", "tlr")
    replicates = np.ndim(y) == 2
    k = min(n, 4)
    new = X.iloc[:k] if isinstance(X, pd.DataFrame) else np.asarray(X)[:k]
    pred = call_checked(est.predict, new, names={"X"}, return_std=True)
    assert pred is not None, "predict at training sites failed"
    (mean, std), caught_p = pred
    shape = (k, np.shape(y)[1]) if replicates else (k,)
    check_finite(np.asarray(mean), shape, caught + caught_p, "predict mean")
    assert np.all(np.asarray(std) >= 0) or not np.isfinite(np.asarray(std)).all()
    if est.method_ == "exact" and not any(
        issubclass(w.category, gs.PerturbationWarning) for w in caught
    ):
        # The documented round trip: log_likelihood at the estimate reproduces loglik_.
        # Same model, possibly a different evaluation order: relative agreement to 1e-7.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            again = gs.log_likelihood(
                X,
                y,
                est.params_,
                kernel=settings_.get("kernel", "matern"),
                trend=settings_.get("trend", "constant"),
                distance=settings_.get("distance", "auto"),
            )
        assert again == pytest.approx(est.loglik_, rel=1e-7, abs=1e-7 * n)
        record("fit: loglik_ reproduced by log_likelihood")


# ---------------------------------------------------------------- properties
@settings(max_examples=250, **PROPERTY_SETTINGS)
@given(data=st.data())
def test_log_likelihood_gives_a_finite_correct_value_or_a_named_error(data):
    fault = data.draw(st.sampled_from(FAULTS), label="fault")
    table = data.draw(site_tables(bad=fault == "X"), label="X")
    y = data.draw(observations(table["n"], table["coords"], bad=fault == "y"), label="y")
    kernel, family = data.draw(kernels(bad=fault == "kernel"), label="kernel")
    params = data.draw(parameter_dicts(family, bad=fault == "params"), label="params")
    bad = fault == "options"
    kw = {
        "kernel": kernel,
        "trend": data.draw(trends(table["cov_key"], table["n"], bad), label="trend"),
    }
    kw.update(
        data.draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "distance": choices(
                        ["auto", "euclidean"], ["chordal", "great_circle", "manhattan"], bad
                    ),
                    "method": choices(["auto", "exact", "tlr"], ["dense"], bad),
                    "tile_size": tile_sizes(bad),
                    "reml": choices([False, True], ["yes"], bad),
                },
            ),
            label="options",
        )
    )
    check_log_likelihood(table["X"], y, params, **kw)


@settings(max_examples=150, **PROPERTY_SETTINGS)
@given(data=st.data())
def test_simulate_gives_finite_draws_of_the_right_shape_or_a_named_error(data):
    fault = data.draw(st.sampled_from(FAULTS), label="fault")
    table = data.draw(site_tables(bad=fault == "X"), label="X")
    kernel, family = data.draw(kernels(bad=fault == "kernel"), label="kernel")
    params = data.draw(parameter_dicts(family, bad=fault == "params"), label="params")
    bad = fault in ("options", "y")
    kw = {"kernel": kernel}
    kw.update(
        data.draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "n_samples": choices([1, 1, 3], [0, -1, 2.5, "2"], bad),
                    "random_state": st.one_of(
                        choices([0, 7, None], ["abc", -1, 1.5, True], bad),
                        st.builds(np.random.default_rng, st.just(5)),
                    ),
                    "distance": choices(
                        ["auto", "euclidean"], ["chordal", "great_circle", "manhattan"], bad
                    ),
                    "method": choices(["auto", "exact", "tlr"], ["dense"], bad),
                    "tile_size": tile_sizes(bad),
                },
            ),
            label="options",
        )
    )
    check_simulate(table["X"], params, table["n"], **kw)


@settings(max_examples=150, **PROPERTY_SETTINGS)
@given(data=st.data())
def test_fit_gives_finite_estimates_or_a_named_error(data):
    fault = data.draw(st.sampled_from(FAULTS), label="fault")
    table = data.draw(site_tables(bad=fault == "X"), label="X")
    y = data.draw(observations(table["n"], table["coords"], bad=fault == "y"), label="y")
    bad = fault in ("options", "kernel", "params")
    family = data.draw(st.sampled_from(KERNEL_NAMES), label="kernel")
    settings_ = {
        "kernel": family,
        "trend": data.draw(trends(table["cov_key"], bad=bad), label="trend"),
    }
    if family == "matern":
        settings_["smoothness"] = data.draw(
            st.sampled_from([0.5, 1.5, 2.5, None]), label="smoothness"
        )
    settings_.update(
        data.draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "nugget": choices(
                        [True, True, False, 0, 1e-300, 0.1], [-1.0, "yes", np.nan], bad
                    ),
                    "random_state": st.one_of(
                        choices([0, None], ["abc", -3], bad),
                        st.builds(np.random.default_rng, st.just(2)),
                    ),
                    "method": choices(["auto", "exact", "tlr"], ["dense"], bad),
                    "tile_size": tile_sizes(bad),
                    "distance": choices(["auto", "euclidean"], ["great_circle", "manhattan"], bad),
                },
            ),
            label="settings",
        )
    )
    check_fit(table["X"], y, table["n"], **settings_)


# ---------------------------------------------------------------- specific bad inputs
def _field(n=30, seed=0):
    X = np.random.default_rng(seed).uniform(size=(n, 2))
    return X, np.sin(3 * X).sum(axis=1) + np.random.default_rng(seed + 1).standard_normal(n)


def _lonlat(n=30):
    rng = np.random.default_rng(4)
    return pd.DataFrame({"lon": rng.uniform(-120, -70, n), "lat": rng.uniform(25, 50, n)})


def _seed17():
    rng = np.random.default_rng(17)
    X = rng.uniform(size=(30, 2))
    return X, np.sin(3 * X).sum(axis=1) + rng.standard_normal(30)


def _near_duplicates():
    X, y = _field()
    X[-1] = X[0] + 1e-12
    return X, y


EXP = {"variance": 1.0, "range": 0.2, "nugget": 0.1}
FIT_CASES = {
    "constant-y": lambda: (_field()[0], np.full(30, 2.5), {}),
    "all-zero-y": lambda: (_field()[0], np.zeros(30), {}),
    "tiny-y": lambda: (_field()[0], _field()[1] * 1e-150, {}),
    "huge-y": lambda: (_field()[0], _field()[1] * 1e150, {}),
    "all-nan-replicate": lambda: (
        _field()[0],
        np.column_stack([_field()[1], np.full(30, np.nan)]),
        {},
    ),
    "near-duplicates-no-nugget": lambda: (*_near_duplicates(), {"nugget": False}),
    "near-duplicates-nugget-1e-300": lambda: (*_near_duplicates(), {"nugget": 1e-300}),
    "random-state-abc": lambda: (*_field(), {"random_state": "abc"}),
    "string-column": lambda: (
        pd.DataFrame({"x": _field()[0][:, 0], "y": _field()[0][:, 1], "name": ["a"] * 30}),
        _field()[1],
        {},
    ),
    "string-covariate": lambda: (
        pd.DataFrame({"x": _field()[0][:, 0], "y": _field()[0][:, 1], "soil": ["a"] * 30}),
        _field()[1],
        {"trend": ["soil"]},
    ),
    "ragged-X": lambda: (
        [[0.1, 0.2], [0.3]] + [[0.1 * i, 0.5] for i in range(28)],
        _field()[1],
        {},
    ),
    "ragged-y": lambda: (_field()[0], [[1.0, 2.0]] * 29 + [[1.0]], {}),
    "tlr-small-tiles": lambda: (*_field(40), {"method": "tlr", "tile_size": 32}),
    # found by the properties above
    "empty-X": lambda: (np.empty((0, 2)), np.empty(0), {}),
    "X-without-columns": lambda: (np.empty((30, 0)), _field()[1], {}),
    "string-in-object-array": lambda: (
        np.column_stack([_field()[0], ["a"] * 30]).astype(object),
        _field()[1],
        {},
    ),
    "tlr-fixed-nugget-tiny-y": lambda: (
        _field()[0],
        _field()[1] * 1e-150,
        {"method": "tlr", "nugget": 0.1},
    ),
    "tlr-fixed-nugget-pure-noise": lambda: (
        *_seed17(),
        {"kernel": "powered_exponential", "trend": "linear", "method": "tlr", "nugget": 0.1},
    ),
    "tiny-y-unidentified": lambda: (
        pd.DataFrame(
            {"x0": [6, 3, 9, 10], "x1": [1, 6, 3, 1], "elev": [-1.44, 0.72, -2.03, -0.39]}
        ),
        1e-150 * np.random.default_rng(0).uniform(1, 4, (4, 3)),
        {"trend": ["elev"]},
    ),
}


@pytest.mark.parametrize("case", FIT_CASES, ids=list(FIT_CASES))
def test_fit_on_the_listed_inputs(case):
    X, y, extra = FIT_CASES[case]()
    check_fit(X, y, len(X), **{"kernel": "exponential", **extra})


LL_CASES = {
    "constant-y": lambda: (_field()[0], np.full(30, 2.5), EXP, {}),
    "tiny-y": lambda: (
        _field()[0],
        _field()[1] * 1e-150,
        {**EXP, "variance": 1e-300, "nugget": 1e-301},
        {},
    ),
    "all-nan-replicate": lambda: (
        _field()[0],
        np.column_stack([_field()[1], np.full(30, np.nan)]),
        EXP,
        {},
    ),
    "lonlat-auto-distance": lambda: (_lonlat(), _field()[1], {**EXP, "range": 500.0}, {}),
    "string-column": lambda: (
        pd.DataFrame({"x": _field()[0][:, 0], "name": ["a"] * 30}),
        _field()[1],
        EXP,
        {},
    ),
    "ragged-X": lambda: (
        [[0.1, 0.2], [0.3]] + [[0.1 * i, 0.5] for i in range(28)],
        _field()[1],
        EXP,
        {},
    ),
    "params-with-string": lambda: (*_field(), {**EXP, "range": "0.2"}, {}),
    "params-nan": lambda: (*_field(), {**EXP, "variance": np.nan}, {}),
    "tlr-small-tiles": lambda: (*_field(40), EXP, {"method": "tlr", "tile_size": 32}),
}


@pytest.mark.parametrize("case", LL_CASES, ids=list(LL_CASES))
def test_log_likelihood_on_the_listed_inputs(case):
    X, y, params, extra = LL_CASES[case]()
    check_log_likelihood(X, y, params, **{"kernel": "exponential", **extra})


SIM_CASES = {
    "random-state-abc": lambda: (_field()[0], EXP, {"random_state": "abc"}),
    "lonlat-auto-distance": lambda: (_lonlat(), {**EXP, "range": 500.0}, {"random_state": 0}),
    "huge-variance": lambda: (_field()[0], {**EXP, "variance": 1e150}, {"random_state": 0}),
    "tiny-variance": lambda: (_field()[0], {**EXP, "variance": 1e-150}, {"random_state": 0}),
    "tlr-small-tiles": lambda: (
        _field(40)[0],
        EXP,
        {"method": "tlr", "tile_size": 32, "random_state": 0},
    ),
}


@pytest.mark.parametrize("case", SIM_CASES, ids=list(SIM_CASES))
def test_simulate_on_the_listed_inputs(case):
    X, params, extra = SIM_CASES[case]()
    check_simulate(X, params, len(X), **{"kernel": "exponential", **extra})
