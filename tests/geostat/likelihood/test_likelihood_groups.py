"""Replicates with missing values: several groups of sites factored together (through
tlrcore.batched) give what each group gives alone, including when a factorization fails."""

import numpy as np
import pytest
import scipy.linalg
import scipy.spatial.distance

import geostat as gs
import tlrcore as tlr
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood import ExactLikelihood

N = 90


def replicates(rng, duplicate=False):
    """Sites, and 7 replicates whose missing values make 6 groups of sites: all 90 sites;
    two replicates sharing 60; two other patterns of 60; 45; 80 (none all-missing)."""
    X = rng.uniform(size=(N, 2))
    if duplicate:
        X[1] = X[0]  # groups observing sites 0 and 1 are singular without a nugget
    Y = rng.standard_normal((N, 7))
    missing = [
        [],
        rng.choice(N, 30, replace=False),
        None,
        rng.choice(N, 30, replace=False),
        rng.choice(N, 30, replace=False),
        rng.choice(N, 45, replace=False),
        np.arange(2, 12),
    ]
    missing[2] = missing[1]
    for j, rows in enumerate(missing):
        Y[rows, j] = np.nan
    return X, Y


def likelihood(X, Y, reml=False, on_failure="shift"):
    design = np.column_stack([np.ones(len(X)), X[:, 0]])
    return ExactLikelihood(
        X,
        Y,
        design,
        get_kernel("exponential"),
        get_distance("euclidean"),
        reml=reml,
        on_failure=on_failure,
    )


def per_group(lik):
    """One single-group likelihood per group of `lik`: the path that factors in place."""
    out = []
    for g in lik.groups:
        sites = np.arange(lik.n) if g.sites is None else g.sites
        out.append(
            likelihood(lik.coords[sites], lik.y[np.ix_(sites, g.columns)], lik.reml, lik.on_failure)
        )
    return out


def assert_terms_are_sums(terms, parts):
    for name in ("n_obs", "logdet", "logdet_trend", "quadratic"):
        assert getattr(terms, name) == pytest.approx(
            sum(getattr(p, name) for p in parts), rel=1e-11
        )
    for name in ("quad", "trace"):
        for key, value in getattr(terms, name).items():
            assert value == pytest.approx(sum(getattr(p, name)[key] for p in parts), rel=1e-11)


@pytest.fixture
def batch_sizes(monkeypatch):
    """The number of matrices in each call of tlrcore.batched.cholesky."""
    sizes = []
    real = tlr.batched.cholesky

    def spy(mats, *args, **kwargs):
        sizes.append(len(mats))
        return real(mats, *args, **kwargs)

    monkeypatch.setattr(tlr.batched, "cholesky", spy)
    return sizes


@pytest.mark.parametrize("reml", [False, True], ids=["ml", "reml"])
def test_groups_factored_together_match_each_group_alone(reml, rng, batch_sizes):
    lik = likelihood(*replicates(rng), reml=reml)
    assert len(lik.groups) == 6
    theta, eta = {"range": 0.2}, 0.05
    terms = lik.terms(theta, eta, gradient=True)
    assert max(batch_sizes) >= 2 and sum(batch_sizes) == 6  # batched, and every group once
    assert_terms_are_sums(terms, [p.terms(theta, eta, gradient=True) for p in per_group(lik)])
    assert lik.n_safeguarded == 0


def test_group_factors_match_scipy(rng, batch_sizes):
    lik = likelihood(*replicates(rng))
    theta, eta = {"range": 0.2}, 0.05
    R, _ = lik.correlation(theta)
    for g, chol in zip(lik.groups, lik.factors(theta, eta), strict=True):
        sites = np.arange(lik.n) if g.sites is None else g.sites
        K = R[np.ix_(sites, sites)] + eta * np.eye(len(sites))
        np.testing.assert_allclose(
            chol.L, scipy.linalg.cholesky(K, lower=True), rtol=1e-12, atol=1e-14
        )
        assert chol.shift == 0.0
    assert max(batch_sizes) >= 2


