"""``geostat predict``: kriging (and conditional simulation) of a saved model at the sites
of a CSV table or on the grid of a NetCDF file.

``--samples`` writes at most ``MAX_SAMPLE_VALUES`` values, and at CSV sites (a column
per draw) at most ``MAX_SAMPLE_COLUMNS`` columns; larger requests are refused before any
work. At CSV sites the output repeats the sites' columns and adds ``mean``, ``std`` and
``sample_K`` (with replicates ``mean_R``, ``std_R``, ``sample_R_K``); a sites file with
such a column is refused. On a NetCDF grid the variables are named after the predicted
variable (``tas_mean``, ``tas_std``, ``tas_sample``; else ``mean``, ``std``,
``sample``) and keep the file's order of dimensions, coordinates with their attributes
and encoding, grid mapping, bounds variables, global attributes and the CF attributes of
:func:`geostat.data.fields.prediction_attrs`; a line ``<UTC time> geostat predict
<arguments>`` is appended to its ``history``.
"""

from __future__ import annotations

import itertools
import math
import shlex
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from geostat.cli.files import (
    MAX_SAMPLE_COLUMNS,
    MAX_SAMPLE_VALUES,
    OUTPUT_SUFFIXES,
    check_input,
    check_outputs,
    is_field,
    open_field,
    read_csv,
    write_predictions,
    xarray_module,
)
from geostat.cli.inputs import drop_singletons, numbers, select_field, spatial_dims, times
from geostat.cli.parser import verbose_level
from geostat.data import Trend
from geostat.data.fields import grid_mapping_names, prediction_attrs
from geostat.kernels.models import time_column

__all__ = ["run_predict"]


def run_predict(args):
    """``geostat predict``: krige a saved model at the given sites, write the output file;
    return the line that says what was written."""
    if args.samples is not None and args.samples < 1:
        raise ValueError(f"--samples must be a positive number of simulations; got {args.samples}")
    output = Path(args.output)
    if output.suffix.lower() not in OUTPUT_SUFFIXES:
        raise ValueError(
            f"-o {output}: the output file must end in {' or '.join(OUTPUT_SUFFIXES)} (CSV or "
            "NetCDF)"
        )
    check_outputs(
        [("-o", args.output)], [("model file", args.model), ("sites file", args.sites)], args.force
    )
    sites = Path(args.sites)
    if not is_field(sites) and args.select:
        raise ValueError(f"--select applies to a NetCDF file of sites, not to {sites}")
    model = load_model(Path(args.model), args)
    if is_field(sites):
        with open_field(sites) as template:
            predictions = predict_field(model, template, sites, args)
    else:
        predictions = predict_table(model, read_csv(sites, args.sep, args.encoding), sites, args)
    write_predictions(predictions, output, args.sep, history=history_line(args))
    return f"predictions {extent(predictions)} written to {output}"


def history_line(args):
    """The CF ``history`` line of this run: ``<UTC time, ISO 8601> geostat predict <arguments>``."""
    return (
        f"{datetime.now(timezone.utc):%Y-%m-%dT%H:%M:%SZ} geostat predict {command_arguments(args)}"
    )


def command_arguments(args):
    """The arguments of a parsed ``geostat predict`` command as a shell reads them: the
    model and sites files, then every option given (a flag when set; ``--select`` once
    per selection)."""
    words = [args.model, args.sites]
    for key, value in vars(args).items():
        if key in ("command", "model", "sites") or value is None or value is False:
            continue
        option = "--" + key.replace("_", "-")
        if value is True:
            words.append(option)
        elif isinstance(value, list):
            words += [word for item in value for word in (option, "=".join(map(str, item)))]
        else:
            words += [option, str(value)]
    return shlex.join(words)


def load_model(path, args):
    """The model saved at `path`; any failure to read it is one line naming the file."""
    from geostat.estimator import load

    check_input(path, "a model file")
    try:
        model = load(path)
    except MemoryError as exc:
        raise ValueError(
            f"not enough memory to load the model file {path} ({' '.join(str(exc).split())}); a "
            "damaged file can announce arrays larger than it holds: save the model again"
        ) from None
    except Exception as exc:  # a model file is untrusted input: whatever it breaks is bad input
        message = " ".join(str(exc).split())
        if isinstance(exc, (ValueError, OSError)) and str(path) in message:
            raise ValueError(message) from None
        raise ValueError(
            f"{path} is not a usable geostat model file ({type(exc).__name__}: {message}); give a "
            "file written by SpatialGP.save or 'geostat fit --save-model'"
        ) from None
    return model.set_params(verbose=verbose_level(args))


