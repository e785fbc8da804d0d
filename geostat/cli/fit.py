"""``geostat fit``: fit, then print the table of estimates (and write JSON and the model)."""

from __future__ import annotations

import time
import warnings

import numpy as np

from geostat.cli.files import check_outputs, write_json, written_path
from geostat.cli.inputs import load_fit_data
from geostat.cli.parser import verbose_level
from geostat.optimize.intervals import check_level

__all__ = ["run_fit", "table"]


def run_fit(args):
    """``geostat fit``: fit, write the JSON and the model if asked; return the report (the
    table, then the files written).

    The output paths are checked before the data are read: neither may be the input
    file nor each other, nor an existing file unless ``--force``. The JSON is strict
    (non-finite numbers written as ``null``) and written atomically; the model file too
    (:meth:`SpatialGP.save`).
    """
    from geostat.estimator import SpatialGP

    start = time.perf_counter()
    check_outputs([("--output", args.output), ("--save-model", args.save_model)], [("input file", args.file)],
                  args.force)
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
        trend=data.covariates if data.covariates else (None if args.trend == "none" else args.trend),
        distance=args.distance,
        method=args.method,
        accuracy=args.accuracy,
        tile_size=args.tile_size,
        device=args.device,
        reml=args.reml,
        random_state=args.seed,
        verbose=verbose_level(args),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(data.X, data.y)
        intervals = model.confidence_intervals(args.level, args.ci) if args.ci else None
    elapsed = time.perf_counter() - start
    result = {
        "data": data.source,
        "value": data.value,
        "replicates": data.replicates,
        "replicate_dimension": data.replicate_dimension,
        "time": data.time,
        "time_unit": model.time_unit_,
        "transform": data.transform,
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
        "at_bounds": model.result_.at_bounds,
        "intervals": None if intervals is None else {
            "method": args.ci, "level": args.level,
            **{name: [row.lower, row.upper] for name, row in intervals.iterrows()},
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
        for option, given in (("--time-kernel", args.time_kernel), ("--separable", args.separable),
                              ("--time", args.time)):
            if given:
                raise ValueError(f"{option} applies to a space-time fit; add --space-time")
        return args.kernel, args.smoothness
    space = get_kernel(args.kernel, args.smoothness)
    return SpaceTime(space=space, time=args.time_kernel or "exponential",
                     separability=0.0 if args.separable else None), None


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
    """Trend coefficients (or standard errors) by name for one replicate; a list per replicate for several."""
    values = np.asarray(values)
    return dict(zip(model.coef_names_, values.tolist())) if values.ndim == 1 else values.tolist()


def fitted_kernel(model):
    """The kernel with its shape parameters at their estimates, e.g. ``Matern(smoothness=1.23)``."""
    kernel = model.kernel_
    shape = ", ".join(f"{name}={model.params_[name]:.4g}" for name in kernel.shape_names)
    return f"{type(kernel).__name__}({shape})"


def interval_header(intervals):
    """Column titles of the confidence interval, e.g. ``95% lower (profile)``."""
    if intervals is None:
        return ""
    percent = f"{100 * intervals['level']:g}%"
    return f"{percent + ' lower':>14}{percent + ' upper':>14}  ({intervals['method']})"


def parameter_rows(result, model):
    """``(label, estimate, std. error or "fixed", interval or None, at bound)`` of each
    parameter: the range in km on the sphere, the time range in days for dates, and the
    anisotropy angle also in degrees."""
    units = "km" if model.distance_ in ("chordal", "great_circle") else ""
    time_unit = result.get("time_unit")
    labels = {"range": units, "vertical_range": units,
              "time_range": "days" if time_unit else "", "anisotropy_angle": "rad"}
    rows = []
    for name, value in result["params"].items():
        fixed = name not in model.result_.estimated
        se = None if fixed else result["stderr"][name]
        bounds = (result["intervals"] or {}).get(name)
        mark = name in result["at_bounds"]
        label = f"{name} ({labels[name]})" if labels.get(name) else name
        rows.append((label, value, se, bounds, mark))
        if name == "anisotropy_angle":
            degrees = np.degrees
            rows.append(("anisotropy_angle (deg)", degrees(value), None if se is None else degrees(se),
                         None if bounds is None else [degrees(b) for b in bounds], mark))
    return rows


def table(result, model):
    value = result["value"]
    if isinstance(value, list):
        value = f"{len(value)} replicates {value[0]} ... {value[-1]}"
    elif result["replicate_dimension"]:
        value = f"{value}, {result['replicates']} replicates along {result['replicate_dimension']}"
    lines = [
        f"geostat fit: {result['data']}  (value: {value}, transform: {result['transform']})",
        f"kernel {result['kernel']}, distance {result['distance']}, method {result['method']}"
        + (f" (accuracy {result['accuracy']:g})" if result["accuracy"] is not None else "")
        + (" on the GPU" if result["device"] == "gpu" else "")
        + (", REML" if result["reml"] else ""),
        *([f"space-time: time {result['time']!r}"
           + (f" in {result['time_unit']}" if result["time_unit"] else " in its own unit")] if result["time"] else []),
        "",
    ]
    rows = parameter_rows(result, model)
    coef = result["coef"] if isinstance(result["coef"], dict) else {}
    width = max(14, *(len(row[0]) + 2 for row in rows))
    lines.append(f"{'parameter':<{width}}{'estimate':>14}{'std. error':>14}" + interval_header(result["intervals"]))
    for label, value, se, bounds, at_bound in rows:
        se = "fixed" if se is None else f"{se:.4g}"
        interval = f"{bounds[0]:>14.5g}{bounds[1]:>14.5g}" if bounds else ""
        lines.append(f"{label:<{width}}{value:>14.6g}{'*' if at_bound else ' '}{se:>13}{interval}")
    for name, value in coef.items():
        lines.append(f"{name:<{width}}{value:>14.6g}{result['coef_stderr'][name]:>14.4g}")
    if result["at_bounds"]:
        on_bound = ", ".join(f"{name} = {result['params'][name]:.4g}" for name in result["at_bounds"])
        lines.append(f"* on its bound: {on_bound} (the likelihood is highest at the edge of the parameter space; "
                     "standard errors there are not reliable)")
    lines += [
        "",
        f"log-likelihood {result['loglik']:.6f}   n = {result['n']}   observations = {result['n_observations']}",
        *([f"estimated TLR error of the log-likelihood {result['loglik_error']:.2g}; distance to the exact maximum "
           + ("unknown (derivative-free search)" if result["gap_bound"] is None
              else f"at most {result['gap_bound']:.2g} (95%)")] if result["accuracy"] else []),
        f"converged: {result['converged']}   iterations {result['n_iter']}   evaluations {result['n_evaluations']}",
        f"wall time {result['wall_time_s']:.2f} s",
    ]
    lines += [f"warning: {message}" for message in result["warnings"]]
    return "\n".join(lines)

