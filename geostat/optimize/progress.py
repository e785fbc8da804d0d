"""Progress of a fit: likelihood evaluations counted by stage, shown by tqdm or not, and logged.

:meth:`geostat.SpatialGP.fit` runs inside :func:`fit_progress`, which makes a
:class:`Progress` current in this thread; the code reports to :func:`current_progress`
without knowing whether anything is shown: each evaluation with its stage
(:class:`~geostat.optimize.objective.Objective`), the stages ``"standard errors"`` and
``"accuracy check"``, and the probes of the stochastic Fisher information. Evaluations are
counted as the fit reports them, full-data ones (``n_evaluations_``) apart from those of
:data:`SUBSAMPLE_STAGES` (``result_.n_pilot_evaluations``): a TLR fit counts its
factorizations, so a value read again from kept factors is logged uncounted, and those
made outside any search (a zero nugget tried, the standard errors' and the accuracy
check's) enter at the next stage (:meth:`Progress.recount`) and at the end
(:meth:`Progress.finish`). :class:`ProgressBar` shows them as a tqdm counter on
standard error (a count: the number of evaluations is not known in advance)::

    geostat fit (done): 21 full-data evaluations + 77 on subsamples [00:07, loglik 226.1159]
"""

from __future__ import annotations

import contextvars
import logging
import math
import numbers
import os
import sys
import time
from contextlib import contextmanager

from geostat.solvers import tile_progress

__all__ = [
    "DELAY",
    "SUBSAMPLE_STAGES",
    "Progress",
    "ProgressBar",
    "TqdmHandler",
    "check_verbose",
    "current_progress",
    "fit_progress",
    "log_to_stderr",
    "shows_progress",
    "shows_tile_progress",
]

logger = logging.getLogger(__name__)

#: Seconds of work after which the automatic display (``verbose=None``) appears.
DELAY = 2.0
#: Stages whose evaluations are of a subsample or an approximation, counted apart.
SUBSAMPLE_STAGES = ("pilot subsample", "polish subsample", "block Vecchia")
#: The loggers of the two packages (their children inherit handlers and levels).
PACKAGE_LOGGERS = ("geostat", "tlrcore")


def check_verbose(verbose):
    """`verbose` as None or an int 0, 1, 2 (a bool is 0 or 1); TypeError if it is not None,
    a bool or an integer, ValueError for another integer."""
    if verbose is None:
        return None
    if not isinstance(verbose, numbers.Integral):
        raise TypeError(
            "verbose must be None, True/False or 0, 1, 2; "
            f"got {type(verbose).__name__} {verbose!r}."
        )
    if not 0 <= int(verbose) <= 2:
        raise ValueError(
            f"verbose must be None (automatic), 0 (off), 1 (progress) or 2 (progress and each "
            f"evaluation logged at INFO); got {verbose!r}."
        )
    return int(verbose)


def shows_progress(verbose, stream=None):
    """Whether `verbose` shows a display on `stream` (standard error by default): always
    for 1 and 2, never for 0, and for None when the stream is a terminal."""
    verbose = check_verbose(verbose)
    if verbose is not None:
        return verbose >= 1
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def shows_tile_progress(verbose, stream=None):
    """Whether `verbose` shows tlrcore's tile-column counters on `stream`: as
    :func:`shows_progress`, and only on a terminal (stacked counters redraw lines with
    cursor movements, which notebooks and log files do not replay)."""
    return shows_progress(verbose, stream) and shows_progress(None, stream)