def test_failing_groups_are_shifted_as_each_group_alone(rng):
    lik = likelihood(*replicates(rng, duplicate=True))
    theta, eta = {"range": 0.2}, 0.0
    parts = per_group(lik)
    terms = lik.terms(theta, eta, gradient=True)
    assert_terms_are_sums(terms, [p.terms(theta, eta, gradient=True) for p in parts])
    # shifted: the groups that observe both copies of the duplicated site
    singular = sum(g.sites is None or {0, 1} <= set(g.sites) for g in lik.groups)
    assert 2 <= singular < len(lik.groups)
    assert lik.n_safeguarded == sum(p.n_safeguarded for p in parts) == singular
    shifts = [chol.shift for chol in lik.factors(theta, eta)]
    assert shifts == [p.factors(theta, eta)[0].shift for p in parts]


def test_failing_group_raises_under_the_raise_policy(rng):
    lik = likelihood(*replicates(rng, duplicate=True), on_failure="raise")
    with pytest.raises(gs.NotPositiveDefiniteError, match="not positive definite"):
        lik.terms({"range": 0.2}, 0.0)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 90, 1000])
def test_group_by_pattern_groups_replicates_by_observed_sites_in_lexicographic_order(rng, n):
    from geostat.likelihood.gls import group_by_pattern

    Y = rng.standard_normal((n, 40))
    Y[rng.random(Y.shape) < 0.3] = np.nan
    Y[:, 20:30] = Y[:, [0]]  # repeated patterns
    Y[:, 30] = np.nan  # observed nowhere: left out
    Y[:, 31] = 1.0  # observed everywhere
    design = np.column_stack([np.ones(n), np.arange(n)])
    groups = group_by_pattern(Y, design)
    masks = {tuple(~np.isnan(Y[:, j])) for j in range(Y.shape[1]) if not np.isnan(Y[:, j]).all()}
    assert [
        tuple(np.isin(np.arange(n), g.sites) if g.sites is not None else np.ones(n, bool))
        for g in groups
    ] == sorted(masks)
    observed_somewhere = [j for j in range(40) if not np.isnan(Y[:, j]).all()]
    assert sorted(np.concatenate([g.columns for g in groups]).tolist()) == observed_somewhere
    for g in groups:
        rows = np.arange(n) if g.sites is None else g.sites
        np.testing.assert_array_equal(g.y, Y[np.ix_(rows, g.columns)])
        np.testing.assert_array_equal(g.design, design[rows])
        assert all(
            np.array_equal(~np.isnan(Y[:, j]), ~np.isnan(Y[:, g.columns[0]])) for j in g.columns
        )


@pytest.mark.parametrize("method", ["exact", "tlr"])
@pytest.mark.parametrize("reml", [False, True])
def test_residual_form_of_other_observations_is_the_dense_gls_form(rng, method, reml):
    """``sum_k (z_k - F beta_k)^T K^{-1} (z_k - F beta_k)`` of other observations `z` with
    the likelihood's missing values, by the fit's factors: the dense GLS form per
    replicate; `z` of other missing values is refused."""
    from geostat.likelihood import make_likelihood

    X, Y = replicates(rng)
    design = np.column_stack([np.ones(N), X[:, 0]])
    kernel, distance = get_kernel("exponential"), get_distance("euclidean")
    lik = make_likelihood(method, X, Y, design, kernel, distance, reml=reml, tile_size=32)
    params = {"variance": 1.0, "range": 0.3, "nugget": 0.1}
    Z = np.where(np.isnan(Y), np.nan, rng.standard_normal(Y.shape))
    C = np.exp(-scipy.spatial.distance.cdist(X, X) / 0.3) + 0.1 * np.eye(N)
    expected = 0.0
    for k in range(Y.shape[1]):
        seen = ~np.isnan(Y[:, k])
        Kinv = np.linalg.inv(C[np.ix_(seen, seen)])
        F, z = design[seen], Z[seen, k]
        beta = np.linalg.solve(F.T @ Kinv @ F, F.T @ Kinv @ z)
        expected += (z - F @ beta) @ Kinv @ (z - F @ beta)
    assert lik.residual_form(Z, params) == pytest.approx(
        expected, rel=1e-6 if method == "tlr" else 1e-10
    )
    with pytest.raises(ValueError, match="missing values"):
        lik.residual_form(np.where(np.isnan(Y), 0.0, Z), params)
    moved = Z.copy()  # the same replicates together, at other sites
    moved[:, 1:3] = np.roll(Z[:, 1:3], 1, axis=0)
    with pytest.raises(ValueError, match="missing values"):
        lik.residual_form(moved, params)
