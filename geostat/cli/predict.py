"""``geostat predict``: kriging (and conditional simulation) of a saved model at the sites
of a CSV table or on the grid of a NetCDF file."""

from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd

from geostat.cli.files import (OUTPUT_SUFFIXES, check_input, check_output, is_field, open_field, read_csv,
                               write_predictions, xarray_module)
from geostat.cli.inputs import numbers
from geostat.cli.parser import verbose_level
from geostat.data import Trend

__all__ = ["run_predict"]


def run_predict(args):
    """``geostat predict``: krige a saved model at the given sites, write the output file;
    return the line that says what was written."""
    from geostat.estimator import load

    if args.samples is not None and args.samples < 1:
        raise ValueError(f"--samples must be a positive number of simulations; got {args.samples}")
    output = Path(args.output)
    if output.suffix.lower() not in OUTPUT_SUFFIXES:
        raise ValueError(f"-o {output}: the output file must end in {' or '.join(OUTPUT_SUFFIXES)} (CSV or NetCDF)")
    check_output(args.output, "-o")
    model_path = Path(args.model)
    check_input(model_path, "a model file")
    model = load(model_path).set_params(verbose=verbose_level(args))
    sites = Path(args.sites)
    if is_field(sites):
        with open_field(sites) as template:
            predictions = predict_field(model, template, sites, args)
    else:
        predictions = predict_table(model, read_csv(sites, args.sep), sites, args)
    write_predictions(predictions, output, args.sep)
    return f"predictions {extent(predictions)} written to {output}"


def site_columns(model, columns, path):
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


def predict_table(model, frame, path, args):
    names = site_columns(model, frame.columns, path)
    sites = pd.DataFrame({c: numbers(frame, c, "site") for c in names})
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


def predict_field(model, template, path, args):
    xarray = xarray_module(path)
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


def extent(predictions):
    """``"at 12 sites"`` for a table, ``"on lat 8 x lon 10"`` (the mean's dimensions) for a field."""
    if isinstance(predictions, pd.DataFrame):
        return f"at {len(predictions)} sites"
    return "on " + " x ".join(f"{d} {n}" for d, n in predictions["mean"].sizes.items())

