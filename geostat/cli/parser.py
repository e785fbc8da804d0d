"""The argument parser of the ``geostat`` command."""

from __future__ import annotations

import argparse

from geostat import datasets
from geostat._version import DISTRIBUTION, __version__
from geostat.cli.files import FIELD_SUFFIXES
from geostat.cli.inputs import TRANSFORMS

__all__ = ["build_parser", "verbose_level"]


def build_parser():
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
    fit.add_argument("--transform", choices=sorted(TRANSFORMS), help="transform of the observations")
    fit.add_argument("--covariates", default="", help="comma-separated covariate columns (or variables of a "
                     "NetCDF file) for the trend")
    fit.add_argument("--trend", default="constant", choices=["none", "constant", "linear"], help="trend without covariates")
    fit.add_argument("--kernel", default="matern", help="exponential, matern, powered_exponential or gaussian")
    fit.add_argument("--smoothness", type=float, help="fix the Matern smoothness (default: estimate it)")
    fit.add_argument("--nugget", default="estimate", help="'estimate', 'none', or a fixed value")
    fit.add_argument("--distance", default="auto", help="auto, euclidean, chordal or great_circle")
    fit.add_argument("--method", default="auto", help="auto, exact or tlr (auto: tlr from 4096 sites)")
    fit.add_argument("--accuracy", type=_accuracy, default="auto", help="relative accuracy of the TLR method: 'auto' "
                     "(default: chosen by the optimizer for each evaluation) or a number in (0, 1)")
    fit.add_argument("--tile-size", type=int, help="TLR tile size (default grows like sqrt(n))")
    fit.add_argument("--device", default="cpu", choices=["cpu", "gpu"], help="where the likelihood is evaluated "
                     "(gpu: a CUDA GPU through CuPy, the 'gpu' extra)")
    fit.add_argument("--reml", action="store_true", help="maximize the restricted likelihood")
    fit.add_argument("--seed", type=int, default=0, help="random seed of the optimizer's pilot stage")
    fit.add_argument("--output", help="write the results as JSON to this file")
    fit.add_argument("--save-model", metavar="PATH", help="write the fitted model to this file (for 'geostat "
                     "predict' and geostat.load), e.g. model.npz")
    fit.add_argument("--ci", nargs="?", const="profile", choices=["profile", "wald", "log-wald"],
                     help="95%% confidence intervals of the covariance parameters (default method: profile "
                          "likelihood; wald or log-wald are instant)")
    fit.add_argument("--level", type=float, default=0.95, help="confidence level of --ci (default 0.95)")
    add_verbosity(fit)
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
    add_verbosity(predict)
    commands.add_parser("datasets", help="list the bundled datasets")
    return parser


def add_verbosity(command):
    """-v/--verbose and -q/--quiet (default: progress on standard error when it is a terminal)."""
    group = command.add_mutually_exclusive_group()
    group.add_argument("-v", "--verbose", action="store_true", help="show progress always and log what is done "
                       "(method, tile size, accuracy, ranks, stages) at INFO on standard error")
    group.add_argument("-q", "--quiet", action="store_true", help="no progress and no log: only the results")


def verbose_level(args):
    """``SpatialGP(verbose=...)`` of the -v/-q options: 1, 0, or None (automatic)."""
    return 1 if args.verbose else 0 if args.quiet else None


def _accuracy(text):
    """``--accuracy``: ``"auto"`` or a number."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a number in (0, 1), got {text!r}") from None
