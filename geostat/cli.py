"""The ``geostat`` command.

``geostat fit`` with no file fits the bundled default climate dataset (summer
precipitation of 1720 North American stations, log scale) and prints a table of
estimates with standard errors, the log-likelihood, n, the method and the wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from geostat import datasets

# The library's documented error types (misuse, files, memory, numerical failure): bad input, exit 2.
_INPUT_ERRORS = (ValueError, TypeError, MemoryError, OSError, np.linalg.LinAlgError, NotImplementedError)
_TRANSFORMS = {"none": lambda v: v, "log": np.log, "log10": np.log10}


def _parser():
    parser = argparse.ArgumentParser(prog="geostat", description="Gaussian-process maximum likelihood for geostatistics.")
    commands = parser.add_subparsers(dest="command", required=True)
    fit = commands.add_parser("fit", help="fit a covariance model by maximum likelihood")
    fit.add_argument("file", nargs="?", help="CSV file with one row per site (default: a bundled dataset)")
    fit.add_argument("--dataset", help=f"bundled dataset (default {datasets.DEFAULT!r}; see 'geostat datasets')")
    fit.add_argument("--coords", help="comma-separated coordinate columns, e.g. lon,lat")
    fit.add_argument("--value", help="column of observations (several, comma-separated, are replicates)")
    fit.add_argument("--transform", choices=sorted(_TRANSFORMS), help="transform of the observations")
    fit.add_argument("--covariates", default="", help="comma-separated covariate columns for the trend")
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
    commands.add_parser("datasets", help="list the bundled datasets")
    return parser


def _split(text):
    return [part.strip() for part in text.split(",") if part.strip()] if text else []


def _nugget(text):
    if text == "estimate":
        return True
    if text == "none":
        return False
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"--nugget must be 'estimate', 'none' or a number; got {text!r}") from None


def _read_csv(path):
    if not path.exists():
        raise ValueError(f"no such file: {path}")
    if path.is_dir():
        raise ValueError(f"{path} is a folder; give a CSV file")
    try:
        return pd.read_csv(path)
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a text CSV file (it holds binary data); give a CSV file with a header row") from None
    except Exception as exc:  # any parser or decompression failure is bad input
        raise ValueError(f"cannot read {path} as CSV ({str(exc).strip()}); give a comma-separated file with a header row") from None


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


def _load(args):
    if args.file and args.dataset:
        raise ValueError("give either FILE or --dataset, not both")
    if args.file:
        frame = _read_csv(Path(args.file))
        info = {"coords": None, "value": None, "transform": None}
        source = args.file
    else:
        source = args.dataset or datasets.DEFAULT
        frame, info = datasets.load(source), datasets.info(source)
    coords = _split(args.coords) or info["coords"]
    value = _split(args.value) or info["value"]
    if not coords or not value:
        raise ValueError("name the columns with --coords (e.g. lon,lat) and --value")
    value = [value] if isinstance(value, str) else list(value)
    transform = args.transform or info.get("transform") or "none"
    covariates = _split(args.covariates)
    missing = [c for c in [*coords, *value, *covariates] if c not in frame.columns]
    if missing:
        raise ValueError(f"columns {missing} are not in the data; it has {list(frame.columns)}")
    y = np.column_stack([_transformed(_numbers(frame, c, "value", missing_ok=True), c, transform) for c in value])
    X = pd.DataFrame({c: _numbers(frame, c, "coordinate") for c in coords} | {c: _numbers(frame, c, "covariate") for c in covariates})
    return source, X, (y[:, 0] if len(value) == 1 else y), value, transform, covariates


def _check_output(text):
    """Refuse an --output path that cannot be written, before the fit."""
    path = Path(text)
    if path.is_dir():
        raise ValueError(f"--output {path} is a folder; give a file name such as {path / 'result.json'}")
    if not path.parent.is_dir():
        raise ValueError(f"--output {path}: folder {path.parent} does not exist; create it or choose another path")
    existed = path.exists()
    try:
        path.open("a").close()
    except OSError as exc:
        raise ValueError(f"--output {path} cannot be written ({exc.strerror}); choose a writable path") from None
    if not existed:
        path.unlink()


def _fit(args):
    from geostat.estimator import SpatialGP

    start = time.perf_counter()
    if args.output:
        _check_output(args.output)
    source, X, y, value, transform, covariates = _load(args)
    model = SpatialGP(
        kernel=args.kernel,
        smoothness=args.smoothness,
        nugget=_nugget(args.nugget),
        trend=covariates if covariates else (None if args.trend == "none" else args.trend),
        distance=args.distance,
        method=args.method,
        accuracy=args.accuracy,
        tile_size=args.tile_size,
        reml=args.reml,
        random_state=args.seed,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    elapsed = time.perf_counter() - start
    result = {
        "data": source,
        "value": value if len(value) > 1 else value[0],
        "transform": transform,
        "n": int(len(X)),
        "n_observations": int(np.isfinite(y).sum()),
        "kernel": repr(model.kernel_),
        "distance": model.distance_,
        "method": model.method_,
        "accuracy": model.accuracy_,
        "loglik_error": model.loglik_error_,
        "reml": bool(args.reml),
        "params": model.params_,
        "stderr": model.stderr_,
        "coef": dict(zip(model.coef_names_, np.atleast_2d(model.coef_)[0].tolist())) if len(value) == 1 else np.asarray(model.coef_).tolist(),
        "coef_stderr": dict(zip(model.coef_names_, np.atleast_2d(model.coef_stderr_)[0].tolist())) if len(value) == 1 else np.asarray(model.coef_stderr_).tolist(),
        "loglik": model.loglik_,
        "converged": model.converged_,
        "n_iter": model.n_iter_,
        "n_evaluations": model.n_evaluations_,
        "at_bounds": model.result_.at_bounds,
        "wall_time_s": elapsed,
        "warnings": [str(w.message) for w in caught],
    }
    print(_table(result, model))
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=2))
        print(f"results written to {args.output}")
    return 0


def _table(result, model):
    units = " km" if model.distance_ in ("chordal", "great_circle") else ""
    value = result["value"]
    if isinstance(value, list):
        value = f"{len(value)} replicates {value[0]} ... {value[-1]}"
    lines = [
        f"geostat fit: {result['data']}  (value: {value}, transform: {result['transform']})",
        f"kernel {result['kernel']}, distance {result['distance']}, method {result['method']}"
        + (f" (accuracy {result['accuracy']:g})" if result["accuracy"] is not None else "")
        + (", REML" if result["reml"] else ""),
        "",
        f"{'parameter':<14}{'estimate':>14}{'std. error':>14}",
    ]
    for name, value in result["params"].items():
        fixed = name not in model.result_.estimated
        se = "fixed" if fixed else f"{result['stderr'][name]:.4g}"
        label = f"{name} ({units.strip()})" if name == "range" and units else name
        lines.append(f"{label:<14}{value:>14.6g}{se:>14}")
    if isinstance(result["coef"], dict):
        for name, value in result["coef"].items():
            lines.append(f"{name:<14}{value:>14.6g}{result['coef_stderr'][name]:>14.4g}")
    lines += [
        "",
        f"log-likelihood {result['loglik']:.6f}   n = {result['n']}   observations = {result['n_observations']}",
        *([f"estimated TLR error of the log-likelihood {result['loglik_error']:.2g}"] if result["accuracy"] else []),
        f"converged: {result['converged']}   iterations {result['n_iter']}   evaluations {result['n_evaluations']}",
        f"wall time {result['wall_time_s']:.2f} s",
    ]
    lines += [f"warning: {message}" for message in result["warnings"]]
    return "\n".join(lines)


def _datasets():
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
    try:
        return _fit(args) if args.command == "fit" else _datasets()
    except _INPUT_ERRORS as exc:
        return _fail(" ".join(str(exc).split()) or type(exc).__name__, 2)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:
        return _fail(f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())} (please report this)", 1)


def _fail(message, status):
    print(f"geostat: {message}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
