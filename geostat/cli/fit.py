"""``geostat fit``: fit, then print the table of estimates (and write JSON and the model).

Each estimate is printed to the decimal place of the second significant digit of its
standard error (at least two significant digits of its own), its interval ends to the
same place; an end beyond the search box reads ``> bound`` (or ``< bound``), a
non-finite one ``unbounded``. A row ends with ``weak`` for a weakly identified parameter
(remedies below the table) and ``one-sided`` for an estimate on a bound.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
from scipy import stats

from geostat.cli.files import check_outputs, write_json, written_path
from geostat.cli.inputs import load_fit_data
from geostat.cli.parser import verbose_level
from geostat.optimize.identification import identification_of
from geostat.optimize.intervals import ONE_SIDED, check_level, parameter_bounds

__all__ = ["CLI_REMEDIES", "run_fit", "table"]

#: The remedies of :data:`geostat.optimize.identification.REMEDIES`, worded for this command.
CLI_REMEDIES = {
    "fix_smoothness": "fix the smoothness (--smoothness 0.5 or 1.5)",
    "fix_range": "fix the range (in Python: SpatialGP(fixed={{'range': value}}))",
    "reml": "--reml",
    "profile": "--ci profile",
    "fix_nugget": "fix the nugget (--nugget 0 or a known common error variance, or per-row "
    "variances with --noise-variance)",
    "fix_shape": "fix {name} (in Python, in the kernel)",
    "widen_bounds": "widen the bounds of {name} (in Python: SpatialGP(bounds=...))",
}
#: The nugget's remedy where known error variances are given (the nugget is on top of them).
KNOWN_ERRORS_REMEDIES = {
    **CLI_REMEDIES,
    "fix_nugget": "fix the nugget (--nugget none: the known errors alone, or --nugget VALUE)",
}
#: Relative tolerance of an interval end on a bound of the search box.
BOUND_RTOL = 1e-9


def run_fit(args):
    """``geostat fit``: fit, write the JSON and the model if asked; return the report.

    Output paths are checked before the data are read. The JSON is strict (non-finite
    numbers as ``null``); both outputs are written atomically.
    """
    from geostat.estimator import SpatialGP

    start = time.perf_counter()
    check_outputs(
        [("--output", args.output), ("--save-model", args.save_model)],
        [("input file", args.file)],
        args.force,
    )
    if args.ci:
        check_level(args.level)  # before the fit, not after it
    kernel, smoothness = kernel_option(args)
    data = load_fit_data(args)
    model = SpatialGP(
        kernel=kernel,
        smoothness=smoothness,
        anisotropy=args.anisotropy,
        time=data.time,
        nugget=nugget_option(args.nugget),
        trend=data.covariates
        if data.covariates
        else (None if args.trend == "none" else args.trend),
        distance=args.distance,
        method=args.method,
        accuracy=args.accuracy,
        tile_size=args.tile_size,
        device=args.device,
        reml=args.reml,
        random_state=args.seed,
        verbose=verbose_level(args),
        target_transform=None if data.transform == "none" else data.transform,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(
            data.X, data.y, noise_variance=None if data.noise is None else data.noise.noise_variance
        )
        intervals = model.confidence_intervals(args.level, args.ci) if args.ci else None
        weak = identification_of(model, intervals)
    elapsed = time.perf_counter() - start
    remedies = CLI_REMEDIES if data.noise is None else KNOWN_ERRORS_REMEDIES
    result = {
        "data": data.source,
        "value": data.value,
        "replicates": data.replicates,
        "replicate_dimension": data.replicate_dimension,
        "time": data.time,
        "time_unit": model.time_unit_,
        "transform": data.transform,
        "boxcox_lambda": getattr(model.transform_, "lmbda", None),
        # known measurement-error variances (units of the value squared), or None
        "known_errors": None if data.noise is None else data.noise.summary(),
        "n": data.n,
        "n_observations": data.n_observations,
        "kernel": fitted_kernel(model),
        "distance": model.distance_,
        "method": model.method_,
        "device": args.device,
        "accuracy": model.accuracy_,
        "loglik_error": model.loglik_error_,
        # how far the exact maximum may lie above the estimate's value (None: no bound known)
        "gap_bound": model.result_.gap_bound if np.isfinite(model.result_.gap_bound) else None,
        "reml": bool(args.reml),
        "params": model.params_,
        "stderr": model.stderr_,
        "coef": by_name(model, model.coef_),
        "coef_stderr": by_name(model, model.coef_stderr_),
        "loglik": model.loglik_,
        "converged": model.converged_,
        "n_iter": model.n_iter_,
        "n_evaluations": model.n_evaluations_,
        "n_pilot_evaluations": model.result_.n_pilot_evaluations,
        "at_bounds": model.result_.at_bounds,
        "intervals": None
        if intervals is None
        else {
            "method": args.ci,
            "level": args.level,
            "one_sided": [name for name, row in intervals.iterrows() if row.one_sided],
            **{name: [row.lower, row.upper] for name, row in intervals.iterrows()},
        },
        "weakly_identified": {
            name: {"reason": flag.reason, "remedy": flag.remedy_text(remedies)}
            for name, flag in weak.items()
        },
        "wall_time_s": elapsed,
        "warnings": [str(w.message) for w in caught],
    }
    lines = [table(result, model)]
    if args.output:
        write_json(result, args.output)
        lines.append(f"results written to {args.output}")
    if args.save_model:
        model.save(written_path(args.save_model))
        lines.append(f"model written to {args.save_model}")
    return "\n".join(lines)


def kernel_option(args):
    """``(kernel, smoothness)`` of SpatialGP for the kernel options: ``--kernel`` and
    ``--smoothness``, or with ``--space-time`` a :class:`geostat.SpaceTime` of them in
    space and ``--time-kernel`` in time (``--separable``: separability fixed at 0)."""
    from geostat.kernels import SpaceTime, get_kernel

    if not args.space_time:
        for option, given in (
            ("--time-kernel", args.time_kernel),
            ("--separable", args.separable),
            ("--time", args.time),
        ):
            if given:
                raise ValueError(f"{option} applies to a space-time fit; add --space-time")
        return args.kernel, args.smoothness
    space = get_kernel(args.kernel, args.smoothness)
    return SpaceTime(
        space=space,
        time=args.time_kernel or "exponential",
        separability=0.0 if args.separable else None,
    ), None


def nugget_option(text):
    if text == "estimate":
        return True
    if text == "none":
        return False
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"--nugget must be 'estimate', 'none' or a number; got {text!r}") from None


def by_name(model, values):
    """Trend coefficients (or standard errors) by name for one replicate; a list per
    replicate for several."""
    values = np.asarray(values)
    if values.ndim != 1:
        return values.tolist()
    return dict(zip(model.coef_names_, values.tolist(), strict=True))


def fitted_kernel(model):
    """The kernel with its shape parameters at their estimates, e.g. ``Matern(smoothness=1.23)``."""
    kernel = model.kernel_
    shape = ", ".join(f"{name}={model.params_[name]:.4g}" for name in kernel.shape_names)
    return f"{type(kernel).__name__}({shape})"


def known_errors_line(known):
    """The report's line on known measurement errors, e.g. ``known error variances: column
    v, median 0.01, range 0.002 to 0.03 at 200 observed rows (units of the value squared)``."""
    given = " (--noise-sd, squared)" if known["option"] == "--noise-sd" else ""
    return (
        f"known error variances: column {known['column']}{given}, median {known['median']:.4g}, "
        f"range {known['min']:.4g} to {known['max']:.4g} at {known['n']} observed rows (units of "
        "the value squared)"
    )


def interval_header(intervals):
    """Column titles of the confidence interval, e.g. ``95% lower (profile)``."""
    if intervals is None:
        return ""
    percent = f"{100 * intervals['level']:g}%"
    return f"{percent + ' lower':>14}{percent + ' upper':>14}  ({intervals['method']})"


def decimal_place(x):
    """The decimal place of the second significant digit of `x` (> 0): 1 for 3.9, -2 for 4633."""
    return 1 - math.floor(math.log10(abs(x)))


def fixed(value, places):
    """`value` rounded to `places` decimal places (negative: tens, hundreds, ...), in plain
    notation, or in scientific notation with as many significant digits beyond 1e7 and
    below 1e-4; ``0`` for exactly 0."""
    if not math.isfinite(value):
        return f"{value}"
    if value == 0:
        return "0"
    rounded = round(value, places) + 0.0  # + 0.0: no "-0"
    if rounded != 0 and not 1e-4 <= abs(rounded) < 1e7:
        digits = math.floor(math.log10(abs(rounded))) + places
        return f"{rounded:.{max(digits, 0)}e}"
    return f"{rounded:.{max(places, 0)}f}"


def matched(value, se):
    """``(estimate, std. error, decimal places)`` as printed: the standard error to two
    significant digits and the estimate to the same decimal place, or to two significant
    digits of its own if that is finer (places None, six significant digits, where the
    standard error is 0 or not finite)."""
    if se is None or not (math.isfinite(se) and se > 0):
        return f"{value:.6g}", "fixed" if se is None else f"{se:.4g}", None
    places = decimal_place(se)
    if value != 0 and math.isfinite(value):
        places = max(places, decimal_place(value))
    return fixed(value, places), fixed(se, decimal_place(se)), places


def parameter_rows(result, model):
    """One dict per parameter row: ``label``, ``value``, ``se`` (None when fixed),
    ``interval`` (or None), ``bounds`` (the search box, or None when fixed), ``at_bound``,
    ``one_sided`` and ``weak``: the range in km on the sphere, the time range in days for
    dates, and the anisotropy angle also in degrees."""
    units = "km" if model.distance_ in ("chordal", "great_circle") else ""
    time_unit = result.get("time_unit")
    labels = {
        "range": units,
        "vertical_range": units,
        "time_range": "days" if time_unit else "",
        "anisotropy_angle": "rad",
    }
    box = parameter_bounds(model)
    intervals = result["intervals"] or {}
    rows = []
    for name, value in result["params"].items():
        fixed_value = name not in model.result_.estimated
        row = {
            "label": f"{name} ({labels[name]})" if labels.get(name) else name,
            "value": value,
            "se": None if fixed_value else result["stderr"][name],
            "interval": intervals.get(name),
            "bounds": box.get(name),
            "at_bound": name in result["at_bounds"],
            "one_sided": name in intervals.get("one_sided", ()),
            "weak": name in result["weakly_identified"],
        }
        rows.append(row)
        if name == "anisotropy_angle":
            degrees = np.degrees
            rows.append(
                {
                    **row,
                    "label": "anisotropy_angle (deg)",
                    "value": degrees(value),
                    "se": None if row["se"] is None else degrees(row["se"]),
                    "interval": None
                    if row["interval"] is None
                    else [degrees(b) for b in row["interval"]],
                    "bounds": None
                    if row["bounds"] is None
                    else [degrees(b) for b in row["bounds"]],
                    "weak": False,
                }
            )
    return rows


def interval_cells(row, places, method):
    """The two interval cells of a row: the ends to `places` (or five significant
    digits), ``> bound`` for an upper end at or beyond the search box, ``< bound`` for a
    profile interval's lower end on it (not a nugget's 0), ``unbounded`` when not
    finite; the end of a one-sided interval at the estimate's own bound is printed."""
    lower, upper = row["interval"]
    low, high = row["bounds"] if row["bounds"] is not None else (-math.inf, math.inf)
    own = None
    if row["one_sided"]:
        own = "lower" if abs(row["value"] - low) <= abs(high - row["value"]) else "upper"

    def cell(end, which):
        if not math.isfinite(end):
            return "unbounded"
        if which != own:
            if which == "upper" and end >= high - BOUND_RTOL * abs(high):
                return "> bound"
            if (
                which == "lower"
                and method == "profile"
                and low > 0
                and end <= low + BOUND_RTOL * abs(low)
            ):
                return "< bound"
        return f"{end:.5g}" if places is None else fixed(end, places)

    return cell(lower, "lower"), cell(upper, "upper")


