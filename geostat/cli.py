"""The ``geostat`` command.

``geostat fit`` with no file fits the bundled default climate dataset (summer
precipitation of 1720 North American stations, log scale) and prints a table of
estimates with standard errors, the log-likelihood, n, the method and the wall time. It
also fits a CSV table (one row per site; lon/lat or x/y columns are found by name) or a
NetCDF field (any file xarray opens: a lon/lat or x/y grid or station dimension, its other
dimension, e.g. time, as replicates, NaN cells missing), and ``--save-model`` writes the
fitted model. ``geostat predict`` kriges a saved model at the sites of a CSV table or on
the grid of a NetCDF file, into a CSV or NetCDF file. ``geostat datasets`` lists the
bundled datasets. Bad input stops with one line on standard error and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from geostat import datasets
from geostat._version import DISTRIBUTION, __version__
from geostat.data import XARRAY_POSITIONS, Trend, table_from_field
from geostat.distance import find_lonlat
from geostat.optimize.intervals import check_level

#: File name endings read with xarray (as NetCDF and the like); any other file is read as CSV.
FIELD_SUFFIXES = (".nc", ".nc4", ".netcdf", ".cdf", ".h5", ".hdf5", ".zarr", ".grib", ".grib2", ".grb", ".grb2")
#: File name endings ``geostat predict`` writes.
OUTPUT_SUFFIXES = (".csv", ".nc")

# The library's documented error types (misuse, files, memory, numerical failure): bad input, exit 2.
_INPUT_ERRORS = (ValueError, TypeError, MemoryError, OSError, np.linalg.LinAlgError, NotImplementedError)
_TRANSFORMS = {"none": lambda v: v, "log": np.log, "log10": np.log10}
_NETCDF_EXTRA = f'pip install "{DISTRIBUTION}[netcdf]"'


def _parser():
    parser = argparse.ArgumentParser(prog="geostat", description="Gaussian-process maximum likelihood for geostatistics.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__} ({DISTRIBUTION})")
    commands = parser.add_subparsers(dest="command", required=True)
    fit = commands.add_parser("fit", help="fit a covariance model by maximum likelihood")
    fit.add_argument("file", nargs="?", help="CSV file with one row per site, or a NetCDF field (any file xarray "
                     f"opens, named *{', *'.join(FIELD_SUFFIXES[:4])}, ...); default: a bundled dataset")
    fit.add_argument("--dataset", help=f"bundled dataset (default {datasets.DEFAULT!r}; see 'geostat datasets')")
    fit.add_argument("--coords", help="comma-separated coordinate columns of a CSV file (default: lon/lat or "
                     "longitude/latitude by name, else x,y)")
    fit.add_argument("--value", help="column of observations (several, comma-separated, are replicates)")
    fit.add_argument("--var", help="variable of a NetCDF file (needed when it has several)")
    fit.add_argument("--time-slice", metavar="START:END", help="fit only the steps START to END (inclusive; either "
                     "may be left out) of a NetCDF field's time dimension, e.g. 1999-01:1999-06")
    fit.add_argument("--time-index", type=int, metavar="I", help="fit only step I (from 0) of a NetCDF field's "
                     "time dimension")
    fit.add_argument("--sep", default=",", help="column separator of a CSV file (default ','; '\\t' for tab)")
    fit.add_argument("--transform", choices=sorted(_TRANSFORMS), help="transform of the observations")
    fit.add_argument("--covariates", default="", help="comma-separated covariate columns (or variables of a "
                     "NetCDF file) for the trend")
    fit.add_argument("--trend", default="constant", choices=["none", "constant", "linear"], help="trend without covariates")
    fit.add_argument("--kernel", default="matern", help="exponential, matern, powered_exponential or gaussian")
    fit.add_argument("--smoothness", type=float, help="fix the Matern smoothness (default: estimate it)")
    fit.add_argument("--nugget", default="estimate", help="'estimate', 'none', or a fixed value")
    fit.add_argument("--distance", default="auto", help="auto, euclidean, chordal or great_circle")
    fit.add_argument("--method", default="auto", help="auto, exact or tlr (auto: tlr from 4096 sites)")
    fit.add_argument("--accuracy", type=float, default=1e-8, help="relative accuracy of the TLR method")
    fit.add_argument("--tile-size", type=int, help="TLR tile size (default grows like sqrt(n))")
    fit.add_argument("--reml", action="store_true", help="maximize the restricted likelihood")
    fit.add_argument("--seed", type=int, default=0, help="random seed of the optimizer's pilot stage")
    fit.add_argument("--output", help="write the results as JSON to this file")
    fit.add_argument("--save-model", metavar="PATH", help="write the fitted model to this file (for 'geostat "
                     "predict' and geostat.load), e.g. model.npz")
    fit.add_argument("--ci", nargs="?", const="profile", choices=["profile", "wald", "log-wald"],
                     help="95%% confidence intervals of the covariance parameters (default method: profile "
                          "likelihood; wald or log-wald are instant)")
    fit.add_argument("--level", type=float, default=0.95, help="confidence level of --ci (default 0.95)")
    _add_verbosity(fit)
    predict = commands.add_parser("predict", help="kriging predictions of a saved model at new sites")
    predict.add_argument("model", help="model file written by 'geostat fit --save-model' or SpatialGP.save")
    predict.add_argument("sites", help="CSV file of sites (the fitted coordinate and covariate columns), or a "
                         "NetCDF file whose grid (lon/lat or x/y coordinates) is predicted")
    predict.add_argument("-o", "--output", required=True, help="output file: .csv (the sites' columns, then mean, "
                         "std, samples) or .nc (variables mean, std, sample)")
    predict.add_argument("--std", action="store_true", help="also write the kriging standard deviation")
    predict.add_argument("--samples", type=int, metavar="K", help="also write K conditional simulations")
    predict.add_argument("--seed", type=int, metavar="S", help="random seed of the simulations (default: the "
                         "model's random_state)")
    predict.add_argument("--sep", default=",", help="column separator of CSV files (default ','; '\\t' for tab)")
    _add_verbosity(predict)
    commands.add_parser("datasets", help="list the bundled datasets")
    return parser


def _add_verbosity(command):
    """-v/--verbose and -q/--quiet (default: progress on standard error when it is a terminal)."""
    group = command.add_mutually_exclusive_group()
    group.add_argument("-v", "--verbose", action="store_true", help="show progress always and log what is done "
                       "(method, tile size, accuracy, ranks, stages) at INFO on standard error")
    group.add_argument("-q", "--quiet", action="store_true", help="no progress and no log: only the results")


def _verbose(args):
    """``SpatialGP(verbose=...)`` of the -v/-q options: 1, 0, or None (automatic)."""
    return 1 if args.verbose else 0 if args.quiet else None


def _split(text):
    return [part.strip() for part in text.split(",") if part.strip()] if text else []


def _separator(text):
    return "\t" if text == "\\t" else text


def _nugget(text):
    if text == "estimate":
        return True
    if text == "none":
        return False
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"--nugget must be 'estimate', 'none' or a number; got {text!r}") from None


def _is_field(path):
    return path.suffix.lower() in FIELD_SUFFIXES


def _check_input(path, what="a CSV file"):
    if not path.exists():
        raise ValueError(f"no such file: {path}")
    if path.is_dir() and not _is_field(path):
        raise ValueError(f"{path} is a folder; give {what}")


def _read_csv(path, sep=","):
    _check_input(path)
    try:
        return pd.read_csv(path, sep=_separator(sep))
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a text CSV file (it holds binary data); give a CSV file with a header row") from None
    except Exception as exc:  # any parser or decompression failure is bad input
        raise ValueError(f"cannot read {path} as CSV ({str(exc).strip()}); give a {_sep_name(sep)}-separated file "
                         "with a header row (--sep sets the separator)") from None


def _sep_name(sep):
    return {",": "comma", ";": "semicolon", "\\t": "tab", "\t": "tab"}.get(sep, repr(sep))


def _xarray(path):
    """The xarray module, or a one-line error saying how to install it."""
    try:
        import xarray
    except ImportError:
        raise ValueError(f"reading or writing {path} needs xarray and netCDF4: {_NETCDF_EXTRA}") from None
    return xarray


def _open_field(path):
    """The xarray Dataset of a NetCDF (or other xarray-readable) file, opened lazily."""
    _check_input(path)
    xarray = _xarray(path)
    try:
        return xarray.open_dataset(path)
    except Exception as exc:  # any reader failure is bad input
        hint = f"; install the NetCDF readers: {_NETCDF_EXTRA}" if importlib.util.find_spec("netCDF4") is None else ""
        raise ValueError(f"cannot read {path} with xarray ({' '.join(str(exc).split())}){hint}; give a NetCDF file "
                         "(or another format xarray reads)") from None


def _numbers(frame, column, role, missing_ok=False):
    """The column as floats; anything but a finite number (or NaN where `missing_ok`) is an error."""
    raw = frame[column]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(values) & ~(missing_ok & raw.isna().to_numpy()))
    if bad.size:
        first = "a missing value" if pd.isna(raw.iloc[bad[0]]) else repr(raw.iloc[bad[0]])
        raise ValueError(
            f"{role} column {column!r} must hold {'numbers' if missing_ok else 'finite numbers'}: {bad.size} value(s) "
            f"are not; the first, in data row {bad[0] + 1}, is {first}; fix or drop those rows"
        )
    if missing_ok and np.isnan(values).all():
        raise ValueError(f"{role} column {column!r} has no values (all missing); choose another column with --value")
    return values


def _transformed(values, column, transform):
    bad = np.flatnonzero(values <= 0)
    if transform != "none" and bad.size:
        raise ValueError(
            f"--transform {transform} needs positive values, but value column {column!r} has {bad.size} value(s) <= 0 "
            f"(the first {values[bad[0]]:g} in data row {bad[0] + 1}); use --transform none or shift the column"
        )
    return _TRANSFORMS[transform](values)


@dataclass
class _FitData:
    """What ``geostat fit`` fits, and how the report names it."""

    source: str
    X: object  # DataFrame of sites and covariates, or an xarray Dataset holding the field
    y: object  # observations (ndarray), or the name of the field's variable
    value: object  # value column(s) or variable name
    transform: str
    covariates: list
    n: int
    n_observations: int
    replicates: int
    replicate_dimension: object = None  # a field's replicate dimension (e.g. "time"), or None


def _load(args):
    if args.file and args.dataset:
        raise ValueError("give either FILE or --dataset, not both")
    if args.file and _is_field(Path(args.file)):
        with _open_field(Path(args.file)) as dataset:
            return _load_field(args, dataset, str(args.file))
    if args.dataset and datasets.info(args.dataset)["layout"] == "grid":
        return _load_field(args, datasets.load(args.dataset, as_xarray=True), args.dataset)
    for option, value in (("--var", args.var), ("--time-slice", args.time_slice), ("--time-index", args.time_index)):
        if value is not None:
            raise ValueError(f"{option} applies to a NetCDF file (named *{', *'.join(FIELD_SUFFIXES[:4])}, ...), "
                             f"not to {args.file or 'a bundled dataset'}; name the column of a table with --value")
    if args.file:
        frame = _read_csv(Path(args.file), args.sep)
        info = {"coords": None, "value": None, "transform": None}
        source = args.file
    else:
        source = args.dataset or datasets.DEFAULT
        frame, info = datasets.load(source), datasets.info(source)
    coords = _split(args.coords) or info["coords"] or _detect_coords(frame, source)
    value = _split(args.value) or info["value"]
    if not value:
        raise ValueError(f"name the column of observations with --value; {source} has columns {list(frame.columns)}")
    value = [value] if isinstance(value, str) else list(value)
    transform = args.transform or info.get("transform") or "none"
    covariates = _split(args.covariates)
    missing = [c for c in [*coords, *value, *covariates] if c not in frame.columns]
    if missing:
        raise ValueError(f"columns {missing} are not in the data; it has {list(frame.columns)}")
    y = np.column_stack([_transformed(_numbers(frame, c, "value", missing_ok=True), c, transform) for c in value])
    X = pd.DataFrame({c: _numbers(frame, c, "coordinate") for c in coords} | {c: _numbers(frame, c, "covariate") for c in covariates})
    return _FitData(source, X, y[:, 0] if len(value) == 1 else y, value if len(value) > 1 else value[0], transform,
                    covariates, len(X), int(np.isfinite(y).sum()), len(value))


def _detect_coords(frame, source):
    """Longitude/latitude columns by name (as the library recognises them), else x and y."""
    columns = [str(c) for c in frame.columns]
    found = find_lonlat(columns)
    if found is not None:
        return [columns[found[0]], columns[found[1]]]
    if {"x", "y"} <= set(columns):
        return ["x", "y"]
    raise ValueError(
        f"{source} has no coordinate columns named lon/lat (or longitude/latitude) or x/y; name them with --coords "
        f"(e.g. --coords easting,northing); its columns are {columns}"
    )


def _load_field(args, dataset, path):
    """The field to fit from an xarray Dataset (a NetCDF file's, or a gridded bundled dataset)."""
    for option, value in (("--coords", args.coords), ("--value", args.value)):
        if value:
            raise ValueError(f"{option} applies to CSV files; a NetCDF field's sites are its lon/lat (or x/y) "
                             "coordinates and --var names its variable")
    covariates = _split(args.covariates)
    name = _variable(dataset, args.var or _default_variable(path), path)
    label = f"variable {name!r} of {path}"
    dataset = _select_steps(dataset, dataset[name], args, label)
    kept = [name, *(c for c in covariates if c in dataset.data_vars)]
    dataset = dataset[kept].load()
    transform = args.transform or "none"
    dataset[name] = _transformed_field(dataset[name], label, transform)
    X, y, layout = table_from_field(dataset[name], label, covariates, dataset)
    return _FitData(str(path), dataset, name, name, transform, covariates, len(X), int(np.isfinite(y).sum()),
                    1 if y.ndim == 1 else y.shape[1], layout.replicate_dim)


def _default_variable(source):
    """The modelled variable of a bundled gridded dataset (None for a file)."""
    return datasets.info(source)["value"] if source in datasets.names() else None


def _variable(dataset, var, path):
    names = [str(v) for v in dataset.data_vars]
    if var is None:
        if len(names) != 1:
            raise ValueError(f"{path} has {len(names)} data variables {names}; choose one with --var"
                             if names else f"{path} has no data variable to fit")
        return names[0]
    if var not in names:
        raise ValueError(f"--var {var} is not a data variable of {path}; it has {names}")
    return var


def _replicate_dimension(da, label):
    """The one dimension of a field besides the spatial ones (e.g. time)."""
    spatial = {d for pair in XARRAY_POSITIONS if set(pair) <= set(map(str, da.coords)) for name in pair
               for d in da[name].dims}
    others = [str(d) for d in da.dims if d not in spatial]
    if not spatial or len(others) != 1:
        raise ValueError(
            f"--time-slice and --time-index select along the one time (non-spatial) dimension of {label}, but its "
            f"dimensions are {[str(d) for d in da.dims]}" + ("" if spatial else ", with no lon/lat or x/y coordinates")
        )
    return others[0]


def _select_steps(dataset, da, args, label):
    """`dataset` restricted to the steps of --time-slice or --time-index (if given)."""
    if args.time_slice is None and args.time_index is None:
        return dataset
    if args.time_slice is not None and args.time_index is not None:
        raise ValueError("give --time-slice or --time-index, not both")
    dim = _replicate_dimension(da, label)
    size = dataset.sizes[dim]
    if args.time_index is not None:
        if not -size <= args.time_index < size:
            raise ValueError(f"--time-index {args.time_index} is out of range: {dim} of {label} has {size} steps "
                             f"(0 to {size - 1})")
        return dataset.isel({dim: args.time_index})
    if dim not in dataset.coords:
        raise ValueError(f"--time-slice needs coordinate values along {dim} of {label}, which has none; "
                         "use --time-index")
    values = dataset[dim].values
    start, end = _slice_bounds(args.time_slice, values.dtype.kind in "iuf")
    span = f"{dim} runs from {_step_label(values[0])} to {_step_label(values[-1])}"
    try:
        chosen = dataset.sel({dim: slice(start, end)})
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"--time-slice {args.time_slice} cannot select from {label} ({span}): "
                         f"{' '.join(str(exc).split())}") from None
    if chosen.sizes[dim] == 0:
        raise ValueError(f"--time-slice {args.time_slice} selects no step of {label}; {span}")
    return chosen


