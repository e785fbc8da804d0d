"""Cross-validation at fitted parameters (geostat.validation) against brute-force kriging,
its scores against their definitions, the TLR path against the exact one, and its plot."""

import logging

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import problems  # noqa: E402
import pytest  # noqa: E402
from scipy import integrate, stats  # noqa: E402
from scipy.linalg import cho_factor, cho_solve  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402

import geostat as gs  # noqa: E402
from geostat.plotting import plot_standardized_residuals  # noqa: E402
from geostat.validation import (  # noqa: E402
    SCORES,
    closed_form,
    cross_validate,
    gaussian_crps,
    gaussian_log_score,
)

#: Closed form against brute force: both are backward-stable dense solves with covariance
#: matrices of condition number below MAX_CONDITION (asserted), so they agree to about
#: cond * sqrt(n) * eps ~ 1e4 * 10 * 2.2e-16 ~ 2e-11 relative; 1e-10 leaves a margin.
RTOL = 1e-10
MAX_CONDITION = 1e4


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def sites(n, seed):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.uniform(size=n), "y": rng.uniform(size=n)}), rng


def field(X, rng, replicates=None):
    """A smooth signal plus noise, (n,) or (n, replicates)."""
    shape = (len(X),) if replicates is None else (len(X), replicates)
    signal = np.sin(5 * X.x.to_numpy()) + np.cos(3 * X.y.to_numpy())
    return (signal if replicates is None else signal[:, None]) + 0.3 * rng.normal(size=shape)


def covariance(model, coords):
    """The covariance of the observations (exponential kernel, nugget on the diagonal) in
    the units of y, from the fitted parameters."""
    p = model.params_
    return problems.covariance(
        coords, range_=p["range"], variance=p["variance"], nugget=p["nugget"]
    )


def design(model, coords):
    if model.trend is None:
        return np.empty((len(coords), 0))
    if model.trend == "linear":
        return np.column_stack([np.ones(len(coords)), coords])
    return np.ones((len(coords), 1))


def krige(C, F, y, held, rest):
    """Universal kriging of the observations `held` from `rest`, GLS trend on `rest`:
    the mean and the joint predictive covariance of the observations."""
    factor = cho_factor(C[np.ix_(rest, rest)])
    weights = cho_solve(factor, np.column_stack([y[rest], F[rest], C[np.ix_(rest, held)]]))
    cinv_y, cinv_f, cinv_c = (
        weights[:, 0],
        weights[:, 1 : 1 + F.shape[1]],
        weights[:, 1 + F.shape[1] :],
    )
    cross = C[np.ix_(rest, held)]
    mean = cross.T @ cinv_y
    cov = C[np.ix_(held, held)] - cross.T @ cinv_c
    if F.shape[1]:
        ftcf = F[rest].T @ cinv_f
        beta = np.linalg.solve(ftcf, F[rest].T @ cinv_y)
        mean += (F[held] - cross.T @ cinv_f) @ beta
        u = F[held].T - F[rest].T @ cinv_c
        cov += u.T @ np.linalg.solve(ftcf, u)
    return mean, cov


def brute_force(model, X, Y, labels=None, noise=None):
    """Mean and std of each observation held out (alone, or with its fold), by kriging
    from the rest (the known `noise` variances on the diagonal): a table sorted by site,
    then replicate."""
    coords = X[["x", "y"]].to_numpy()
    C, F = (
        covariance(model, coords) + np.diag(np.zeros(len(X)) if noise is None else noise),
        design(model, coords),
    )
    assert np.linalg.cond(C) < MAX_CONDITION
    Y = np.asarray(Y, dtype=float).reshape(len(X), -1)
    rows = []
    for j in range(Y.shape[1]):
        seen = np.flatnonzero(~np.isnan(Y[:, j]))
        groups = (
            [[i] for i in seen]
            if labels is None
            else [seen[labels[seen] == k] for k in np.unique(labels[seen])]
        )
        for held in groups:
            held = np.asarray(held)
            mean, cov = krige(C, F, Y[:, j], held, np.setdiff1d(seen, held))
            rows += [
                (i, j, Y[i, j], m, s)
                for i, m, s in zip(held, mean, np.sqrt(np.diag(cov)), strict=True)
            ]
    frame = pd.DataFrame(rows, columns=["site", "replicate", "observed", "mean", "std"])
    return frame.sort_values(["site", "replicate"]).reset_index(drop=True)


