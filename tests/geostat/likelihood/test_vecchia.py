"""The block Vecchia likelihood against a SciPy reference built from the conditional
Gaussian distributions of the same blocks."""

import sys

import numpy as np
import pytest
import scipy.linalg
from problems import covariance

from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood.dense import ExactLikelihood
from geostat.likelihood.vecchia import BlockVecchiaLikelihood
from geostat.ordering import order_points


def conditioning_sets(X, block_size, conditioning):
    """Blocks of the k-d tree order and, for each, the `conditioning` earlier sites nearest
    its centroid, by brute force."""
    perm = order_points(X, "kdtree", block_size)
    sets = []
    for start in range(0, len(perm), block_size):
        sites, earlier = perm[start : start + block_size], perm[:start]
        by_distance = earlier[
            np.argsort(np.linalg.norm(X[earlier] - X[sites].mean(axis=0), axis=1))
        ]
        sets.append((sites, by_distance[:conditioning]))
    return sets


def reference(X, y, F, range_, eta, block_size, conditioning):
    """Profiled block Vecchia log-likelihood from the conditional distributions: for each
    block and replicate ``k``, ``y_b | y_c ~ N(F_b beta + K_bc K_cc^-1 (y_c - F_c beta),
    s (K_bb - K_bc K_cc^-1 K_cb))`` on the observed sites, with ``K = R + eta I`` (``R`` the
    Matérn 1.5 correlation), ``beta_k`` the GLS trend of the product of these densities
    and the variance ``s`` profiled."""
    p = F.shape[1]
    logdet = count = 0.0
    # per replicate, the whitened residual is linear in beta: w_y - W_F beta
    gram = np.zeros((y.shape[1], p + 1, p + 1))
    for sites, given in conditioning_sets(X, block_size, conditioning):
        for j in range(y.shape[1]):
            b = sites[~np.isnan(y[sites, j])]
            c = given[~np.isnan(y[given, j])]
            if b.size == 0:
                continue
            data_b, data_c = np.column_stack([y[b, j], F[b]]), np.column_stack([y[c, j], F[c]])
            K_bb = covariance(X[b], kernel="matern15", range_=range_, nugget=eta)
            mean, cov = np.zeros_like(data_b), K_bb
            if c.size:
                K_cc = covariance(X[c], kernel="matern15", range_=range_, nugget=eta)
                K_bc = covariance(X[b], X[c], kernel="matern15", range_=range_)
                weights = scipy.linalg.solve(K_cc, K_bc.T, assume_a="pos")
                mean, cov = weights.T @ data_c, K_bb - K_bc @ weights
            L = np.linalg.cholesky(cov)
            w = scipy.linalg.solve_triangular(L, data_b - mean, lower=True)
            gram[j] += w.T @ w
            logdet += 2 * np.log(np.diag(L)).sum()
            count += b.size
    quadratic = sum(g[0, 0] - g[0, 1:] @ np.linalg.solve(g[1:, 1:], g[1:, 0]) for g in gram)
    return -0.5 * (count * (np.log(2 * np.pi * quadratic / count) + 1) + logdet)