def _step_label(value):
    """A coordinate value as a user writes it (dates without a midnight time of day)."""
    if isinstance(value, np.datetime64):
        return str(pd.Timestamp(value)).removesuffix(" 00:00:00")
    return str(value)


def _slice_bounds(text, numeric):
    """``(start, end)`` of ``START:END`` (None where left out), numbers for a numeric coordinate."""
    if text.count(":") != 1:
        raise ValueError(f"--time-slice must be START:END (e.g. 1999-01:1999-06; either may be left out); got {text!r}")
    bounds = [part.strip() or None for part in text.split(":")]
    if not numeric:
        return bounds
    try:
        return [None if b is None else float(b) for b in bounds]
    except ValueError:
        raise ValueError(f"--time-slice {text}: the time coordinate holds numbers, so START and END must be "
                         "numbers") from None


def _transformed_field(da, label, transform):
    values = da.values
    bad = values <= 0  # NaN cells compare False: they stay missing
    if transform != "none" and bad.any():
        raise ValueError(
            f"--transform {transform} needs positive values, but {label} has {int(bad.sum())} value(s) <= 0 "
            f"(the first {values[bad][0]:g}); use --transform none"
        )
    return da.copy(data=_TRANSFORMS[transform](values))


def _check_output(text, option):
    """Refuse an output path that cannot be written, before any work."""
    path = Path(text)
    if path.is_dir():
        raise ValueError(f"{option} {path} is a folder; give the name of a file (in it or elsewhere)")
    if not path.parent.is_dir():
        raise ValueError(f"{option} {path}: folder {path.parent} does not exist; create it or choose another path")
    existed = path.exists()
    try:
        path.open("a").close()
    except OSError as exc:
        raise ValueError(f"{option} {path} cannot be written ({exc.strerror}); choose a writable path") from None
    if not existed:
        path.unlink()