class Progress:
    """The progress of one fit, shown nowhere (the null display).

    Counts full-data evaluations (:attr:`n_evaluations`) and those of :data:`SUBSAMPLE_STAGES`
    (:attr:`n_subsample_evaluations`), tracks the stage and its current and best
    log-likelihood (in the units of ``y`` for the data scale `scale`), and logs each stage at
    `stage_level` and each evaluation at `level`.
    """

    def __init__(
        self, name="geostat fit", scale=1.0, level=logging.DEBUG, stage_level=logging.INFO
    ):
        self.name = name
        self.log_scale = math.log(scale)
        self.variance_factor = scale * scale
        self.level, self.stage_level = level, stage_level
        #: Full-data evaluations (any stage not of :data:`SUBSAMPLE_STAGES`).
        self.n_evaluations = 0
        #: Evaluations of the stages :data:`SUBSAMPLE_STAGES`.
        self.n_subsample_evaluations = 0
        self.n_failures = 0
        self.stage_name = None
        self.current = self.best = math.nan
        self.probes_done = self.probes_total = 0
        self.start = self.stage_start = time.perf_counter()

    def stage(self, name):
        """Enter stage `name` (a no-op if it is the current one)."""
        if name == self.stage_name:
            return
        self.stage_name = name
        self.current = self.best = math.nan
        self.probes_done = self.probes_total = 0
        self.stage_start = time.perf_counter()
        if logger.isEnabledFor(self.stage_level):
            logger.log(
                self.stage_level,
                "%s: stage %s, after %s (%.1f s)",
                self.name,
                name,
                self.counts(),
                self.stage_start - self.start,
            )
        self._show(force=True)

    def counts(self):
        """The two counts in words: ``"21 full-data evaluations + 77 on subsamples"`` (the
        second part only when there are subsample evaluations)."""
        text = f"{self.n_evaluations} full-data evaluations"
        return text + (
            f" + {self.n_subsample_evaluations} on subsamples"
            if self.n_subsample_evaluations
            else ""
        )

    def evaluation(self, stage, loglik, n_eff, free=None, counted=True):
        """Count one likelihood evaluation of stage `stage` (its kind by :data:`SUBSAMPLE_STAGES`):
        `loglik` in fitting units (NaN for a failed evaluation) of a likelihood of `n_eff`
        observations, at the free parameters `free` (for the log record). Not `counted`: a
        value read again from kept TLR factors, logged but no evaluation of the count."""
        self.stage(stage)
        subsample = stage in SUBSAMPLE_STAGES
        if counted and subsample:
            self.n_subsample_evaluations += 1
        elif counted:
            self.n_evaluations += 1
        number = self.n_subsample_evaluations if subsample else self.n_evaluations
        value = float(loglik) - n_eff * self.log_scale
        # (a failed TLR evaluation made no factor: uncounted, as the fit counts it)
        label = stage if counted or not math.isfinite(value) else f"{stage}, factors kept"
        if math.isfinite(value):
            self.current = value
            if math.isnan(self.best) or value > self.best:
                self.best = value
        else:
            self.n_failures += 1
            self.current = math.nan
        if logger.isEnabledFor(self.level):
            logger.log(
                self.level,
                "evaluation %d (%s): %s -> loglik %s",
                number,
                label,
                self._format_free(free),
                f"{value:.10g}" if math.isfinite(value) else "failed (not positive definite)",
            )
        self._show()

    def probes(self, done, total):
        """`done` random probes of the standard errors, about `total` needed in all."""
        self.stage("standard errors")
        self.probes_done, self.probes_total = int(done), int(max(total, done))
        self._show(force=True)

    def remaining(self):
        """Estimated seconds left in the current stage, or None where unknown."""
        if not self.probes_done:
            return None
        elapsed = time.perf_counter() - self.stage_start
        return elapsed / self.probes_done * (self.probes_total - self.probes_done)

    def recount(self, n_evaluations):
        """Take `n_evaluations` as the full-data evaluations so far, as the fit counts them
        (a TLR fit: its factorizations, some of them outside any search)."""
        self.n_evaluations = int(n_evaluations)

    def finish(self, loglik, n_evaluations=None):
        """The fit is done with maximized log-likelihood `loglik` (units of ``y``) after
        `n_evaluations` full-data evaluations as the fit counts them (the display's own
        count when None)."""
        if n_evaluations is not None:
            self.recount(n_evaluations)
        self.stage_name = "done"
        self.current = self.best = float(loglik)
        self.probes_done = self.probes_total = 0
        self._show()  # closing shows it

    def close(self):
        """Release the display."""

    def status(self):
        """The text after the count: log-likelihoods, or probes and time left."""
        if self.probes_done:
            left = self.remaining()
            return f"probes {self.probes_done} of ~{self.probes_total}, ~{_clock(left)} left"
        if self.stage_name == "done":
            return f"loglik {self.best:.7g}"
        if math.isnan(self.current) and math.isnan(self.best):
            return ""
        if self.current == self.best:
            return f"loglik {self.current:.7g} (best)"
        current = "failed" if math.isnan(self.current) else f"{self.current:.7g}"
        return f"loglik {current}, best {self.best:.7g}"

    def _format_free(self, free):
        if not free:
            return "(no free parameters)"
        parts = []
        for name, value in free.items():
            value = value * self.variance_factor if name in ("variance", "nugget") else value
            parts.append(f"{name}={value:.6g}")
        return " ".join(parts)

    def _show(self, force=False):
        """Update the display (none here)."""


