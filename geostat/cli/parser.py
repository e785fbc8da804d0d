"""The argument parser of the ``geostat`` command."""

from __future__ import annotations

import argparse
import codecs

from geostat import datasets
from geostat._version import DISTRIBUTION, __version__
from geostat.cli.files import (
    FALLBACK_ENCODING,
    FIELD_SUFFIXES,
    MAX_SAMPLE_COLUMNS,
    MAX_SAMPLE_VALUES,
)
from geostat.cli.inputs import TRANSFORMS

__all__ = ["build_parser", "verbose_level"]


def build_parser():
    parser = argparse.ArgumentParser(
        prog="geostat", description="Gaussian-process maximum likelihood for geostatistics."
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__} ({DISTRIBUTION})"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    fit = commands.add_parser("fit", help="fit a covariance model by maximum likelihood")
    fit.add_argument(
        "file",
        nargs="?",
        help="CSV file with one row per site, or a NetCDF field (any file xarray "
        f"opens, named *{', *'.join(FIELD_SUFFIXES[:4])}, ...); default: a bundled dataset",
    )
    fit.add_argument(
        "--dataset", help=f"bundled dataset (default {datasets.DEFAULT!r}; see 'geostat datasets')"
    )
    fit.add_argument(
        "--coords",
        help="comma-separated coordinate columns of a CSV file (default: lon/lat or "
        "longitude/latitude by name, else x,y)",
    )
    fit.add_argument(
        "--value", help="column of observations (several, comma-separated, are replicates)"
    )
    fit.add_argument("--var", help="variable of a NetCDF file (needed when it has several)")
    fit.add_argument(
        "--time-slice",
        metavar="START:END",
        help="fit only the steps START to END (inclusive; either "
        "may be left out) of a NetCDF field's time dimension, e.g. 1999-01:1999-06",
    )
    fit.add_argument(
        "--time-index",
        type=int,
        metavar="I",
        help="fit only step I (from 0) of a NetCDF field's time dimension",
    )
    add_select(fit)
    fit.add_argument(
        "--sep", default=",", help="column separator of a CSV file (default ','; '\\t' for tab)"
    )
    add_encoding(fit)
    fit.add_argument(
        "--transform",
        choices=TRANSFORMS,
        help="fit the Gaussian process to log(value) or its Box-Cox transform (lambda by maximum "
        "likelihood); estimates are in the transformed units, the log-likelihood and "
        "'geostat predict' output in the units of the value",
    )
    fit.add_argument(
        "--covariates",
        default="",
        help="comma-separated covariate columns (or variables of a NetCDF file) for the trend",
    )
    noise = fit.add_mutually_exclusive_group()
    noise.add_argument(
        "--noise-variance",
        metavar="COLUMN",
        help="column of a table (or variable of a NetCDF field, on its grid) holding each "
        "row's (cell's) known measurement-error variance (units of the value squared, 0 for "
        "none; ignored where the value is missing), added to the covariance's diagonal besides "
        "the nugget; kept in the saved model and used by 'geostat cv'. Not with --transform "
        "log|boxcox",
    )
    noise.add_argument(
        "--noise-sd",
        metavar="COLUMN",
        help="as --noise-variance, from known standard deviations (units of the value), squared",
    )
    fit.add_argument(
        "--trend",
        default="constant",
        choices=["none", "constant", "linear"],
        help="trend without covariates",
    )
    fit.add_argument(
        "--kernel", default="matern", help="exponential, matern, powered_exponential or gaussian"
    )
    fit.add_argument(
        "--smoothness", type=float, help="fix the Matern smoothness (default: estimate it)"
    )
    fit.add_argument(
        "--anisotropy",
        choices=["geometric"],
        help="estimate a geometric anisotropy of the spatial "
        "kernel (anisotropy_ratio, anisotropy_angle; x/y or lon/lat in a tangent plane)",
    )
    fit.add_argument(
        "--space-time",
        action="store_true",
        help="fit one space-time field: every observed cell "
        "(site, time) is an observation, with a SpaceTime kernel (--kernel in space, --time-kernel "
        "in time); dates become days since 1970-01-01",
    )
    fit.add_argument("--time-kernel", help="temporal family of --space-time (default exponential)")
    fit.add_argument(
        "--separable",
        action="store_true",
        help="with --space-time: the separable model (separability fixed at 0)",
    )
    fit.add_argument(
        "--time",
        metavar="NAME",
        help="with --space-time: the time column of a CSV file (default: the "
        "column named time), or the time coordinate of a NetCDF field (default: that of its "
        "non-spatial dimension); numbers or dates",
    )
    fit.add_argument("--nugget", default="estimate", help="'estimate', 'none', or a fixed value")
    fit.add_argument("--distance", default="auto", help="auto, euclidean, chordal or great_circle")
    fit.add_argument(
        "--method", default="auto", help="auto, exact or tlr (auto: tlr from 4096 sites)"
    )
    fit.add_argument(
        "--accuracy",
        type=_accuracy,
        default="auto",
        help="relative accuracy of the TLR method: 'auto' "
        "(default: chosen by the optimizer for each evaluation) or a number in (0, 1)",
    )
    fit.add_argument("--tile-size", type=int, help="TLR tile size (default grows like sqrt(n))")
    fit.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "gpu"],
        help="where the likelihood is evaluated (gpu: a CUDA GPU through CuPy, the 'gpu' extra)",
    )
    fit.add_argument("--reml", action="store_true", help="maximize the restricted likelihood")
    fit.add_argument(
        "--seed", type=int, default=0, help="random seed of the optimizer's pilot stage"
    )
    fit.add_argument(
        "--output",
        help="write the results as JSON to this file (strict JSON: a non-finite number, "
        "e.g. an infinite standard error or an unbounded confidence limit, is written as null)",
    )
    fit.add_argument(
        "--save-model",
        metavar="PATH",
        help="write the fitted model to this file (for 'geostat "
        "predict' and geostat.load), e.g. model.npz",
    )
    fit.add_argument(
        "--ci",
        nargs="?",
        const="profile",
        choices=["profile", "wald", "log-wald"],
        help="95%% confidence intervals of the covariance parameters (default method: profile "
        "likelihood; wald or log-wald are instant)",
    )
    fit.add_argument(
        "--level", type=float, default=0.95, help="confidence level of --ci (default 0.95)"
    )
    add_force(fit)
    add_verbosity(fit)
    predict = commands.add_parser(
        "predict", help="kriging predictions of a saved model at new sites"
    )
    predict.add_argument(
        "model", help="model file written by 'geostat fit --save-model' or SpatialGP.save"
    )
    predict.add_argument(
        "sites",
        help="CSV file of sites (the fitted coordinate and covariate columns), or a "
        "NetCDF file whose grid (lon/lat or x/y coordinates) is predicted",
    )
    predict.add_argument(
        "-o",
        "--output",
        required=True,
        help="output file: .csv (the sites' columns, then mean, "
        "std, sample_K; sites with columns of these names are refused) or .nc (variables VAR_mean, "
        "VAR_std, VAR_sample named after the grid's variable, else mean, std, sample)",
    )
    predict.add_argument(
        "--std", action="store_true", help="also write the kriging standard deviation"
    )
    predict.add_argument(
        "--samples",
        type=int,
        metavar="K",
        help="also write K conditional simulations (at most "
        f"{MAX_SAMPLE_VALUES:,} values in all, sites x replicates x K; at CSV sites, where each is "
        f"a column, at most {MAX_SAMPLE_COLUMNS:,} columns)",
    )
    predict.add_argument(
        "--seed",
        type=int,
        metavar="S",
        help="random seed of the simulations (default: the model's random_state)",
    )
    predict.add_argument(
        "--sep", default=",", help="column separator of CSV files (default ','; '\\t' for tab)"
    )
    add_encoding(predict)
    add_select(predict)
    add_force(predict)
    add_verbosity(predict)
    cv = commands.add_parser(
        "cv", help="cross-validation of a saved model at its fitted parameters"
    )
    cv.add_argument(
        "model",
        help="model file written by 'geostat fit --save-model' or SpatialGP.save (it holds the "
        "training data)",
    )
    cv.add_argument(
        "--cv",
        type=_folds,
        default="loo",
        metavar="loo|K",
        help="leave-one-out (default) or K folds of randomly shuffled sites",
    )
    cv.add_argument(
        "--level",
        type=float,
        default=0.9,
        help="probability of the central predictive intervals of the coverage score (default 0.9)",
    )
    cv.add_argument(
        "--refit",
        action="store_true",
        help="with K folds: refit the model by maximum likelihood on "
        "each training fold (K fits) instead of keeping the fitted parameters",
    )
    cv.add_argument("--seed", type=int, default=0, help="random seed of the folds (default 0)")
    cv.add_argument(
        "-o",
        "--output",
        help="write the per-observation results to this CSV file (site, coordinates, "
        "replicate, fold, observed, mean, std, standardized)",
    )
    add_force(cv)
    add_verbosity(cv)
    commands.add_parser("datasets", help="list the bundled datasets")
    return parser