def _fit(args):
    from geostat.estimator import SpatialGP

    start = time.perf_counter()
    for option, path in (("--output", args.output), ("--save-model", args.save_model)):
        if path:
            _check_output(path, option)
    if args.ci:
        check_level(args.level)  # before the fit, not after it
    data = _load(args)
    model = SpatialGP(
        kernel=args.kernel,
        smoothness=args.smoothness,
        nugget=_nugget(args.nugget),
        trend=data.covariates if data.covariates else (None if args.trend == "none" else args.trend),
        distance=args.distance,
        method=args.method,
        accuracy=args.accuracy,
        tile_size=args.tile_size,
        reml=args.reml,
        random_state=args.seed,
        verbose=_verbose(args),
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
        "transform": data.transform,
        "n": data.n,
        "n_observations": data.n_observations,
        "kernel": _fitted_kernel(model),
        "distance": model.distance_,
        "method": model.method_,
        "accuracy": model.accuracy_,
        "loglik_error": model.loglik_error_,
        "reml": bool(args.reml),
        "params": model.params_,
        "stderr": model.stderr_,
        "coef": _by_name(model, model.coef_),
        "coef_stderr": _by_name(model, model.coef_stderr_),
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
    print(_table(result, model))
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=2))
        print(f"results written to {args.output}")
    if args.save_model:
        model.save(args.save_model)
        print(f"model written to {args.save_model}")
    return 0