def assert_matches(result, expected):
    np.testing.assert_array_equal(result["site"], expected["site"])
    np.testing.assert_array_equal(result["observed"], expected["observed"])
    scale = expected["observed"].std()
    np.testing.assert_allclose(result["mean"], expected["mean"], rtol=RTOL, atol=RTOL * scale)
    np.testing.assert_allclose(result["std"], expected["std"], rtol=RTOL)
    np.testing.assert_allclose(
        result["standardized"],
        (result["observed"] - result["mean"]) / result["std"],
        rtol=1e-12,
        atol=1e-12,
    )


# ---------------------------------------------------------------------- closed form = brute force
@pytest.mark.parametrize("trend", ["constant", "linear", None])
def test_leave_one_out_equals_kriging_from_the_other_sites(trend):
    X, rng = sites(90, 1)
    y = field(X, rng)
    model = gs.SpatialGP(kernel="exponential", trend=trend).fit(X, y)
    assert model.shift_ == 0.0
    result = cross_validate(model)
    assert list(result.columns) == ["site", "x", "y", "observed", "mean", "std", "standardized"]
    np.testing.assert_array_equal(result[["x", "y"]], X.to_numpy())
    assert_matches(result, brute_force(model, X, y))
    assert result.attrs["cv"] == "loo" and set(result.attrs["scores"]) == set(SCORES)


def test_leave_one_out_with_replicates_and_missing_values():
    X, rng = sites(70, 2)
    Y = field(X, rng, replicates=3)
    Y[rng.uniform(size=Y.shape) < 0.15] = np.nan
    model = gs.SpatialGP(kernel="exponential", trend="linear").fit(
        X, pd.DataFrame(Y, columns=["d1", "d2", "d3"])
    )
    assert len(model._kriging.groups) == 3  # each replicate has its own observed sites
    result = cross_validate(model)
    assert len(result) == np.sum(~np.isnan(Y))  # the missing values are not held out
    expected = brute_force(model, X, Y)
    assert_matches(result, expected)
    np.testing.assert_array_equal(
        result["replicate"], np.array(["d1", "d2", "d3"])[expected["replicate"]]
    )


def test_k_fold_equals_kriging_each_fold_from_the_others():
    X, rng = sites(80, 3)
    Y = field(X, rng, replicates=2)
    Y[rng.uniform(size=Y.shape) < 0.1] = np.nan
    model = gs.SpatialGP(kernel="exponential", trend="linear").fit(X, Y)
    result = cross_validate(model, cv=4, random_state=5)
    labels = np.full(len(X), -1)
    labels[result["site"]] = result["fold"]
    sizes = np.bincount(labels[labels >= 0])
    assert sizes.size == 4 and sizes.max() - sizes.min() <= 1  # dealt evenly
    assert sizes.sum() == np.sum(~np.isnan(Y).all(axis=1))  # every observed site
    assert_matches(result, brute_force(model, X, Y, labels))
    assert result.attrs["cv"] == 4
    again = cross_validate(model, cv=4, random_state=5)
    pd.testing.assert_frame_equal(result, again)  # seeded


def test_user_folds_hold_out_spatial_blocks():
    X, rng = sites(80, 4)
    y = field(X, rng)
    model = gs.SpatialGP(kernel="exponential").fit(X, y)
    blocks = (X.x.to_numpy() > 0.5).astype(int) + 2 * (X.y.to_numpy() > 0.5)
    given = blocks.copy()
    result = cross_validate(model, folds=blocks)
    np.testing.assert_array_equal(blocks, given)  # not modified
    np.testing.assert_array_equal(result["fold"], blocks)
    assert_matches(result, brute_force(model, X, y, blocks))
    assert result.attrs["cv"] == 4
    assert cross_validate(model, cv=4, folds=blocks).equals(result)