def add_force(command):
    """--force: replace existing output files (refused by default, so that no result is lost)."""
    command.add_argument(
        "--force",
        action="store_true",
        help="replace output files that already exist (without "
        "it they are refused; an output may never be one of the input files)",
    )


def add_encoding(command):
    """--encoding of CSV input files."""
    command.add_argument(
        "--encoding",
        type=_encoding,
        help=f"text encoding of a CSV file (default: UTF-8, and "
        f"{FALLBACK_ENCODING} with a warning for a file that is not valid UTF-8)",
    )


def add_select(command):
    """--select DIM=VALUE (repeatable) for NetCDF inputs."""
    command.add_argument(
        "--select",
        action="append",
        type=_selection,
        metavar="DIM=VALUE",
        help="keep one label "
        "of a dimension of the NetCDF file besides the spatial ones, e.g. zlev=0, level=850 or "
        "time=1999-07 (a number, a date or a partial date, or text; a position from 0 for a "
        "dimension without coordinate values); repeatable. Other dimensions of length 1 are "
        "dropped in any case (one stays when all have length 1: the single replicate of a fit)",
    )


def add_verbosity(command):
    """-v/--verbose and -q/--quiet (default: progress on standard error when it is a terminal)."""
    group = command.add_mutually_exclusive_group()
    group.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show progress always and log what is done "
        "(method, tile size, accuracy, ranks, stages) at INFO on standard error",
    )
    group.add_argument(
        "-q", "--quiet", action="store_true", help="no progress and no log: only the results"
    )