def data(n=700, replicates=1, missing=0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    F = np.column_stack([np.ones(n), X[:, 0]])
    y = 3 + 2 * X[:, :1] + rng.normal(size=(n, replicates))
    if missing:
        y[rng.uniform(size=y.shape) < missing] = np.nan
        y[:100, -1] = np.nan  # whole blocks without this replicate
    return X, y, F


def vecchia(X, y, F, block_size, conditioning, **options):
    exact = ExactLikelihood(
        X, y, F, get_kernel("matern", smoothness=1.5), get_distance("euclidean")
    )
    return BlockVecchiaLikelihood(
        exact, block_size=block_size, conditioning=conditioning, **options
    )


@pytest.mark.parametrize("replicates, missing", [(1, 0.0), (3, 0.2)])
@pytest.mark.parametrize("block_size, conditioning", [(64, 32), (128, 64), (100, 0)])
def test_value_matches_the_conditional_reference(replicates, missing, block_size, conditioning):
    X, y, F = data(replicates=replicates, missing=missing)
    likelihood = vecchia(X, y, F, block_size, conditioning)
    for range_, eta in [(0.05, 0.1), (0.3, 0.01)]:
        value = likelihood.terms({"range": range_}, eta).profiled_value()
        # the two routes differ by rounding: log-determinants of about 1e3 subtracted
        np.testing.assert_allclose(
            value, reference(X, y, F, range_, eta, block_size, conditioning), rtol=1e-10
        )


@pytest.mark.parametrize("replicates, missing", [(1, 0.0), (3, 0.2)])
def test_conditioned_on_every_earlier_site_it_is_the_exact_likelihood_with_its_gls_trend(
    replicates, missing
):
    """The chain rule: blocks conditioned on all the sites before them factor the joint
    density, so with the trend profiled over all blocks every term (and so the value and
    the gradient) is that of the exact maximum likelihood, trend included."""
    X, y, F = data(n=400, replicates=replicates, missing=missing)
    kernel, distance = get_kernel("matern", smoothness=1.5), get_distance("euclidean")
    exact = ExactLikelihood(X, y, F, kernel, distance, reml=False)
    likelihood = BlockVecchiaLikelihood(exact, block_size=64, conditioning=400)
    theta, eta = {"range": 0.2}, 0.05
    got, expected = (lik.terms(theta, eta, gradient=True) for lik in (likelihood, exact))
    assert len(likelihood.blocks) > 1
    assert got.logdet == pytest.approx(expected.logdet, rel=1e-10)
    assert got.quadratic == pytest.approx(expected.quadratic, rel=1e-9)
    for name in ("range", "eye"):
        assert got.quad[name] == pytest.approx(expected.quad[name], rel=1e-8)
        assert got.trace[name] == pytest.approx(expected.trace[name], rel=1e-9)


def test_on_a_smooth_real_field_its_observed_information_is_the_exact_one():
    """The curvature that starts Fisher scoring on the full data: on 2,048 cells of the
    smooth ``co2_true`` field (Matérn 2.5, nugget about 3e-3 of the variance, near its
    maximum) the exact likelihood's observed information departs from the expected one by
    a factor of about 3 in one direction; the block Vecchia's observed information, with
    its trend profiled, is within 10 % of the exact one (eigenvalues of their ratio)."""
    import geostat as gs
    from geostat.optimize import ParameterSpace
    from geostat.optimize.objective import Objective
    from geostat.optimize.polish import observed_curvature

    frame = gs.datasets.load("co2")
    rows = np.sort(np.random.default_rng(0).choice(len(frame), size=2048, replace=False))
    lon, lat = (np.radians(frame[name].to_numpy()[rows]) for name in ("lon", "lat"))
    X = 6371.0 * np.column_stack(
        [np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)]
    )
    y = frame["co2_true"].to_numpy()[rows, None]
    exact = ExactLikelihood(
        X, y, np.ones((2048, 1)), get_kernel("matern", 2.5), get_distance("euclidean"), reml=False
    )
    space = ParameterSpace(exact.kernel, data_variance=float(np.var(y)))
    variance, range_, ratio = 0.377, 468.0, 3.07e-3
    z, bounds = space.to_z({"range": range_, "ratio": ratio}), np.array(space.z_bounds())
    observed = observed_curvature(Objective(exact, space), z, bounds)
    vecchia = BlockVecchiaLikelihood(exact)
    approximate = observed_curvature(Objective(vecchia, space), z, bounds)
    # the expected information in (log variance, log range, log ratio), the variance profiled
    params = {"variance": variance, "range": range_, "nugget": ratio * variance}
    info = exact.fisher_information({**params, "smoothness": 2.5}, ["variance", "range", "nugget"])
    jacobian = np.array([[variance, 0, 0], [0, range_, 0], [ratio * variance, 0, ratio * variance]])
    info = jacobian.T @ info @ jacobian
    expected = info[1:, 1:] - np.outer(info[1:, 0], info[0, 1:]) / info[0, 0]

    def ratios(a, b):
        return np.sort(np.linalg.eigvals(np.linalg.solve(b, a)).real)

    assert ratios(observed, expected)[0] < 0.5
    assert vecchia.n_obs == exact.n_obs
    np.testing.assert_allclose(ratios(approximate, observed), 1.0, atol=0.15)


def test_a_block_without_observations_adds_nothing():
    """Every site of one block missing on every replicate: the block has no term, its
    sites still condition the later blocks where observed (nowhere here)."""
    X, y, F = data(replicates=2)
    y[order_points(X, "kdtree", 128)[128:256]] = np.nan
    likelihood = vecchia(X, y, F, 128, 64)
    assert likelihood.n_obs == int(np.sum(~np.isnan(y)))
    value = likelihood.terms({"range": 0.1}, 0.05).profiled_value()
    np.testing.assert_allclose(value, reference(X, y, F, 0.1, 0.05, 128, 64), rtol=1e-10)


