"""The ``geostat`` command.

``geostat fit`` with no file fits the bundled default climate dataset (summer
precipitation of 1720 North American stations, log scale) and prints a table of
estimates with standard errors, the log-likelihood, n, the method and the wall time. It
also fits a CSV table (one row per site; lon/lat or x/y columns are found by name) or a
NetCDF field (any file xarray opens: a lon/lat or x/y grid or station dimension, its other
dimension, e.g. time, as replicates, NaN cells missing), and ``--save-model`` writes the
fitted model. With ``--space-time`` the field (or a CSV table with a time column, one row
per site and time) is one space-time field fitted with a ``SpaceTime`` kernel; dates
become days since 1970-01-01. ``--anisotropy geometric`` estimates a geometric
anisotropy. ``geostat predict`` kriges a saved model at the sites of a CSV table or on the
grid of a NetCDF file (for a space-time model at the times of its time coordinate), into a
CSV or NetCDF file. ``geostat cv`` cross-validates a saved model (leave-one-out or K-fold,
from the training data its file holds) and prints the scores. ``geostat datasets`` lists
the bundled datasets. Bad input stops with one line on standard error and exit status 2.

No output may be one of the inputs; an existing output file is replaced only with
``--force``; every output is written whole or not at all, so a failed or interrupted run
leaves the previous file as it was (:mod:`geostat.cli.files`).
"""

from __future__ import annotations

import sys

import numpy as np

from geostat import datasets
from geostat.cli.cv import run_cv
from geostat.cli.fit import run_fit
from geostat.cli.parser import build_parser
from geostat.cli.predict import run_predict

__all__ = ["main"]

#: The library's documented error types (misuse, files, memory, numerical failure): bad input, exit 2.
INPUT_ERRORS = (
    ValueError,
    TypeError,
    MemoryError,
    OSError,
    np.linalg.LinAlgError,
    NotImplementedError,
)


def main(argv=None):
    """Entry point of the ``geostat`` command: 0 on success, 2 for bad input, 130 when interrupted,
    1 for an unexpected error. Each command returns its report, written here to standard
    output; a failure writes one line on standard error, never a traceback."""
    args = build_parser().parse_args(argv)
    log_handler = None
    try:
        if getattr(args, "verbose", False):
            from geostat.optimize.progress import log_to_stderr

            log_handler = log_to_stderr()
        report = {"fit": run_fit, "predict": run_predict, "cv": run_cv, "datasets": list_datasets}[
            args.command
        ](args)
        sys.stdout.write(report + "\n")
        return 0
    except INPUT_ERRORS as exc:
        return fail(" ".join(str(exc).split()) or type(exc).__name__, 2)
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except Exception as exc:
        return fail(
            f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())} (please report this)",
            1,
        )
    finally:
        if log_handler is not None:
            log_handler.remove()


def fail(message, status):
    """Write ``geostat: message`` on standard error; return `status`."""
    sys.stderr.write(f"geostat: {message}\n")
    return status


def list_datasets(args):
    """``geostat datasets``: the table of bundled datasets."""
    rows = [f"{'name':<26}{'rows':>8}  description"]
    for name in datasets.names():
        info = datasets.info(name)
        rows.append(f"{name:<26}{info['n']:>8}  {info['description']}")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
