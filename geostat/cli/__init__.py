"""The ``geostat`` command.

``geostat fit`` fits the bundled default dataset (no file), a CSV table (one row per
site; lon/lat or x/y columns found by name) or a NetCDF field (a grid or station
dimension, its other dimension as replicates), prints the estimates with standard
errors, and with ``--save-model`` writes the model; ``--space-time`` fits one
space-time field, ``--anisotropy geometric`` a geometric anisotropy, ``--noise-variance``
takes a table's known measurement-error variances. ``geostat predict``
kriges a saved model at the sites of a CSV table or on the grid of a NetCDF file.
``geostat cv`` cross-validates a saved model. ``geostat datasets`` lists the bundled
datasets. Bad input stops with one line on standard error and exit status 2. No output
may be an input; an existing output is replaced only with ``--force``; outputs are
written atomically (:mod:`geostat.cli.files`).
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

#: The library's documented error types (misuse, files, memory, numerical failure): bad
#: input, exit status 2.
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
            f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())} (please report "
            "this)",
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
