"""Checks of a loaded model's fitted state: every value a fit gives, and only such values.

What a model file (:mod:`geostat.data.model_file`) holds is checked attribute by
attribute as a fit would have made it: type, finiteness, sign, shapes that agree with
the training data, and the estimates equal in ``params_``/``coef_`` and ``result_``.
Lag-kernel estimates must lie where a fit reports them: ``anisotropy_ratio`` in (0, 1],
``anisotropy_angle`` in [0, pi), ``separability`` in [0, 1], ``time_range`` and
``vertical_range`` positive.
"""

from __future__ import annotations

import math

import numpy as np

from geostat.checks import check_params
from geostat.data import FieldLayout, Trend
from geostat.distance import get_distance
from geostat.kernels import Kernel
from geostat.likelihood import METHODS
from geostat.optimize import MLEResult
from geostat.optimize.scaling import DataScale

__all__ = ["check_fitted_state"]


def check_fitted_state(state, training_record):
    """Raise ValueError (or TypeError) naming the first fitted attribute of a loaded model
    that no fit gives.

    Parameters
    ----------
    state : dict
        The fitted attributes read from a model file, by name
        (:data:`geostat.data.model_file.FITTED_ATTRIBUTES`).
    training_record : type
        The record class of the training data (``coords``, ``y``, ``design``, ``noise``).

    Raises
    ------
    ValueError or TypeError
        For a wrong type, a non-finite or out-of-range value, or a shape that disagrees
        with the training data (``n`` sites of ``d`` coordinates, ``r`` replicates, ``p``
        trend coefficients).
    """
    n, d, r, p = _check_training(state["_training"], training_record)
    for name, kind in _FITTED_KINDS.items():
        _check_kind(state.get(name), name, kind)
    scale = state["_scale"]
    _require(
        isinstance(scale, DataScale)
        and isinstance(scale.factor, float)
        and _is_finite(scale.factor)
        and scale.factor > 0
        and np.frexp(scale.factor)[0] == 0.5
        and isinstance(scale.log_jacobian, float)
        and _is_finite(scale.log_jacobian),
        f"_scale is {_brief(scale)}, not a data scale (a positive power of two and a finite "
        "log-Jacobian)",
    )
    _require(
        not state["_y_one_d"] or r == 1,
        f"_y_one_d is True but the training data have {r} replicates",
    )
    names = state["_y_names"]
    _require(
        names is None or isinstance(names, list) and len(names) == r and all(map(_is_label, names)),
        f"_y_names is not None nor a list of {r} replicate names",
    )
    _require(
        len(state["coef_names_"]) == p,
        f"coef_names_ has {len(state['coef_names_'])} names for {p} coefficients",
    )
    _check_estimates(state, r, p)
    _check_columns(state, d, p)
    _check_field(state["_field"], r)
    get_distance(state["distance_"])
    if state[
        "kernel_"
    ].structured:  # a kernel of coordinate differences applies to these columns (as fit checks)
        state["kernel_"].check_axes(d, state["distance_"] != "euclidean")
    method, accuracy = state["method_"], state["accuracy_"]
    _require(
        method in set(METHODS) - {"auto"},
        f"method_ is {_brief(method)}, not one of the fitted methods",
    )
    _require(
        accuracy is None and method == "exact" or _is_number(accuracy) and 0 < accuracy < 1,
        f"accuracy_ is {_brief(accuracy)}, not None (exact) or a TLR accuracy in (0, 1)",
    )


def _check_training(training, record):
    """``(n, d, r, p)`` of a loaded model's training data (a `record`), once checked."""
    _require(isinstance(training, record), "_training is not a training data record")
    n, d = _check_floats(training.coords, "_training.coords", (None, None)).shape
    r = _check_floats(training.y, "_training.y", (n, None), allow="nan").shape[1]
    p = _check_floats(training.design, "_training.design", (n, None)).shape[1]
    if training.noise is not None:
        noise = _check_floats(training.noise, "_training.noise", (n,))
        _require(bool(np.all(noise >= 0)), "_training.noise holds negative variances")
    _require(
        n >= 1 and d >= 1 and r >= 1,
        f"the training data have {n} sites, {d} coordinates and {r} replicates",
    )
    _require(
        bool(np.all(np.any(~np.isnan(training.y), axis=0))),
        "_training.y has a replicate without observations",
    )
    return n, d, r, p


