"""Progress display (``SpatialGP(verbose=...)``, ``tlrcore.progress``), log records of a fit,
and the CLI's -v/-q."""

import io
import logging
import math

import numpy as np
import pytest
from problems import covariance
from sklearn.base import clone

import geostat as gs
import tlrcore as tlr
from geostat import cli
from geostat.optimize import progress as progress_module
from geostat.optimize.progress import Progress, ProgressBar, fit_progress
from tlrcore.concurrency import threads as _threads

SETTINGS = {"kernel": "exponential", "n_starts": 1}
TLR = {"method": "tlr", "tile_size": 64, "accuracy": 1e-9}


@pytest.fixture(scope="module")
def data():
    """200 sites of an exponential field with nugget."""
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(200, 2))
    C = covariance(X, range_=0.2, nugget=0.1)
    return X, np.linalg.cholesky(C) @ rng.normal(size=200)


class _Terminal(io.StringIO):
    """A standard error that says it is a terminal."""

    def isatty(self):
        return True


def _fit(data, **kwargs):
    return gs.SpatialGP(**SETTINGS, **kwargs).fit(*data)


def test_verbose_1_shows_evaluations_stages_and_loglik(data, capsys):
    est = _fit(data, verbose=1)
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err
    assert "geostat fit" in err and "evaluations" in err and "loglik" in err
    assert "(full data)" in err and "(done)" in err
    assert f"loglik {est.loglik_:.7g}" in err


@pytest.mark.parametrize("verbose", [0, False], ids=["0", "False"])
def test_verbose_0_writes_nothing(verbose, data, capsys):
    _fit(data, verbose=verbose)
    assert capsys.readouterr().err == ""


def test_automatic_display_is_off_when_stderr_is_not_a_terminal(data, capsys):
    _fit(data)  # verbose=None; capsys's stderr is not a terminal
    assert capsys.readouterr().err == ""