def test_known_noise_variances_are_part_of_the_observation_covariance():
    X, rng = sites(60, 15)
    y = field(X, rng)
    noise = rng.uniform(0.01, 0.2, size=60)
    model = gs.SpatialGP(kernel="exponential").fit(X, y, noise_variance=noise)
    assert_matches(cross_validate(model), brute_force(model, X, y, noise=noise))
    folds = np.arange(60) % 3
    assert_matches(cross_validate(model, folds=folds), brute_force(model, X, y, folds, noise=noise))


def test_the_fitted_factor_and_predictions_are_left_as_they_were():
    X, rng = sites(60, 5)
    model = gs.SpatialGP(kernel="exponential").fit(X, field(X, rng))
    new = pd.DataFrame({"x": [0.3, 0.7], "y": [0.2, 0.9]})
    before = model.predict(new, return_std=True)
    L = model._kriging.groups[0].chol.L.copy()
    cross_validate(model)
    cross_validate(model, cv=3)
    np.testing.assert_array_equal(model._kriging.groups[0].chol.L, L)
    for a, b in zip(before, model.predict(new, return_std=True), strict=True):
        np.testing.assert_array_equal(a, b)


def test_results_are_in_the_units_of_y():
    X, rng = sites(60, 6)
    y = field(X, rng)
    fixed = {"variance": 1.0, "range": 0.3}
    small = gs.SpatialGP(kernel="exponential", nugget=0.1, fixed=fixed).fit(X, y)
    big = gs.SpatialGP(
        kernel="exponential", nugget=0.1e12, fixed={"variance": 1e12, "range": 0.3}
    ).fit(X, 1e6 * y)
    a, b = cross_validate(small, cv=3), cross_validate(big, cv=3)
    for column in ("observed", "mean", "std"):
        np.testing.assert_allclose(b[column], 1e6 * a[column], rtol=1e-10)
    np.testing.assert_allclose(b["standardized"], a["standardized"], rtol=1e-8, atol=1e-10)
    sa, sb = a.attrs["scores"], b.attrs["scores"]
    for name in ("rmse", "mae", "crps"):
        assert sb[name] == pytest.approx(1e6 * sa[name], rel=1e-10)
    assert sb["log_score"] == pytest.approx(sa["log_score"] + np.log(1e6), rel=1e-10)
    for name in ("coverage", "standardized_mean", "standardized_std"):
        assert sb[name] == pytest.approx(sa[name], rel=1e-8, abs=1e-10)