class ProgressBar(Progress):
    """:class:`Progress` shown as a tqdm counter on `file`, after `delay` seconds (a shorter
    fit shows nothing); other keyword arguments as :class:`Progress`."""

    def __init__(self, file, delay=0.0, **kwargs):
        from tqdm import tqdm

        super().__init__(**kwargs)
        self.delay = delay
        terminal = shows_progress(None, file)
        self._bar = tqdm(
            total=None,
            desc=self.name,
            file=file,
            delay=delay,
            leave=True,
            mininterval=0.5 if terminal else 5.0,
            **_width(file, terminal),
            bar_format="{desc} [{elapsed}{postfix}]",
        )

    def _show(self, force=False):
        # The counts are in the description; tqdm's own count, of both kinds, paces the redraws.
        bar = self._bar
        name = f"{self.name} ({self.stage_name})" if self.stage_name else self.name
        bar.set_description_str(f"{name}: {self.counts()}", refresh=False)
        bar.set_postfix_str(self.status(), refresh=False)
        total = self.n_evaluations + self.n_subsample_evaluations
        if total > bar.n:
            bar.update(total - bar.n)  # tqdm shows it when due
        if force and time.perf_counter() - self.start >= self.delay:
            bar.refresh()

    def close(self):
        self._bar.close()


_CURRENT = contextvars.ContextVar("geostat_progress", default=None)
#: The progress outside a fit: shows nothing, logs evaluations at DEBUG and stages there too.
_OUTSIDE = Progress(name="evaluations", stage_level=logging.DEBUG)


def current_progress():
    """The :class:`Progress` of the fit running in this thread (a silent one outside a fit)."""
    progress = _CURRENT.get()
    return _OUTSIDE if progress is None else progress


@contextmanager
def fit_progress(verbose, scale=1.0, name="geostat fit", file=None):
    """Make a fit's progress current for the block, with the display `verbose` asks for:
    ``None``, a counter on `file` (standard error) if it is a terminal, after :data:`DELAY`
    seconds; ``0``, none; ``1``, a counter; ``2``, a counter and each evaluation logged at INFO
    (through :class:`TqdmHandler` when logging is not configured). Yields the
    :class:`Progress`."""
    verbose = check_verbose(verbose)
    file = sys.stderr if file is None else file
    shown = shows_progress(verbose, file)
    level = logging.INFO if verbose == 2 else logging.DEBUG
    if shown:
        progress = ProgressBar(
            file, delay=DELAY if verbose is None else 0.0, name=name, scale=scale, level=level
        )
    else:
        progress = Progress(name=name, scale=scale, level=level)
    handler = (
        log_to_stderr(logging.INFO, file)
        if verbose == 2 and not logging.getLogger("geostat").hasHandlers()
        else None
    )
    token = _CURRENT.set(progress)
    try:
        with tile_progress(shown and shows_tile_progress(None, file)):
            yield progress
    finally:
        _CURRENT.reset(token)
        progress.close()
        if handler is not None:
            handler.remove()


class TqdmHandler(logging.StreamHandler):
    """A log handler that writes through ``tqdm.write``, so that log lines and progress
    counters on the same terminal do not garble each other."""

    def emit(self, record):
        from tqdm import tqdm

        try:
            tqdm.write(f"{record.name.partition('.')[0]}: {self.format(record)}", file=self.stream)
        except Exception:  # logging must never raise
            self.handleError(record)


class _Installed:
    """A handler added to the package loggers, and their levels before."""

    def __init__(self, handler, levels):
        self.handler, self.levels = handler, levels

    def remove(self):
        for name, level in self.levels.items():
            logging.getLogger(name).removeHandler(self.handler)
            logging.getLogger(name).setLevel(level)


def log_to_stderr(level=logging.INFO, stream=None):
    """Send the records of geostat and tlrcore at `level` and above to standard error through
    :class:`TqdmHandler`, as ``geostat: message``; returns an object whose ``remove()`` takes
    the handler away and restores the loggers' levels."""
    handler = TqdmHandler(sys.stderr if stream is None else stream)
    levels = {}
    for name in PACKAGE_LOGGERS:
        package = logging.getLogger(name)
        levels[name] = package.level
        package.addHandler(handler)
        if package.getEffectiveLevel() > level:
            package.setLevel(level)
    return _Installed(handler, levels)


def _width(stream, terminal):
    """tqdm's size arguments: a terminal's own size, 80 x 24 for a terminal that
    reports none (a pseudo-terminal of size 0, where tqdm would print nothing), and
    tqdm's defaults elsewhere (a notebook, a file)."""
    if not terminal:
        return {}
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):  # no file descriptor
        columns = 0
    return {"dynamic_ncols": True} if columns > 0 else {"ncols": 80, "nrows": 24}


def _clock(seconds):
    """``mm:ss`` (or ``h:mm:ss``) of `seconds`; ``?`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return (
        f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
        if hours
        else f"{rest // 60:02d}:{rest % 60:02d}"
    )