def test_automatic_display_in_a_terminal_appears_only_after_the_delay(data, monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    _fit(data)  # far shorter than DELAY: nothing
    assert terminal.getvalue() == ""
    monkeypatch.setattr(progress_module, "DELAY", 0.0)
    _fit(data)
    assert "evaluations" in terminal.getvalue()


def test_tile_counters_of_a_tlr_fit_only_on_a_terminal(data, monkeypatch, capsys):
    monkeypatch.setattr(_threads, "PROGRESS_DELAY", 0.0)
    _fit(data, verbose=1, **TLR)
    err = capsys.readouterr().err
    assert "evaluations" in err and "TLR" not in err  # not a terminal: the fit's counter only
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    _fit(data, verbose=1, **TLR)
    assert "TLR compression" in terminal.getvalue() and "TLR Cholesky" in terminal.getvalue()


@pytest.mark.parametrize("settings", [{}, TLR], ids=["exact", "tlr"])
def test_estimates_are_bit_identical_whatever_verbose(settings, data, capsys):
    fits = [_fit(data, verbose=v, **settings) for v in (0, 1, 2)]
    capsys.readouterr()
    for other in fits[1:]:
        assert other.params_ == fits[0].params_ and other.stderr_ == fits[0].stderr_
        assert other.loglik_ == fits[0].loglik_ and other.n_evaluations_ == fits[0].n_evaluations_
        assert np.array_equal(other.coef_, fits[0].coef_)


@pytest.mark.parametrize(
    "build, factor",
    [
        pytest.param({}, {}, id="left"),
        pytest.param({}, {"variant": "right"}, id="right"),
        pytest.param({}, {"safeguard": "pivot"}, id="pivoted"),
        pytest.param({"method": "batched"}, {}, id="batched"),
    ],
)
def test_tlr_factor_is_the_same_with_progress_shown(build, factor, monkeypatch, capsys):
    monkeypatch.setattr(_threads, "PROGRESS_DELAY", 0.0)
    x = np.sort(np.random.default_rng(5).uniform(size=1200))

    def block(rows, cols):
        return np.exp(-np.abs(x[rows, None] - x[None, cols]) / 0.1) + 0.01 * (
            rows[:, None] == cols[None, :]
        )

    def logdet():
        return tlr.cholesky(
            tlr.TLRMatrix.from_generator(block, x.size, 100, **build), **factor
        ).logdet()

    quiet = logdet()
    assert capsys.readouterr().err == ""
    with tlr.progress():
        shown = logdet()
    assert shown == quiet
    err = capsys.readouterr().err
    assert "TLR compression" in err and "TLR Cholesky" in err and "/12" in err


def test_tlr_progress_is_off_outside_its_block_and_checks_its_argument(capsys, monkeypatch):
    monkeypatch.setattr(_threads, "PROGRESS_DELAY", 0.0)
    A = tlr.TLRMatrix.from_dense(np.eye(300) + 0.5, 100)
    with tlr.progress(), tlr.progress(False):
        tlr.cholesky(A)
    assert capsys.readouterr().err == ""
    with pytest.raises(TypeError, match="True or False"):
        with tlr.progress("yes"):
            pass


def test_info_log_of_a_tlr_fit_names_method_tile_size_accuracy_and_ranks_once(data, caplog, capsys):
    caplog.set_level(logging.INFO, logger="geostat")
    caplog.set_level(logging.INFO, logger="tlrcore")
    est = _fit(data, verbose=0, **TLR)
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    text = "\n".join(info)
    assert "likelihood: tlr" in text and "method='tlr' as asked" in text and "the CPU" in text
    assert "tile size 64 (4 tiles of 200 sites)" in text and "accuracy 1e-09" in text
    assert text.count("mean rank") == 1 and "MiB" in text
    assert "stage full data" in text and "stage standard errors" in text
    assert f"loglik {est.loglik_:.10g}" in text and "range=" in text
    total = est.n_evaluations_ + est.result_.n_pilot_evaluations
    assert len(info) <= 12 < total, info
    assert not any(
        r.name.startswith("tlrcore") for r in caplog.records if r.levelno >= logging.INFO
    )


def test_info_log_says_why_auto_chose_the_exact_method(data, caplog):
    caplog.set_level(logging.INFO, logger="geostat")
    _fit(data, verbose=0)
    text = caplog.text
    assert "likelihood: exact" in text and "method='auto': n = 200 sites, at most 4,095" in text
    assert "dense Cholesky" in text


def test_each_evaluation_is_logged_at_debug_and_at_info_with_verbose_2(data, caplog, capsys):
    caplog.set_level(logging.DEBUG, logger="geostat")
    est = _fit(data, verbose=0)
    debug = [r for r in caplog.records if r.getMessage().startswith("evaluation ")]
    assert len(debug) == est.n_evaluations_ + est.result_.n_pilot_evaluations
    assert {r.levelno for r in debug} == {logging.DEBUG} and "range=" in debug[0].getMessage()
    caplog.clear()
    _fit(data, verbose=2)
    assert {r.levelno for r in caplog.records if r.getMessage().startswith("evaluation ")} == {
        logging.INFO
    }


def test_verbose_2_logs_to_stderr_when_logging_is_not_configured(data, monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(logging.getLogger("geostat"), "hasHandlers", lambda: False)
    with fit_progress(2, file=stream) as progress:
        progress.evaluation("full data", -12.5, 10, {"range": 0.5})
    assert "geostat: evaluation 1 (full data): range=0.5 -> loglik -12.5" in stream.getvalue()
    assert not logging.getLogger("geostat").handlers  # removed again


def test_standard_error_probes_show_the_time_left():
    stream = io.StringIO()
    bar = ProgressBar(stream, name="fit", scale=2.0)
    bar.evaluation("full data", -10.0, 5, {"variance": 1.0})
    assert bar.current == -10.0 - 5 * math.log(2.0)  # in the units of y
    bar.probes(16, 64)
    assert bar.remaining() >= 0.0
    bar.close()
    out = stream.getvalue()
    assert "fit (standard errors)" in out and "probes 16 of ~64" in out and "left" in out


def test_the_null_display_counts_and_keeps_the_best(caplog):
    progress = Progress()
    for value in (-3.0, float("nan"), -1.0, -2.0):
        progress.evaluation("full data", value, 1)
    assert progress.n_evaluations == 4 and progress.n_failures == 1
    assert progress.best == -1.0 and progress.current == -2.0
    assert progress.status() == "loglik -2, best -1"
    progress.evaluation("full data", 0.5, 1)
    assert progress.status() == "loglik 0.5 (best)"


@pytest.mark.parametrize(
    "verbose, error, match",
    [
        pytest.param(3, ValueError, "0 .off., 1 .progress.", id="3"),
        pytest.param(-1, ValueError, "verbose must be None", id="negative"),
        pytest.param(1.5, TypeError, "got float 1.5", id="float"),
        pytest.param("yes", TypeError, "got str", id="str"),
    ],
)
def test_bad_verbose_raises_at_fit(verbose, error, match, data):
    est = gs.SpatialGP(verbose=verbose)  # __init__ only stores
    assert est.verbose == verbose
    with pytest.raises(error, match=match):
        est.fit(*data)


def test_verbose_is_the_last_parameter_and_clones():
    est = gs.SpatialGP(verbose=2)
    assert list(est.get_params())[-1] == "verbose" and clone(est).verbose == 2
    assert gs.SpatialGP().verbose is None


@pytest.fixture
def csv(tmp_path, data):
    X, y = data
    path = tmp_path / "sites.csv"
    path.write_text(
        "x,y,z\n"
        + "\n".join(f"{a!r},{b!r},{c!r}" for (a, b), c in zip(X.tolist(), y.tolist(), strict=True))
    )
    return str(path)


def test_cli_quiet_prints_only_the_table(csv, capsys):
    assert cli.main(["fit", csv, "--value", "z", "--kernel", "exponential", "-q"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out.startswith("geostat fit: ") and "log-likelihood" in captured.out


def test_cli_verbose_logs_info_lines_and_progress_on_stderr(csv, capsys):
    assert cli.main(["fit", csv, "--value", "z", "--kernel", "exponential", "-v"]) == 0
    captured = capsys.readouterr()
    assert "geostat: likelihood: exact" in captured.err and "geostat: estimates: " in captured.err
    assert "evaluations" in captured.err and "(done)" in captured.err
    assert "geostat:" not in captured.out and "log-likelihood" in captured.out
    assert not logging.getLogger("geostat").handlers  # the command removes its handler


def test_cli_default_shows_no_progress_when_stderr_is_not_a_terminal(csv, capsys):
    assert cli.main(["fit", csv, "--value", "z", "--kernel", "exponential"]) == 0
    assert capsys.readouterr().err == ""


def test_cli_verbose_and_quiet_exclude_each_other(csv, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["fit", csv, "-v", "-q"])
    assert stop.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_the_display_counts_full_data_evaluations_as_the_fit_does_and_subsamples_apart(capsys):
    """600 sites, more than the pilot subsample's 500: the display ends at the fit's
    ``n_evaluations_`` full-data evaluations, plus its pilot evaluations labelled apart."""
    rng = np.random.default_rng(4)
    X = rng.uniform(size=(600, 2))
    y = gs.simulate(
        X, {"variance": 1.0, "range": 0.2, "nugget": 0.1}, kernel="exponential", random_state=1
    )
    est = gs.SpatialGP(**SETTINGS, verbose=1).fit(X, y)
    final = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert est.result_.n_pilot_evaluations > 0
    expected = (
        f"geostat fit (done): {est.n_evaluations_} full-data evaluations "
        f"+ {est.result_.n_pilot_evaluations} on subsamples ["
    )
    assert final.startswith(expected), final


def test_subsample_stages_are_counted_and_numbered_apart(caplog):
    caplog.set_level(logging.DEBUG, logger="geostat")
    progress = Progress()
    for stage in ("pilot subsample", "pilot subsample", "full data", "block Vecchia", "full data"):
        progress.evaluation(stage, -1.0, 1)
    assert progress.n_evaluations == 2 and progress.n_subsample_evaluations == 3
    assert progress.counts() == "2 full-data evaluations + 3 on subsamples"
    numbered = [
        r.getMessage().split(":")[0]
        for r in caplog.records
        if r.getMessage().startswith("evaluation ")
    ]
    assert numbered == [
        "evaluation 1 (pilot subsample)",
        "evaluation 2 (pilot subsample)",
        "evaluation 1 (full data)",
        "evaluation 3 (block Vecchia)",
        "evaluation 2 (full data)",
    ]
    assert Progress().counts() == "0 full-data evaluations"


def test_cli_display_and_summary_give_one_count(csv, capsys):
    assert cli.main(["fit", csv, "--value", "z", "--kernel", "exponential", "-v"]) == 0
    captured = capsys.readouterr()
    final = captured.err.replace("\r", "\n").strip().splitlines()
    shown = next(line for line in reversed(final) if "(done): " in line)
    count = int(shown.split("(done): ")[1].split()[0])
    assert f"   full-data evaluations {count}\n" in captured.out  # 200 sites: no pilot subsample


def test_a_value_read_again_from_kept_factors_is_logged_but_not_counted(caplog):
    caplog.set_level(logging.DEBUG, logger="geostat")
    progress = Progress()
    progress.evaluation("full data", -1.0, 1)
    progress.evaluation("full data", -1.0, 1, counted=False)
    progress.evaluation("pilot subsample", -1.0, 1, counted=False)
    assert progress.n_evaluations == 1 and progress.n_subsample_evaluations == 0
    numbered = [
        r.getMessage().split(":")[0]
        for r in caplog.records
        if r.getMessage().startswith("evaluation ")
    ]
    assert numbered == [
        "evaluation 1 (full data)",
        "evaluation 1 (full data, factors kept)",
        "evaluation 0 (pilot subsample, factors kept)",
    ]
    progress.recount(4)
    assert progress.counts() == "4 full-data evaluations"


def test_a_tlr_fit_counts_its_factorizations_in_every_stage(data, caplog, capsys):
    """The numbered full-data evaluations, the counts of the stage records and the
    display's last count are the fit's factorizations (``n_evaluations_``): values read
    again from kept factors are logged apart, uncounted."""
    caplog.set_level(logging.DEBUG, logger="geostat")
    est = _fit(data, **{**TLR, "accuracy": "auto"}, verbose=1)
    n = est.n_evaluations_
    messages = [r.getMessage() for r in caplog.records]
    full = [m for m in messages if m.startswith("evaluation ") and "(full data" in m]
    kept = [m for m in full if "factors kept" in m]
    numbers = [int(m.split()[1]) for m in full if m not in kept]
    assert kept, "expected a value read again from kept factors in this fit"
    assert numbers == list(range(1, len(numbers) + 1)) and numbers[-1] <= n
    stages = [m for m in messages if ": stage " in m and "full-data evaluations" in m]
    counts = [int(m.split(", after ")[1].split()[0]) for m in stages]
    assert counts == sorted(counts) and counts[-1] <= n
    final = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert final.startswith(f"geostat fit (done): {n} full-data evaluations"), final