def _check_estimates(state, r, p):
    """The estimates: parameters valid for the kernel, standard errors, and the trend
    coefficients, equal in ``params_``/``coef_`` and in ``result_``."""
    kernel, params, result = state["kernel_"], state["params_"], state["result_"]
    _require(isinstance(kernel, Kernel), "kernel_ is not a kernel")
    checked = _checked_params(params, kernel, "params_")
    _require(
        checked.keys() == params.keys(),
        f"params_ has the keys {_brief(sorted(params))}, not {sorted(checked)}",
    )
    _require(isinstance(result, MLEResult), "result_ is not a fit result record")
    for name, kind in _RESULT_KINDS.items():
        _check_kind(getattr(result, name), f"result_.{name}", kind)
    _require(
        isinstance(result.params, dict)
        and result.params.keys() == params.keys()
        and _checked_params(result.params, kernel, "result_.params") == checked,
        "result_.params differ from params_",
    )
    _require(
        set(result.estimated) <= params.keys()
        and len(set(result.estimated)) == len(result.estimated),
        f"result_.estimated {_brief(result.estimated)} is not a set of names of params_",
    )
    for name, stderr in (("stderr_", state["stderr_"]), ("result_.stderr", result.stderr)):
        _require(
            isinstance(stderr, dict)
            and stderr.keys() == params.keys()
            and all(_is_number(v) and not v < 0 for v in stderr.values()),
            f"{name} is not a non-negative standard error for each of {sorted(params)}",
        )
    k = len(result.estimated)
    _check_floats(result.covariance, "result_.covariance", (k, k), allow="nan inf")
    _check_floats(result.coef, "result_.coef", (r, p))
    _check_floats(result.coef_stderr, "result_.coef_stderr", (r, p), allow="nan inf")
    shape = (p,) if state["_y_one_d"] else (r, p)
    coef = _check_floats(state["coef_"], "coef_", shape)
    _check_floats(state["coef_stderr_"], "coef_stderr_", shape, allow="nan inf")
    _require(np.array_equal(coef, result.coef.reshape(shape)), "coef_ differs from result_.coef")


#: ``{name: (low, high, low included, high included)}``: the range a fit reports each
#: geometric parameter of a kernel of coordinate differences in.
_LAG_RANGES = {
    "anisotropy_ratio": (0.0, 1.0, False, True),
    "anisotropy_angle": (0.0, math.pi, True, False),
    "separability": (0.0, 1.0, True, True),
    "time_range": (0.0, math.inf, False, False),
    "vertical_range": (0.0, math.inf, False, False),
}


def _checked_params(params, kernel, argname):
    """`params` as plain floats once checked against `kernel` (for a lag kernel, against
    :data:`_LAG_RANGES` and the families' domains)."""
    if not kernel.structured:
        return check_params(params, kernel, argname)
    _require(isinstance(params, dict), f"{argname} is not a dict")
    names = ("variance", "range", *kernel.shape_names, "nugget")
    _require(
        params.keys() == set(names),
        f"{argname} has the keys {_brief(sorted(params))}, not {sorted(names)}",
    )
    fixed = kernel.wrap(kernel.fixed_shape)
    out = {}
    for name in names:
        value = params[name]
        where = f"{argname}[{name!r}]"
        _require(_is_finite(value), f"{where} is {_brief(value)}, not a finite number")
        value = float(value)
        if name in _LAG_RANGES:
            low, high, low_in, high_in = _LAG_RANGES[name]
            inside = (value >= low if low_in else value > low) and (
                value <= high if high_in else value < high
            )
            _require(
                inside,
                f"{where} is {value!r}, outside {'[' if low_in else '('}{low:g}, "
                f"{high:g}{']' if high_in else ')'}",
            )
        elif name in kernel.shape_names:
            kernel._check_shape_value(
                name, value, where
            )  # the family's domain (ValueError naming `where`)
        else:
            _require(
                value >= 0 if name == "nugget" else value > 0,
                f"{where} is {value!r}, not {'non-negative' if name == 'nugget' else 'positive'}",
            )
        _require(
            name not in fixed or math.isclose(value, fixed[name], rel_tol=1e-12, abs_tol=0.0),
            f"{where} is {value!r} but the kernel fixes it at {fixed.get(name)!r}",
        )
        out[name] = value
    return out


def _check_columns(state, d, p):
    """The input columns: ``_layout`` splits ``n_features_in_`` columns into the ``d``
    coordinates and the covariates of ``_trend``, which gives ``p`` coefficients."""
    layout, trend = state["_layout"], state["_trend"]
    _require(
        isinstance(layout, tuple)
        and len(layout) == 3
        and _is_count(layout[0])
        and all(isinstance(pos, list) and all(map(_is_count, pos)) for pos in layout[1:]),
        "_layout is not (number of columns, coordinate positions, covariate positions)",
    )
    n_columns, coord_pos, cov_pos = layout
    _require(
        sorted(coord_pos + cov_pos) == list(range(n_columns)) and len(coord_pos) == d,
        f"_layout does not split {n_columns} columns into {d} coordinates and covariates",
    )
    _require(
        state["n_features_in_"] == n_columns,
        f"n_features_in_ is not {n_columns}, the columns of _layout",
    )
    names = state.get("feature_names_in_")
    _require(
        names is None
        or isinstance(names, np.ndarray)
        and names.shape == (n_columns,)
        and all(isinstance(name, str) for name in names),
        f"feature_names_in_ is not {n_columns} column names",
    )
    _require(
        isinstance(trend, Trend)
        and isinstance(trend.columns, (tuple, list))
        and all(map(_is_label, trend.columns)),
        "_trend is not a trend record",
    )
    terms = {"none": 0, "constant": 1, "linear": 1 + d, "covariates": 1 + len(cov_pos)}
    _require(
        terms.get(trend.kind if isinstance(trend.kind, str) else None) == p,
        f"_trend ({_brief(trend.kind)}) does not give the {p} columns of the training design",
    )
    _require(
        len(trend.columns) == len(cov_pos) and (trend.kind == "covariates" or not trend.columns),
        "_layout and _trend disagree on the covariate columns",
    )