@pytest.mark.parametrize("missing", [0.0, 0.1])
def test_gradient_matches_central_differences(missing):
    X, y, F = data(replicates=2, missing=missing)
    likelihood = vecchia(X, y, F, 128, 64)
    theta, eta = {"range": 0.1}, 0.05
    gradient = likelihood.terms(theta, eta, gradient=True).profiled_gradient({"range", "eye"})
    h = 1e-6
    for name, at in [
        ("range", lambda t: ({"range": 0.1 + t}, eta)),
        ("eye", lambda t: (theta, eta + t)),
    ]:
        up, down = (likelihood.terms(*at(s * h)).profiled_value() for s in (1, -1))
        # central differences: truncation O(h^2 f''') and rounding O(eps |f| / h), both < 1e-5 here
        np.testing.assert_allclose(gradient[name], (up - down) / (2 * h), rtol=1e-6, atol=1e-4)


def test_blocks_are_conditioned_on_the_nearest_earlier_sites():
    X, y, F = data(n=1000)
    likelihood = vecchia(X, y, F, 128, 64)
    expected = conditioning_sets(X, 128, 64)
    assert len(likelihood.blocks) == len(expected)
    for block, (sites, earlier) in zip(likelihood.blocks, expected, strict=True):
        np.testing.assert_array_equal(X[block.sites], X[np.concatenate([earlier, sites])])
        assert block.conditioning == earlier.size


def test_blocks_partition_the_sites_and_the_input_is_not_changed():
    X, y, F = data(n=1000, replicates=2, missing=0.1)
    copies = X.copy(), y.copy(), F.copy()
    likelihood = vecchia(X, y, F, 128, 64)
    assert likelihood.n == 1000
    assert max(block.sites.size - block.conditioning for block in likelihood.blocks) <= 128
    assert likelihood.n_obs == int(np.sum(~np.isnan(y)))
    for before, after in zip(copies, (X, y, F), strict=True):
        np.testing.assert_array_equal(before, after)


def test_beyond_max_sites_a_random_subset_of_blocks_is_kept():
    X, y, F = data(n=1000)
    kept = [
        vecchia(X, y, F, 100, 50, max_sites=300, rng=np.random.default_rng(seed))
        for seed in (1, 1, 2)
    ]
    assert [len(v.blocks) for v in kept] == [3, 3, 3] and all(v.n == 300 for v in kept)
    values = [v.terms({"range": 0.1}, 0.05).profiled_value() for v in kept]
    assert values[0] == values[1] and values[0] != values[2]
    assert len(vecchia(X, y, F, 100, 50, max_sites=1000).blocks) == 10


def test_a_costly_kernel_is_evaluated_once_through_a_table_for_each_set_of_blocks(monkeypatch):
    """Matérn with the smoothness free: each of the two sets of blocks (two threads), with
    145,000 pairs, goes through one table of log-distances (each block alone, with 18,000
    pairs, would evaluate its Bessel functions directly); the values agree with the blocks'
    own evaluations to the table's accuracy (about 1e-13 of each correlation, so 1e-9 of
    the log-likelihood here). Without a trend, each block's terms are its own."""
    from geostat.covariance import TABULATE_PAIRS

    monkeypatch.setenv("TLRCORE_NUM_THREADS", "2")
    X, y, _ = data(n=2048)
    y, F = y - y.mean(), np.zeros((len(y), 0))
    kernel, distance = get_kernel("matern"), get_distance("euclidean")
    likelihood = BlockVecchiaLikelihood(
        ExactLikelihood(X, y, F, kernel, distance), block_size=128, conditioning=64
    )
    sets = likelihood._sets.obj
    assert len(sets.sets) == 2
    assert (
        min(sets._pair_correlation(i)[0].distances.size for i in range(2))
        >= TABULATE_PAIRS[0]
        > max(b.sites.size**2 for b in likelihood.blocks)
    )
    theta, eta = {"range": 0.1, "smoothness": 0.8}, 0.05
    got = likelihood.terms(theta, eta, gradient=True)

    def own(
        sites,
    ):  # each block's joint and conditioning likelihoods alone, kernel evaluated directly
        if not sites.size:
            return None
        exact = ExactLikelihood(X[sites], y[sites], F[sites], kernel, distance, reml=False)
        return exact.terms(theta, eta, True)

    parts = [(own(b.sites), own(b.sites[: b.conditioning])) for b in likelihood.blocks]
    for name in ("logdet", "quadratic"):
        expected = sum(getattr(j, name) - (getattr(g, name) if g else 0.0) for j, g in parts)
        np.testing.assert_allclose(getattr(got, name), expected, rtol=1e-9)
    for name in ("range", "smoothness", "eye"):
        for kind in ("trace", "quad"):
            expected = sum(
                getattr(j, kind)[name] - (getattr(g, kind)[name] if g else 0.0) for j, g in parts
            )
            np.testing.assert_allclose(getattr(got, kind)[name], expected, rtol=1e-7)