def _by_name(model, values):
    """Trend coefficients (or standard errors) by name for one replicate; a list per replicate for several."""
    values = np.asarray(values)
    return dict(zip(model.coef_names_, values.tolist())) if values.ndim == 1 else values.tolist()


def _fitted_kernel(model):
    """The kernel with its shape parameters at their estimates, e.g. ``Matern(smoothness=1.23)``."""
    kernel = model.kernel_
    shape = ", ".join(f"{name}={model.params_[name]:.4g}" for name in kernel.shape_names)
    return f"{type(kernel).__name__}({shape})"


def _interval_header(intervals):
    """Column titles of the confidence interval, e.g. ``95% lower (profile)``."""
    if intervals is None:
        return ""
    percent = f"{100 * intervals['level']:g}%"
    return f"{percent + ' lower':>14}{percent + ' upper':>14}  ({intervals['method']})"


def _table(result, model):
    units = " km" if model.distance_ in ("chordal", "great_circle") else ""
    value = result["value"]
    if isinstance(value, list):
        value = f"{len(value)} replicates {value[0]} ... {value[-1]}"
    elif result["replicate_dimension"]:
        value = f"{value}, {result['replicates']} replicates along {result['replicate_dimension']}"
    lines = [
        f"geostat fit: {result['data']}  (value: {value}, transform: {result['transform']})",
        f"kernel {result['kernel']}, distance {result['distance']}, method {result['method']}"
        + (f" (accuracy {result['accuracy']:g})" if result["accuracy"] is not None else "")
        + (", REML" if result["reml"] else ""),
        "",
        f"{'parameter':<14}{'estimate':>14}{'std. error':>14}" + _interval_header(result["intervals"]),
    ]
    for name, value in result["params"].items():
        fixed = name not in model.result_.estimated
        se = "fixed" if fixed else f"{result['stderr'][name]:.4g}"
        label = f"{name} ({units.strip()})" if name == "range" and units else name
        mark = "*" if name in result["at_bounds"] else " "
        bounds = (result["intervals"] or {}).get(name)
        interval = f"{bounds[0]:>14.5g}{bounds[1]:>14.5g}" if bounds else ""
        lines.append(f"{label:<14}{value:>14.6g}{mark}{se:>13}{interval}")
    if isinstance(result["coef"], dict):
        for name, value in result["coef"].items():
            lines.append(f"{name:<14}{value:>14.6g}{result['coef_stderr'][name]:>14.4g}")
    if result["at_bounds"]:
        on_bound = ", ".join(f"{name} = {result['params'][name]:.4g}" for name in result["at_bounds"])
        lines.append(f"* on its bound: {on_bound} (the likelihood is highest at the edge of the parameter space; "
                     "standard errors there are not reliable)")
    lines += [
        "",
        f"log-likelihood {result['loglik']:.6f}   n = {result['n']}   observations = {result['n_observations']}",
        *([f"estimated TLR error of the log-likelihood {result['loglik_error']:.2g}"] if result["accuracy"] else []),
        f"converged: {result['converged']}   iterations {result['n_iter']}   evaluations {result['n_evaluations']}",
        f"wall time {result['wall_time_s']:.2f} s",
    ]
    lines += [f"warning: {message}" for message in result["warnings"]]
    return "\n".join(lines)