def _check_field(field, r):
    """``_field``: None (fitted on a table) or the layout of a fitted xarray field."""
    if field is None:
        return
    _require(
        isinstance(field, FieldLayout)
        and isinstance(field.position, tuple)
        and len(field.position) == 2
        and isinstance(field.space_dims, tuple)
        and len(field.space_dims) in (1, 2)
        and all(map(_is_label, field.position + field.space_dims))
        and (field.replicate_dim is None or _is_label(field.replicate_dim)),
        "_field is not the layout of a field (two position coordinates, one or two dimensions)",
    )
    replicates = field.replicates
    _require(
        replicates is None or isinstance(replicates, np.ndarray) and replicates.shape == (r,),
        f"_field.replicates is not None nor the {r} replicate labels",
    )


def _check_floats(value, name, shape, allow=""):
    """`value` if it is a float64 array of `shape` (None: any length) of finite values, or
    also NaN (`allow` has ``"nan"``) or infinite ones (``"inf"``)."""
    _require(
        isinstance(value, np.ndarray)
        and value.dtype == np.float64
        and value.ndim == len(shape)
        and all(want is None or want == got for want, got in zip(shape, value.shape, strict=True)),
        f"{name} is not a float64 array of shape {tuple('any' if s is None else s for s in shape)}",
    )
    bad = ~np.isfinite(value)
    for word, test in (("nan", np.isnan), ("inf", np.isinf)):
        if word in allow.split():
            bad &= ~test(value)
    _require(not bad.any(), f"{name} holds {'infinite' if 'nan' in allow else 'non-finite'} values")
    return value


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_finite(value):
    """Whether `value` is a number that a float holds, finite."""
    try:
        return _is_number(value) and bool(np.isfinite(float(value)))
    except OverflowError:
        return False


def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_label(value):
    """Whether `value` can name a column, replicate or dimension read from a model file."""
    return isinstance(value, (str, int, float, tuple)) and not isinstance(value, bool)


#: The type of each scalar or list attribute of a fit (its arrays and records are checked
#: on their own), and of each such field of its result record.
_FITTED_KINDS = {
    "n_features_in_": "count",
    "n_safeguarded_": "count",
    "n_iter_": "count",
    "n_evaluations_": "count",
    "converged_": "flag",
    "_y_one_d": "flag",
    "loglik_": "finite number",
    "loglik_error_": "number",
    "perturbation_": "non-negative number",
    "shift_": "non-negative number",
    "coef_names_": "names",
    "distance_": "text",
    "method_": "text",
    "time_unit_": "text or None",
}
_RESULT_KINDS = {
    "estimated": "names",
    "loglik": "finite number",
    "n_iter": "count",
    "n_evaluations": "count",
    "n_pilot_evaluations": "count",
    "n_failures": "count",
    "converged": "flag",
    "message": "text",
    "at_bounds": "names",
    "reml": "flag",
    "elapsed": "non-negative number",
    "method": "text",
    "accuracy": "TLR accuracy or None",
    "loglik_error": "number",
    "fisher_relative_error": "number",
    "loglik_accuracy": "TLR accuracy or None",
    "n_probes": "count",
    "scoring_loss": "number",
    "gap_bound": "number",
}
#: Diagnostics ("number") may be NaN or infinite, as a fit reports them.
_KIND_TESTS = {
    "count": _is_count,
    "flag": lambda v: isinstance(v, bool),
    "number": _is_number,
    "finite number": _is_finite,
    "non-negative number": lambda v: _is_number(v) and v >= 0,
    "TLR accuracy or None": lambda v: v is None or _is_number(v) and 0 < v < 1,
    "text": lambda v: isinstance(v, str),
    "text or None": lambda v: v is None or isinstance(v, str),
    "names": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
}


def _check_kind(value, name, kind):
    _require(_KIND_TESTS[kind](value), f"{name} is {_brief(value)}, not a {kind}")


def _brief(value):
    """`value` for a message: its repr, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _require(condition, message):
    """Raise ValueError(`message`) unless `condition`."""
    if not condition:
        raise ValueError(message)
