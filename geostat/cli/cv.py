"""``geostat cv``: cross-validation of a saved model, from the training data its file holds.

Leave-one-out or K-fold at the fitted parameters (:func:`geostat.validation.cross_validate`),
or K-fold refitted on each training fold (``--refit``). The scores are printed;
``--output`` writes the per-observation results to a CSV file.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

from geostat.cli.files import check_outputs, write_predictions
from geostat.cli.predict import load_model
from geostat.optimize.intervals import check_level
from geostat.validation import SCORES, cross_validate

__all__ = ["run_cv", "score_table"]

#: What each score is ideally (a calibrated model), or how it compares, for the table.
IDEAL = {
    "crps": "lower is better",
    "log_score": "lower is better",
    "rmse": "lower is better",
    "mae": "lower is better",
    "standardized_mean": "0",
    "standardized_std": "1",
}


def run_cv(args):
    """``geostat cv``: cross-validate the saved model, write the CSV if asked; return the
    report. The output path (a ``.csv``), ``--level`` and ``--refit`` are checked before
    the model is read."""
    start = time.perf_counter()
    check_outputs([("--output", args.output)], [("model file", args.model)], args.force)
    if args.output and Path(args.output).suffix.lower() != ".csv":
        raise ValueError(
            f"--output {args.output}: the per-observation results are a table; give a file name "
            "ending in .csv"
        )
    level = check_level(args.level)  # before any work
    if args.refit and args.cv == "loo":
        raise ValueError(
            "--refit refits the model on each training fold of K-fold cross-validation; add --cv K "
            "(e.g. --cv 5), or drop --refit for leave-one-out"
        )
    model = load_model(Path(args.model), args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = cross_validate(
            model, cv=args.cv, level=level, refit=args.refit, random_state=args.seed, as_table=True
        )
    lines = [score_table(result, args.model, model, time.perf_counter() - start)]
    lines += [f"warning: {message}" for message in dict.fromkeys(str(w.message) for w in caught)]
    if args.output:
        write_predictions(result, Path(args.output), ",")
        lines.append(f"results of {len(result)} observations written to {args.output}")
    return "\n".join(lines)


def score_table(result, source, model, elapsed):
    """The report of ``geostat cv``: what was held out, then one row per score."""
    attrs = result.attrs
    scheme = (
        "leave-one-out"
        if attrs["cv"] == "loo"
        else f"{attrs['cv']} folds" + (", refitted on each" if attrs["refit"] else "")
    )
    lines = [
        f"geostat cv: {source}  ({scheme}; {len(result)} observations at "
        f"{result['site'].nunique()} sites; method {model.method_}"
        + ("" if model.noise_variance_ is None else "; with the known error variances")
        + ")",
        "",
        f"{'score':<20}{'value':>14}  ideal",
    ]
    for name in SCORES:
        ideal = f"{attrs['level']:g}" if name == "coverage" else IDEAL[name]
        label = f"coverage ({attrs['level']:.0%})" if name == "coverage" else name
        lines.append(f"{label:<20}{attrs['scores'][name]:>14.6g}  {ideal}")
    transform = model._transform().name
    units = (
        "rmse, mae and crps are in the units of the observations"
        if transform == "identity"
        else "rmse and mae are in the units of the observations, crps on the "
        f"{transform} scale the model was fitted on (as the standardized residuals and the "
        "coverage)"
    )
    lines += [
        "",
        f"{units}; log_score is the mean negative log predictive density of the observations",
        f"wall time {elapsed:.2f} s",
    ]
    return "\n".join(lines)