def _predict(args):
    from geostat.estimator import load

    if args.samples is not None and args.samples < 1:
        raise ValueError(f"--samples must be a positive number of simulations; got {args.samples}")
    output = Path(args.output)
    if output.suffix.lower() not in OUTPUT_SUFFIXES:
        raise ValueError(f"-o {output}: the output file must end in {' or '.join(OUTPUT_SUFFIXES)} (CSV or NetCDF)")
    _check_output(args.output, "-o")
    model_path = Path(args.model)
    _check_input(model_path, "a model file")
    model = load(model_path).set_params(verbose=_verbose(args))
    sites = Path(args.sites)
    if _is_field(sites):
        with _open_field(sites) as template:
            predictions = _predict_field(model, template, sites, args)
    else:
        predictions = _predict_table(model, _read_csv(sites, args.sep), sites, args)
    _write(predictions, output, args.sep)
    print(f"predictions {_extent(predictions)} written to {output}")
    return 0


def _site_columns(model, columns, path):
    """The columns of `path` the model was fitted on (coordinates, then covariates)."""
    names = [str(c) for c in getattr(model, "feature_names_in_", ())]
    if not names:
        raise ValueError(f"the model was fitted on arrays without column names, so the columns of {path} cannot be "
                         "matched to it; fit it on a DataFrame, a CSV or a NetCDF field")
    missing = [c for c in names if c not in columns]
    if missing:
        raise ValueError(f"{path} lacks the column(s) {missing} the model was fitted on ({names}); "
                         f"it has {list(columns)}")
    return names