def table(result, model):
    value = result["value"]
    if isinstance(value, list):
        value = f"{len(value)} replicates {value[0]} ... {value[-1]}"
    elif result["replicate_dimension"]:
        value = f"{value}, {result['replicates']} replicates along {result['replicate_dimension']}"
    lines = [
        f"geostat fit: {result['data']}  (value: {value}, transform: {result['transform']}"
        + ("" if result["boxcox_lambda"] is None else f", lambda {result['boxcox_lambda']:.3g}")
        + ")",
        f"kernel {result['kernel']}, distance {result['distance']}, method {result['method']}"
        + (f" (accuracy {result['accuracy']:g})" if result["accuracy"] is not None else "")
        + (" on the GPU" if result["device"] == "gpu" else "")
        + (", REML" if result["reml"] else ""),
        *(
            [
                f"space-time: time {result['time']!r}"
                + (f" in {result['time_unit']}" if result["time_unit"] else " in its own unit")
            ]
            if result["time"]
            else []
        ),
        *([known_errors_line(result["known_errors"])] if result.get("known_errors") else []),
        "",
    ]
    rows = parameter_rows(result, model)
    coef = result["coef"] if isinstance(result["coef"], dict) else {}
    intervals = result["intervals"]
    width = max(14, *(len(row["label"]) + 2 for row in rows))
    lines.append(
        f"{'parameter':<{width}}{'estimate':>14}{'std. error':>14}" + interval_header(intervals)
    )
    for row in rows:
        estimate, se, places = matched(row["value"], row["se"])
        interval = ""
        if row["interval"] is not None:
            interval = "".join(f"{c:>14}" for c in interval_cells(row, places, intervals["method"]))
        notes = ", ".join(
            note
            for note, shown in (("weak", row["weak"]), ("one-sided", row["one_sided"]))
            if shown
        )
        star = "*" if row["at_bound"] else " "
        lines.append(
            f"{row['label']:<{width}}{estimate:>14}{star}{se:>13}{interval}"
            + (f"  {notes}" if notes else "")
        )
    for name, value in coef.items():
        estimate, se, _ = matched(value, result["coef_stderr"][name])
        lines.append(f"{name:<{width}}{estimate:>14}{se:>14}")
    if result["at_bounds"]:
        on_bound = ", ".join(
            f"{name} = {result['params'][name]:.4g}" for name in result["at_bounds"]
        )
        lines.append(
            f"* on its bound: {on_bound} (the likelihood is highest at the edge of the parameter "
            "space; standard errors there are not reliable)"
        )
    one_sided = intervals.get("one_sided", []) if intervals else []
    if one_sided:
        level = intervals["level"]
        if intervals["method"] == "profile":
            other = (
                f"where the deviance is {stats.chi2.ppf(max(2 * level - 1, 0.0), 1):.4g} (the "
                "one-sided likelihood-ratio test: chi-bar-squared, Self and Liang 1987)"
            )
        else:
            other = (
                f"{stats.norm.ppf(max(level, 0.5)):.4g} standard errors from the estimate "
                "(one-sided)"
            )
        lines.append(
            f"{ONE_SIDED}: {', '.join(one_sided)}: the interval runs from the bound; "
            f"its other end is {other}"
        )
    labels = {}
    for row in rows:
        labels.setdefault(row["label"].split(" (")[0], row["label"])
    for name, flag in result["weakly_identified"].items():
        lines.append(f"weak: {labels.get(name, name)}: {flag['reason']}. Try: {flag['remedy']}.")
    evaluations = f"full-data evaluations {result['n_evaluations']}"
    if result["n_pilot_evaluations"]:
        evaluations += f" (+ {result['n_pilot_evaluations']} on subsamples)"
    lines += [
        "",
        f"log-likelihood {result['loglik']:.6f}   n = {result['n']}   observations = "
        f"{result['n_observations']}",
        *(
            [
                f"estimated TLR error of the log-likelihood {result['loglik_error']:.2g}; distance "
                "to the exact maximum "
                + (
                    "unknown (derivative-free search)"
                    if result["gap_bound"] is None
                    else f"at most {result['gap_bound']:.2g} (95%)"
                )
            ]
            if result["accuracy"]
            else []
        ),
        f"converged: {result['converged']}   iterations {result['n_iter']}   {evaluations}",
        f"wall time {result['wall_time_s']:.2f} s",
    ]
    lines += [f"warning: {message}" for message in result["warnings"]]
    return "\n".join(lines)