def replicate_count(model):
    """How many replicates the model predicts at each site (its rows of trend coefficients)."""
    coef = np.asarray(model.coef_)
    return 1 if coef.ndim < 2 else coef.shape[0]


def check_sample_size(samples, sites, replicates, columns):
    """Refuse (ValueError) ``--samples`` beyond the output bounds, before any work, for
    `sites` predicted sites or cells and `replicates`; `columns`: each draw is a CSV
    column."""
    if not samples:
        return
    by_values = MAX_SAMPLE_VALUES // max(sites * replicates, 1)
    most = min(by_values, MAX_SAMPLE_COLUMNS // replicates) if columns else by_values
    if samples <= most:
        return
    fewer = f"ask for at most {most} samples" if most else "predict at fewer sites"
    if samples > by_values:
        raise ValueError(
            f"--samples {samples}: {sites} sites x {replicates} replicate(s) x {samples} samples "
            f"is {sites * replicates * samples:,} values, above the {MAX_SAMPLE_VALUES:,} that "
            f"geostat predict writes; {fewer}"
        )
    raise ValueError(
        f"--samples {samples}: at the sites of a table each draw is a column, and "
        f"{samples * replicates:,} columns exceed the {MAX_SAMPLE_COLUMNS:,} allowed; {fewer}, or "
        "predict on a NetCDF grid (draws along a 'sample' dimension)"
    )


def site_columns(model, columns, path):
    """The columns of `path` the model was fitted on (coordinates, then covariates)."""
    names = [str(c) for c in getattr(model, "feature_names_in_", ())]
    if not names:
        raise ValueError(
            f"the model was fitted on arrays without column names, so the columns of {path} cannot "
            "be matched to it; fit it on a DataFrame, a CSV or a NetCDF field"
        )
    missing = [c for c in names if c not in columns]
    if missing:
        raise ValueError(
            f"{path} lacks the column(s) {missing} the model was fitted on ({names}); "
            f"it has {list(columns)}"
        )
    return names


def time_name(model, columns):
    """The time column of a space-time model among its fitted `columns` (coordinates and
    covariates, in the fitted order); None for a spatial model."""
    if not model.kernel_.time_axis:
        return None
    coordinates = [c for c in columns if c not in Trend.parse(model.trend).columns]
    time = time_column(model.kernel_, model.time, pd.DataFrame(columns=coordinates))
    if time is True:
        return coordinates[-1]
    return coordinates[time] if isinstance(time, int) else time


def predict_table(model, frame, path, args):
    """The sites' table followed by the kriging columns (and the draws) at its rows; a
    space-time model's time column may hold numbers or dates, as at fit time."""
    names = site_columns(model, frame.columns, path)
    time = time_name(model, names)
    sites = pd.DataFrame(
        {c: times(frame, c) if c == time else numbers(frame, c, "site") for c in names}
    )
    check_sample_size(args.samples, len(sites), replicate_count(model), columns=True)
    if args.std:
        mean, std = model.predict(sites, return_std=True)
        outputs = {"mean": pd.DataFrame(mean), "std": pd.DataFrame(std)}
    else:
        outputs = {"mean": pd.DataFrame(model.predict(sites))}
    added = {}
    for name, values in outputs.items():
        for label in values.columns:
            added[name if values.shape[1] == 1 else f"{name}_{label}"] = values[label].to_numpy()
    labels = outputs["mean"].columns
    replicates = [""] if len(labels) == 1 else [f"{label}_" for label in labels]
    sample_names = [
        f"sample_{replicate}{k}"
        for replicate, k in itertools.product(replicates, range(args.samples or 0))
    ]
    check_new_columns(frame.columns, [*added, *sample_names], path, args.output)
    if args.samples:
        draws = model.sample_y(
            sites, n_samples=args.samples, random_state=args.seed
        )  # pandas: one column a draw
        added |= {name: draws.iloc[:, j].to_numpy() for j, name in enumerate(sample_names)}
    return pd.concat([frame, pd.DataFrame(added, index=frame.index)], axis=1)


def check_new_columns(columns, new, path, output):
    """Refuse output columns that the sites' table already has (they would be overwritten),
    and a site column named ``site`` in a NetCDF output (its dimension)."""
    reserved = [*new, *(["site"] if Path(output).suffix.lower() == ".nc" else [])]
    clashes = [str(c) for c in columns if str(c) in reserved]
    if clashes:
        raise ValueError(
            f"{path} has column(s) {clashes}, which the output would overwrite with its own (mean, "
            "std, sample_K, and site in NetCDF); rename or drop those columns of the sites file"
        )


def predict_field(model, template, path, args):
    """Kriging (and draws) on every cell of a NetCDF template, as an xarray Dataset named,
    ordered and described after the template's variable (see the module notes)."""
    xarray = xarray_module(path)
    covariates = Trend.parse(model.trend).columns
    coordinates = [
        c for c in getattr(model, "feature_names_in_", ("x", "y")) if c not in covariates
    ]
    missing = [c for c in coordinates if c not in template.coords]
    if missing:
        raise ValueError(
            f"{path} lacks the coordinate(s) {missing} the model was fitted on; it has "
            f"{sorted(map(str, template.coords))}"
        )
    time = time_name(model, list(getattr(model, "feature_names_in_", ())))
    if time is not None:
        check_no_time_selection(template, args.select, time, path)
    stored = template  # the order of its variable's dimensions in the file, length-1 ones included
    template = select_field(template, args.select, path, tuple(coordinates))
    spatial = spatial_dims(template, tuple(coordinates))
    template = drop_singletons(template, template.dims, spatial, keep_replicate=False)
    cells = math.prod(template.sizes[d] for d in spatial)
    check_sample_size(args.samples, cells, replicate_count(model), columns=False)
    if args.std:
        mean, std = model.predict(template, return_std=True)
        fields = {"mean": mean, "std": std}
    else:
        fields = {"mean": model.predict(template)}
    if args.samples:
        fields["sample"] = model.sample_y(template, n_samples=args.samples, random_state=args.seed)
    name = input_variable(template, covariates, spatial)
    coords = {k: c for field in fields.values() for k, c in field.coords.items()}
    carried = carried_variables(template, name, coords)
    outputs = {}
    for kind, field in fields.items():
        if name is not None:
            field = field.transpose(*[d for d in stored[name].dims if d in field.dims], ...)
            field.attrs = prediction_attrs(template[name], kind, {*carried, *coords})
        outputs[kind if name is None else f"{name}_{kind}"] = field.load()
    return xarray.Dataset(outputs | {v: template[v] for v in carried}, attrs=dict(template.attrs))


def input_variable(template, covariates, spatial):
    """The variable of a sites file that the predictions stand for: its one data variable
    over every spatial dimension that is not a trend covariate; None when it has no such
    variable, or several."""
    names = [
        str(n)
        for n, v in template.data_vars.items()
        if set(spatial) <= set(v.dims) and n not in covariates
    ]
    return names[0] if len(names) == 1 else None


def carried_variables(template, name, coords):
    """The variables of the template that the predictions refer to and that are not among
    their coordinates `coords`: the grid mapping of the variable `name` (CF
    ``grid_mapping``), and the bounds of the coordinates (CF ``bounds``)."""
    wanted = []
    if name is not None:
        source = template[name]
        mapping = source.attrs.get("grid_mapping", source.encoding.get("grid_mapping"))
        wanted += grid_mapping_names(mapping) if mapping else []
    wanted += [str(c.attrs["bounds"]) for c in coords.values() if "bounds" in c.attrs]
    return [v for v in dict.fromkeys(wanted) if v in template.variables and v not in coords]


def check_no_time_selection(template, selections, time, path):
    """Refuse ``--select`` along the time of a space-time model: the template's times are
    the times predicted."""
    dims = set(template[time].dims) if time in template.coords else set()
    chosen = [f"{dim}={value}" for dim, value in selections or () if dim in dims or dim == time]
    if chosen:
        raise ValueError(
            f"--select {chosen[0]}: the model is a space-time one, and the times of {path} "
            f"({time!r}) are the times it predicts; give a sites file with only the times wanted "
            "instead"
        )


def extent(predictions):
    """``"at 12 sites"`` for a table, ``"on lat 8 x lon 10"`` (the dimensions of the mean, its
    first variable) for a field."""
    if isinstance(predictions, pd.DataFrame):
        return f"at {len(predictions)} sites"
    return "on " + " x ".join(
        f"{d} {n}" for d, n in predictions[next(iter(predictions.data_vars))].sizes.items()
    )