def _predict_table(model, frame, path, args):
    names = _site_columns(model, frame.columns, path)
    sites = pd.DataFrame({c: _numbers(frame, c, "site") for c in names})
    table = frame.copy()
    if args.std:
        mean, std = model.predict(sites, return_std=True)
        outputs = {"mean": mean, "std": std}
    else:
        outputs = {"mean": model.predict(sites)}
    for name, values in outputs.items():
        values = pd.DataFrame(values)
        for label in values.columns:
            table[name if values.shape[1] == 1 else f"{name}_{label}"] = values[label].to_numpy()
    if args.samples:
        draws = model.sample_y(sites, n_samples=args.samples, random_state=args.seed)  # pandas: one column a draw
        replicates = [""] if draws.columns.nlevels == 1 else [f"{label}_" for label in pd.DataFrame(outputs["mean"]).columns]
        for j, (replicate, k) in enumerate(itertools.product(replicates, range(args.samples))):
            table[f"sample_{replicate}{k}"] = draws.iloc[:, j].to_numpy()
    return table


def _predict_field(model, template, path, args):
    xarray = _xarray(path)
    covariates = Trend.parse(model.trend).columns
    coordinates = [c for c in getattr(model, "feature_names_in_", ("x", "y")) if c not in covariates]
    missing = [c for c in coordinates if c not in template.coords]
    if missing:
        raise ValueError(f"{path} lacks the coordinate(s) {missing} the model was fitted on; it has "
                         f"{sorted(map(str, template.coords))}")
    if args.std:
        mean, std = model.predict(template, return_std=True)
        fields = {"mean": mean, "std": std}
    else:
        fields = {"mean": model.predict(template)}
    if args.samples:
        fields["sample"] = model.sample_y(template, n_samples=args.samples, random_state=args.seed)
    return xarray.Dataset({name: field.load() for name, field in fields.items()}, attrs=dict(template.attrs))