# ---------------------------------------------------------------------- refit
def test_refit_with_fixed_parameters_equals_the_closed_form():
    """With every covariance parameter fixed, refitting a fold re-estimates only the GLS
    trend, which the closed form also re-estimates: the two agree to rounding."""
    X, rng = sites(60, 7)
    y = field(X, rng)
    model = gs.SpatialGP(
        kernel="exponential", trend="linear", nugget=0.1, fixed={"variance": 1.0, "range": 0.3}
    ).fit(X, y)
    closed = cross_validate(model, cv=3)
    refitted = cross_validate(model, cv=3, refit=True)
    pd.testing.assert_frame_equal(
        refitted[["site", "fold", "observed"]], closed[["site", "fold", "observed"]]
    )
    np.testing.assert_allclose(refitted["mean"], closed["mean"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(refitted["std"], closed["std"], rtol=1e-9)
    assert refitted.attrs["refit"] and not closed.attrs["refit"]
    noise = rng.uniform(0.01, 0.2, size=60)
    noisy = gs.SpatialGP(
        kernel="exponential", nugget=0.1, fixed={"variance": 1.0, "range": 0.3}
    ).fit(X, y, noise_variance=noise)
    closed, refitted = cross_validate(noisy, cv=3), cross_validate(noisy, cv=3, refit=True)
    np.testing.assert_allclose(refitted["mean"], closed["mean"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(refitted["std"], closed["std"], rtol=1e-9)


def test_refit_predicts_each_fold_with_a_model_fitted_on_the_others():
    X, rng = sites(60, 8)
    y = field(X, rng)
    model = gs.SpatialGP(kernel="exponential").fit(X, y)
    folds = np.arange(60) % 2
    result = cross_validate(model, folds=folds, refit=True)
    held = folds == 1
    other = clone(model).fit(X[~held].reset_index(drop=True), y[~held])
    mean, std = other.predict(X[held], return_std=True)
    rows = result[result["fold"] == 1]
    np.testing.assert_allclose(rows["mean"], mean, rtol=1e-12)
    np.testing.assert_allclose(rows["std"] ** 2, std**2 + other.params_["nugget"], rtol=1e-12)


# ---------------------------------------------------------------------- TLR
def tlr_pair(n=500):
    """An exact model and a TLR one (tile 64, accuracy 1e-9) at the same fixed
    parameters, and the condition number of their correlation matrix."""
    X, rng = sites(n, 9)
    y = field(X, rng)
    settings = dict(
        kernel="exponential", trend="linear", nugget=0.1, fixed={"variance": 1.0, "range": 0.2}
    )
    exact = gs.SpatialGP(method="exact", **settings).fit(X, y)
    tlr = gs.SpatialGP(method="tlr", tile_size=64, accuracy=1e-9, **settings).fit(X, y)
    coords = X.to_numpy()
    condition = np.linalg.cond(problems.covariance(coords, range_=0.2, nugget=0.1))
    return exact, tlr, condition


def solve_only(monkeypatch):
    """Entries of the inverse covariance by solves (the inverse factor never fits)."""
    monkeypatch.setattr(closed_form, "INVERSE_FACTOR_BYTES", float("inf"))


@pytest.mark.parametrize("path", ["inverse factor", "solves"])
@pytest.mark.parametrize("cv", ["loo", 5])
def test_tlr_agrees_with_exact_to_its_accuracy(cv, path, caplog, monkeypatch):
    """A TLR factor with ``||K - L L^T||_F <= eps ||K||_F`` (eps the accuracy) perturbs
    ``K^{-1}``, and so ``P`` and the residuals, by at most ``cond(K) eps sqrt(n)`` relative
    (``||E||_2 <= ||E||_F``, ``||K||_F <= sqrt(n) ||K||_2``), doubled for the ratios
    ``(P y)_i / P_ii``; a factor 10 covers the accumulation in the factorization. The
    inverse factor, truncated at the same accuracy, perturbs ``K^{-1}`` by at most
    ``3 sqrt(cond(K)) eps sqrt(n)`` relative more (``tlrcore.inverse_factor``), within
    that factor for ``cond(K) >= 1``."""
    if path == "solves":
        solve_only(monkeypatch)
    exact, tlr, condition = tlr_pair()
    assert tlr.method_ == "tlr" and exact.method_ == "exact"
    with caplog.at_level(logging.INFO, logger="geostat.validation"):
        a, b = cross_validate(exact, cv=cv), cross_validate(tlr, cv=cv)
    tolerance = 10 * 2 * condition * 1e-9 * np.sqrt(500)
    assert tolerance < 1e-2  # a meaningful check
    np.testing.assert_allclose(b["std"], a["std"], rtol=tolerance)
    residual = a["observed"] - a["mean"]
    assert np.max(np.abs(b["mean"] - a["mean"])) <= tolerance * np.max(np.abs(residual))
    messages = [r.getMessage() for r in caplog.records if "TLR" in r.getMessage()]
    if path == "solves":
        assert messages == [
            f"cross-validation: 500 columns of the identity solved through the TLR factors in "
            f"{1 if cv == 'loo' else 5} blocks (forward solves)"
        ]
    else:
        assert len(messages) == 1 and messages[0].startswith(
            "cross-validation: TLR inverse factor of 500 sites"
        )


def test_the_two_tlr_paths_agree(monkeypatch):
    """Entries from the inverse factor and from solves through the same factor differ by
    the inverse factor's truncation alone (``3 sqrt(cond(K)) eps sqrt(n)`` relative in
    ``K^{-1}``, times ``cond(K)`` in the residuals)."""
    _, tlr, condition = tlr_pair()
    by_inverse = cross_validate(tlr, cv=4, random_state=3)
    solve_only(monkeypatch)
    by_solves = cross_validate(tlr, cv=4, random_state=3)
    tolerance = 2 * 3 * condition**1.5 * 1e-9 * np.sqrt(500)
    assert tolerance < 1e-2
    np.testing.assert_allclose(by_inverse["std"], by_solves["std"], rtol=tolerance)
    np.testing.assert_allclose(
        by_inverse["mean"], by_solves["mean"], rtol=0, atol=tolerance * by_solves["std"].max()
    )


def test_large_tlr_folds_are_factored_as_tlr_matrices(monkeypatch):
    """Folds of at least ``TLR_FOLD_SITES`` sites are factored as TLR matrices at the fit's
    accuracy: a perturbation of at most ``eps ||B||_F <= eps sqrt(m) ||B||_2`` of the
    fold's precision block ``B`` (``cond(B) <= cond(K)``), and as much again from its
    inverse factor, moves the residuals and variances by at most ``2 cond(K) eps sqrt(m)``
    relative; a factor 10 covers the accumulation in the factorization."""
    X, rng = sites(1200, 13)
    settings = dict(kernel="exponential", nugget=0.1, fixed={"variance": 1.0, "range": 0.2})
    tlr = gs.SpatialGP(method="tlr", tile_size=64, accuracy=1e-9, **settings).fit(X, field(X, rng))
    calls = []
    original = closed_form.compressed_solve_and_inverse_diagonal

    def counted(*args):
        calls.append(args[0].shape[0])
        return original(*args)

    monkeypatch.setattr(closed_form, "compressed_solve_and_inverse_diagonal", counted)
    monkeypatch.setattr(closed_form, "TLR_FOLD_SITES", 500)
    compressed = cross_validate(tlr, cv=2, random_state=1)
    assert calls == [600, 600]
    monkeypatch.setattr(closed_form, "TLR_FOLD_SITES", float("inf"))
    dense = cross_validate(tlr, cv=2, random_state=1)
    assert len(calls) == 2
    condition = np.linalg.cond(problems.covariance(X.to_numpy(), range_=0.2, nugget=0.1))
    tolerance = 10 * 2 * condition * 1e-9 * np.sqrt(600)
    assert tolerance < 1e-2
    np.testing.assert_allclose(compressed["std"], dense["std"], rtol=tolerance)
    np.testing.assert_allclose(
        compressed["mean"], dense["mean"], rtol=0, atol=tolerance * dense["std"].max()
    )


def test_a_tlr_fold_not_positive_definite_is_factored_densely(monkeypatch):
    _, tlr, _ = tlr_pair(n=300)
    dense = cross_validate(tlr, cv=3, random_state=2)

    def fails(*args):
        raise gs.errors.NotPositiveDefiniteError("not positive definite at this accuracy")

    monkeypatch.setattr(closed_form, "compressed_solve_and_inverse_diagonal", fails)
    monkeypatch.setattr(closed_form, "TLR_FOLD_SITES", 10)
    fallback = cross_validate(tlr, cv=3, random_state=2)
    np.testing.assert_array_equal(fallback["mean"], dense["mean"])
    np.testing.assert_array_equal(fallback["std"], dense["std"])


def test_tlr_solves_in_blocks_of_bounded_memory(monkeypatch, caplog):
    """Leave-one-out solves in blocks of bounded memory (the same results); K-fold a fold
    at a time."""
    solve_only(monkeypatch)
    exact, tlr, _ = tlr_pair(n=300)
    whole = cross_validate(tlr)
    whole_folds = cross_validate(tlr, cv=3)
    monkeypatch.setattr(closed_form, "SOLVE_BLOCK_BYTES", 8 * 300 * 70)  # 70 columns a block
    with caplog.at_level(logging.INFO, logger="geostat.validation"):
        blocked = cross_validate(tlr)
        blocked_folds = cross_validate(tlr, cv=3)
    messages = [
        r.getMessage() for r in caplog.records if "columns of the identity" in r.getMessage()
    ]
    assert "300 columns" in messages[0] and "in 5 blocks" in messages[0]  # ceil(300 / 70)
    assert "300 columns" in messages[1] and "in 3 blocks" in messages[1]  # a fold at once
    for a, b in ((whole, blocked), (whole_folds, blocked_folds)):
        np.testing.assert_allclose(b["mean"], a["mean"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b["std"], a["std"], rtol=1e-12)


# ---------------------------------------------------------------------- scores
def test_scores_equal_their_definitions():
    rng = np.random.default_rng(10)
    observed, mean, std = rng.normal(size=40), rng.normal(size=40), rng.uniform(0.5, 2.0, size=40)
    crps = [
        integrate.quad(lambda t, m=m, s=s: stats.norm.cdf(t, m, s) ** 2, -np.inf, y)[0]
        + integrate.quad(lambda t, m=m, s=s: stats.norm.sf(t, m, s) ** 2, y, np.inf)[0]
        for y, m, s in zip(observed, mean, std, strict=True)
    ]
    np.testing.assert_allclose(gaussian_crps(observed, mean, std), crps, rtol=1e-8)
    np.testing.assert_allclose(
        gaussian_log_score(observed, mean, std), -stats.norm.logpdf(observed, mean, std), rtol=1e-13
    )


def test_scores_of_a_cross_validation():
    X, rng = sites(60, 11)
    model = gs.SpatialGP(kernel="exponential").fit(X, field(X, rng))
    result = cross_validate(model, level=0.8)
    y, m, s, z = (result[c].to_numpy() for c in ("observed", "mean", "std", "standardized"))
    low, high = stats.norm.interval(0.8, m, s)
    expected = {
        "rmse": np.sqrt(np.mean((y - m) ** 2)),
        "mae": np.mean(np.abs(y - m)),
        "crps": np.mean(gaussian_crps(y, m, s)),
        "log_score": -np.mean(stats.norm.logpdf(y, m, s)),
        "coverage": np.mean((y >= low) & (y <= high)),
        "standardized_mean": np.mean(z),
        "standardized_std": np.std(z, ddof=1),
    }
    assert list(result.attrs["scores"]) == list(SCORES)
    for name, value in expected.items():
        assert result.attrs["scores"][name] == pytest.approx(value, rel=1e-12), name
    chosen = cross_validate(model, scoring=("crps", "coverage"), level=0.8)
    assert chosen.attrs["scores"] == {"crps": expected["crps"], "coverage": expected["coverage"]}
    assert list(cross_validate(model, scoring="rmse").attrs["scores"]) == ["rmse"]


# ---------------------------------------------------------------------- bad input
@pytest.fixture(scope="module")
def fitted():
    X, rng = sites(40, 12)
    return gs.SpatialGP(kernel="exponential", trend="linear").fit(X, field(X, rng))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(cv="kfold"), "cv must be 'loo'"),
        (dict(cv=1), "from 2 to 40"),
        (dict(cv=41), "from 2 to 40"),
        (dict(cv=True), "cv must be"),
        (dict(cv=2.5), "cv must be"),
        (dict(level=0.0), "level must be"),
        (dict(level=1.5), "level must be"),
        (dict(scoring="accuracy"), r"scoring has unknown .*'accuracy'.*'crps'"),
        (dict(scoring=["rmse", "r2"]), r"scoring has unknown .*'r2'"),
        (dict(scoring=[]), "scoring names no score"),
        (dict(refit=True), "refit=True refits"),
        (
            dict(folds=np.zeros(39, dtype=int)),
            r"folds must hold one fold label per training site, shape \(40,\)",
        ),
        (dict(folds=np.zeros(40, dtype=int)), "at least 2 distinct labels"),
        (dict(cv=3, folds=np.arange(40) % 2), "cv=3 disagrees with the 2 labels"),
        (
            dict(folds=(np.arange(40) > 1).astype(int)),
            "fold 1 leaves 2 observed site.*3 trend coefficient",
        ),
    ],
)
def test_bad_arguments_are_refused_by_name(fitted, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cross_validate(fitted, **kwargs)


def test_bad_types_are_refused_by_name(fitted):
    with pytest.raises(TypeError, match="folds must be integer fold labels"):
        cross_validate(fitted, folds=np.linspace(0, 1, 40))
    with pytest.raises(TypeError, match="refit must be True or False"):
        cross_validate(fitted, cv=3, refit="yes")
    with pytest.raises(TypeError, match="scoring must be None"):
        cross_validate(fitted, scoring=3)
    with pytest.raises(TypeError, match="random_state must be None"):
        cross_validate(fitted, random_state="seed")
    with pytest.raises(NotFittedError):
        cross_validate(gs.SpatialGP())


# ---------------------------------------------------------------------- fields
def test_a_model_fitted_on_a_field_gives_a_dataset_of_its_observed_cells():
    xr = pytest.importorskip("xarray")
    rng = np.random.default_rng(13)
    lon, lat = np.linspace(-10, 10, 8), np.linspace(40, 50, 7)
    values = np.sin(lon / 5)[None, :] + np.cos(lat / 3)[:, None] + 0.2 * rng.normal(size=(2, 7, 8))
    values[0, 0, :3] = np.nan
    da = xr.DataArray(
        values, coords={"time": [0, 1], "lat": lat, "lon": lon}, dims=("time", "lat", "lon")
    )
    model = gs.SpatialGP(kernel="exponential").fit(da)
    result = cross_validate(model)  # more in test_validation_fields.py
    assert isinstance(result, xr.Dataset) and result["mean"].dims == da.dims
    assert np.isfinite(result["mean"].values).sum() == np.sum(~np.isnan(values))
    np.testing.assert_array_equal(result["observed"].values, values)
    np.testing.assert_array_equal(result["lon"].values, lon)


# ---------------------------------------------------------------------- plot
def test_plot_standardized_residuals_draws_histogram_density_and_quantiles():
    X, rng = sites(50, 14)
    result = cross_validate(gs.SpatialGP(kernel="exponential").fit(X, field(X, rng)))
    histogram, qq = plot_standardized_residuals(result)
    heights = [p.get_height() for p in histogram.patches if p.get_gid() == "histogram"]
    widths = [p.get_width() for p in histogram.patches if p.get_gid() == "histogram"]
    assert heights and np.sum(np.multiply(heights, widths)) == pytest.approx(1.0)  # a density
    (density,) = [line for line in histogram.lines if line.get_gid() == "normal density"]
    np.testing.assert_allclose(density.get_ydata(), stats.norm.pdf(density.get_xdata()))
    (points,) = [line for line in qq.lines if line.get_gid() == "quantiles"]
    np.testing.assert_array_equal(points.get_ydata(), np.sort(result["standardized"]))
    np.testing.assert_allclose(points.get_xdata(), stats.norm.ppf((np.arange(1, 51) - 0.5) / 50))
    assert "coverage" not in qq.get_title() and "inside the central 90% intervals" in qq.get_title()
    _, given = plt.subplots(1, 2)
    assert list(plot_standardized_residuals(result, axes=given)) == list(given)
    with pytest.raises(ValueError, match="cv_result must be the table"):
        plot_standardized_residuals(result.drop(columns="standardized"))