@pytest.fixture
def worker_processes_on(monkeypatch):
    from tlrcore.concurrency import processes as worker_processes

    monkeypatch.setenv("TLRCORE_PROCESSES", "1")
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "2")
    monkeypatch.setattr(worker_processes, "_broken", False)
    yield worker_processes
    worker_processes.shutdown()


@pytest.mark.skipif(sys.platform != "linux", reason="worker processes are forked on Linux only")
def test_sets_of_blocks_evaluated_in_worker_processes_give_the_same_terms(
    worker_processes_on, monkeypatch
):
    X, y, F = data(n=1000, replicates=2, missing=0.1)
    likelihood = vecchia(X, y, F, 100, 50)
    theta, eta = {"range": 0.1}, 0.05
    in_workers = likelihood.terms(theta, eta, gradient=True)
    assert worker_processes_on._pool is not None and not worker_processes_on._broken
    worker_processes_on.shutdown()
    monkeypatch.setenv("TLRCORE_PROCESSES", "0")
    here = likelihood.terms(theta, eta, gradient=True)
    assert in_workers == here  # the same operations on the same data, bit for bit


@pytest.mark.skipif(sys.platform != "linux", reason="worker processes are forked on Linux only")
def test_a_block_that_fails_in_a_worker_raises_the_not_positive_definite_error_here(
    worker_processes_on,
):
    from geostat.errors import NotPositiveDefiniteError

    X, y, F = data(n=1000)
    exact = ExactLikelihood(
        X, y, F, get_kernel("matern", smoothness=1.5), get_distance("euclidean"), on_failure="raise"
    )
    with pytest.raises(NotPositiveDefiniteError):  # R - 0.9 I is indefinite
        BlockVecchiaLikelihood(exact, block_size=100, conditioning=50).terms({"range": 0.1}, -0.9)


def test_precision_forms_are_those_of_the_dense_block_vecchia_precision():
    """``P_V = sum_b (E_b^T K_b^-1 E_b - E_c^T K_c^-1 E_c)`` assembled with SciPy from the
    same blocks: its traces against ``I`` and ``dR/drange`` (central differences of the
    covariance, step 1e-6: truncation about 1e-12 relative) and the bilinear forms of
    random vectors, column by column."""
    X, y, F = data(n=600)
    likelihood = vecchia(X, y, F, 64, 96)
    range_, eta, h = 0.2, 0.01, 1e-6
    K = covariance(X, kernel="matern15", range_=range_, nugget=eta)
    D = (
        covariance(X, kernel="matern15", range_=range_ + h)
        - covariance(X, kernel="matern15", range_=range_ - h)
    ) / (2 * h)
    P = np.zeros_like(K)
    for block in likelihood.blocks:
        joint, given = block.sites, block.sites[: block.conditioning]
        P[np.ix_(joint, joint)] += scipy.linalg.inv(K[np.ix_(joint, joint)])
        P[np.ix_(given, given)] -= scipy.linalg.inv(K[np.ix_(given, given)])
    rng = np.random.default_rng(1)
    left, rights = rng.normal(size=(600, 5)), {"eye": rng.normal(size=(600, 5))}
    rights["range"] = D @ rights["eye"]
    trace, forms = likelihood.precision_forms({"range": range_}, eta, left, rights)
    assert trace["eye"] == pytest.approx(np.trace(P), rel=1e-10)
    assert trace["range"] == pytest.approx(np.sum(P * D), rel=1e-7)
    for name, right in rights.items():
        np.testing.assert_allclose(forms[name], np.sum(left * (P @ right), axis=0), rtol=1e-9)
    none, again = likelihood.precision_forms({"range": range_}, eta, left, rights, traces=False)
    assert none is None
    for name in rights:
        np.testing.assert_array_equal(again[name], forms[name])


def test_precision_forms_need_complete_blocks():
    X, y, F = data(n=300, missing=0.1)
    likelihood = vecchia(X, y, F, 64, 32)
    with pytest.raises(ValueError, match="observations on every site"):
        likelihood.precision_forms({"range": 0.1}, 0.05, np.ones((300, 1)), {})