def verbose_level(args):
    """``SpatialGP(verbose=...)`` of the -v/-q options: 1, 0, or None (automatic)."""
    return 1 if args.verbose else 0 if args.quiet else None


def _selection(text):
    """``--select``: ``(DIM, VALUE)`` of ``DIM=VALUE``."""
    dim, equals, value = text.partition("=")
    if not equals or not dim.strip() or not value.strip():
        raise argparse.ArgumentTypeError(
            f"expected DIM=VALUE, e.g. zlev=0 or time=1999-07; got {text!r}"
        )
    return dim.strip(), value.strip()


def _encoding(text):
    """``--encoding``: a codec name Python knows."""
    try:
        return codecs.lookup(text).name
    except LookupError:
        raise argparse.ArgumentTypeError(
            f"unknown encoding {text!r}; e.g. utf-8, latin-1, cp1252"
        ) from None


def _folds(text):
    """``--cv``: ``"loo"`` or a number of folds."""
    if text == "loo":
        return text
    try:
        folds = int(text)
    except ValueError:
        folds = 0
    if folds < 2:
        raise argparse.ArgumentTypeError(
            f"expected 'loo' or a number of folds of at least 2 such as 5, got {text!r}"
        )
    return folds


def _accuracy(text):
    """``--accuracy``: ``"auto"`` or a number."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected 'auto' or a number in (0, 1), got {text!r}"
        ) from None