def _extent(predictions):
    """``"at 12 sites"`` for a table, ``"on lat 8 x lon 10"`` (the mean's dimensions) for a field."""
    if isinstance(predictions, pd.DataFrame):
        return f"at {len(predictions)} sites"
    return "on " + " x ".join(f"{d} {n}" for d, n in predictions["mean"].sizes.items())


def _write(predictions, path, sep):
    """Predictions (a table or an xarray Dataset) as CSV or NetCDF, by the name of `path`."""
    table = isinstance(predictions, pd.DataFrame)
    if path.suffix.lower() == ".csv":
        (predictions if table else predictions.to_dataframe().reset_index()).to_csv(path, index=False,
                                                                                   sep=_separator(sep))
    elif table:
        _xarray(path).Dataset.from_dataframe(predictions.rename_axis("site")).to_netcdf(path)
    else:
        predictions.to_netcdf(path)


def _datasets(args):
    rows = []
    for name in datasets.names():
        info = datasets.info(name)
        rows.append(f"{name:<26}{info['n']:>8}  {info['description']}")
    print(f"{'name':<26}{'rows':>8}  description")
    print("\n".join(rows))
    return 0


def main(argv=None):
    """Entry point of the ``geostat`` command: 0 on success, 2 for bad input, 130 when interrupted,
    1 for an unexpected error; a failure prints one line on stderr, never a traceback."""
    args = _parser().parse_args(argv)
    log_handler = None
    try:
        if getattr(args, "verbose", False):
            from geostat.optimize.progress import log_to_stderr

            log_handler = log_to_stderr()
        return {"fit": _fit, "predict": _predict, "datasets": _datasets}[args.command](args)
    except _INPUT_ERRORS as exc:
        return _fail(" ".join(str(exc).split()) or type(exc).__name__, 2)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:
        return _fail(f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())} (please report this)", 1)
    finally:
        if log_handler is not None:
            log_handler.remove()


def _fail(message, status):
    print(f"geostat: {message}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
