"""One-sided intervals of estimates on a bound: the end at the bound, the other end where
the deviance is the chi-bar-squared quantile chi2_1(1 - 2 alpha) (Self and Liang 1987)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.base import clone

import geostat as gs
from geostat import cli
from geostat.errors import GeostatWarning
from geostat.optimize.intervals import (
    ONE_SIDED,
    ProfileLikelihood,
    estimate_at_bound,
    one_sided_critical,
    one_sided_wald,
)

#: chi2_1(0.90): the one-sided critical deviance at level 0.95.
ONE_SIDED_DEVIANCE = stats.chi2.ppf(0.90, 1)
#: Deviance tolerance at an end re-evaluated by a fit with the parameter held there: the
#: end is found where the signed root of the deviance is within ROOT_TOL = 5e-4 of
#: 1.645 (a deviance within 2 * 1.645 * 5e-4 = 0.0017) or within LOG_XTOL = 1e-4 in log
#: theta of it (a change of the deviance of at most its slope, about 2 * 2.7 / |log
#: (end / estimate)| per unit, times 1e-4: below 1e-3 for ends a factor 1.1 or more from
#: the estimate); the maximizations agree to about 1e-6. Three times the sum, rounded up.
DEVIANCE_TOL = 0.01


def test_the_critical_value_is_the_chi_bar_squared_quantile():
    z = one_sided_critical(0.95)
    assert z == pytest.approx(stats.norm.ppf(0.95), rel=1e-15)
    assert z**2 == pytest.approx(ONE_SIDED_DEVIANCE, rel=1e-12)
    # P(1/2 chi2_0 + 1/2 chi2_1 > c) = 1/2 P(chi2_1 > c) = alpha
    assert 0.5 * stats.chi2.sf(z**2, 1) == pytest.approx(0.05, rel=1e-12)
    assert one_sided_critical(0.4) == 0.0  # alpha >= 1/2: the mass of chi2_0
    assert ONE_SIDED == "one-sided (estimate at bound)"


def test_one_sided_wald_ends():
    z = stats.norm.ppf(0.9)
    assert one_sided_wald(0.0, 0.5, 0.9, (0.0, 10.0), -1) == (
        0.0,
        pytest.approx(z * 0.5, rel=1e-15),
    )
    assert one_sided_wald(4.0, 0.5, 0.9, (0.01, 4.0), +1) == (
        pytest.approx(4.0 - z * 0.5, rel=1e-15),
        4.0,
    )
    lower, upper = one_sided_wald(4.0, 0.5, 0.9, (0.01, 4.0), +1, logarithmic=True)
    assert (lower, upper) == (pytest.approx(4.0 * math.exp(-z * 0.5 / 4.0), rel=1e-15), 4.0)
    assert one_sided_wald(0.0, math.inf, 0.9, (0.0, 10.0), -1) == (
        0.0,
        10.0,
    )  # no standard error: the box


@pytest.fixture(scope="module")
def smooth():
    """A smooth noise-free field on 160 sites: the nugget is estimated at exactly 0."""
    X = np.random.default_rng(1).uniform(size=(160, 2))
    y = gs.simulate(X, {"variance": 1.0, "range": 0.2, "smoothness": 1.5}, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def zero_nugget(smooth):
    est = gs.SpatialGP(smoothness=1.5).fit(*smooth)
    assert est.params_["nugget"] == 0.0 and estimate_at_bound(est) == {"nugget": -1}
    return est


def test_a_zero_nugget_has_a_one_sided_profile_interval_at_the_chi_bar_squared_quantile(
    smooth, zero_nugget
):
    est = zero_nugget
    ci = est.confidence_intervals()
    assert list(ci.columns) == ["estimate", "lower", "upper", "at_bound", "one_sided"]
    assert ci["one_sided"].tolist() == [False, False, True]
    lower, upper = ci.loc["nugget", ["lower", "upper"]]
    assert lower == 0.0 and 0 < upper < math.inf
    # The profile at the upper end, maximized afresh by a fit with the nugget held there,
    # and evaluated by the estimator's own log-likelihood:
    held = gs.SpatialGP(smoothness=1.5, nugget=float(upper)).fit(*smooth)
    deviance = 2 * (est.loglik_ - est.log_likelihood(held.params_))
    assert deviance == pytest.approx(ONE_SIDED_DEVIANCE, abs=DEVIANCE_TOL)
    # the two-sided quantile (3.84) would put the end further out
    assert deviance < stats.chi2.ppf(0.95, 1) - 10 * DEVIANCE_TOL


@pytest.mark.parametrize("method", ["wald", "log-wald"])
def test_wald_at_a_bound_is_one_sided_and_never_nan(method, smooth, zero_nugget):
    est = clone(zero_nugget).fit(*smooth)  # a fit of its own: no profile computed yet
    assert ProfileLikelihood.kept(est) is None
    ci = est.confidence_intervals(method=method)
    assert ci.notna().all().all()
    assert list(ci.columns) == ["estimate", "lower", "upper", "one_sided"]
    se = est.stderr_["nugget"]
    assert 0 < se < math.inf
    assert ci.loc["nugget", "lower"] == 0.0
    assert ci.loc["nugget", "upper"] == pytest.approx(stats.norm.ppf(0.95) * se, rel=1e-14)
    assert ci.loc["nugget", "one_sided"] and not ci.loc["range", "one_sided"]


def test_wald_at_a_bound_takes_the_one_sided_profile_interval_when_it_is_known(zero_nugget):
    profile = zero_nugget.confidence_intervals(level=0.9)
    wald = zero_nugget.confidence_intervals(level=0.9, method="wald")
    assert (
        wald.loc["nugget", ["lower", "upper"]].tolist()
        == profile.loc["nugget", ["lower", "upper"]].tolist()
    )
    assert (
        wald.loc["range", "upper"] != profile.loc["range", "upper"]
    )  # inside the box: its own Wald interval


def test_a_range_on_its_upper_search_bound_is_one_sided_from_below():
    """Range bounded at 0.06, well below the true 0.2: the estimate is on the bound, the
    interval runs from the one-sided lower end to the bound."""
    rng = np.random.default_rng(4)
    X = rng.uniform(size=(150, 2))
    y = gs.simulate(X, {"variance": 1.0, "range": 0.2}, kernel="exponential", random_state=2)
    with pytest.warns(GeostatWarning, match="range ended on its bound"):
        est = gs.SpatialGP(kernel="exponential", nugget=False, bounds={"range": (0.01, 0.06)}).fit(
            X, y
        )
    assert estimate_at_bound(est) == {"range": 1}
    ci = est.confidence_intervals()
    row = ci.loc["range"]
    assert row["one_sided"] and row["at_bound"] and row["upper"] == pytest.approx(0.06, rel=1e-12)
    assert 0.01 < row["lower"] < row["estimate"]
    held = gs.SpatialGP(
        kernel="exponential", nugget=False, fixed={"range": float(row["lower"])}
    ).fit(X, y)
    assert 2 * (est.loglik_ - est.log_likelihood(held.params_)) == pytest.approx(
        ONE_SIDED_DEVIANCE, abs=DEVIANCE_TOL
    )


def test_the_cli_prints_a_one_sided_interval_from_zero(smooth, tmp_path, capsys):
    X, y = smooth
    path = tmp_path / "sites.csv"
    pd.DataFrame({"x": X[:, 0], "y": X[:, 1], "z": y}).to_csv(path, index=False)
    assert (
        cli.main(
            ["fit", str(path), "--value", "z", "--smoothness", "1.5", "--ci", "log-wald", "-q"]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    cells = next(line for line in lines if line.startswith("nugget")).split()
    assert cells[1] == "0*" and cells[3] == "0" and float(cells[4]) > 0 and cells[-1] == "one-sided"
    assert "nan" not in " ".join(cells).lower()
    assert any(line.startswith("one-sided (estimate at bound): nugget") for line in lines)
