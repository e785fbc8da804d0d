"""``client=``: the TLR log-likelihood, simulation and fit on a 2-worker Dask LocalCluster,
against the same computations in process.

Agreement: the workers compress the same covariance blocks with the same seeds and run
the in-process factorization steps (tests/tlrcore/distributed/test_distributed.py), so the factors
are the in-process ones up to rounding (BLAS may round a tile differently at another
address); the triangular solves sum in another grouping. The likelihood terms then
differ by about ``cond(L) eps n_tiles`` relative, ~1e-13 here (cond(L) < 1e3 with the
nugget ratio 0.05), and are held to the distributed path's contract, 1e-10 relative.

Lost workers: a fit whose cluster loses one worker, or two of three at once, in the middle
of a factorization gets the fit of an undisturbed 2-worker cluster bit for bit. The tasks
are pure functions of their inputs (tlrcore/distributed/_tasks.py), so the results the
scheduler recomputes are the lost ones, whichever worker and however many workers run
them; the fit is then the in-process one to the tolerances of the fit test below.
"""

import os
import pickle
import signal
import subprocess
import sys

import numpy as np
import pytest
from clusters import local_cluster
from sklearn.base import clone

import geostat as gs
from geostat.covariance import Sites
from geostat.distance import get_distance
from geostat.errors import NotPositiveDefiniteError
from geostat.kernels import get_kernel
from geostat.solvers import NUMPY

distributed = pytest.importorskip("distributed")
td = pytest.importorskip("tlrcore.distributed")

N, TILE = 1500, 256
PARAMS = {"variance": 2.0, "range": 0.15, "smoothness": 1.5, "nugget": 0.1}
#: The promised agreement of distributed and in-process log-likelihoods.
RTOL = 1e-10


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(18)
    X = rng.uniform(0.0, 1.0, (N, 2))
    y = 1.0 + gs.simulate(X, PARAMS, n_samples=3, random_state=1, method="tlr", tile_size=TILE)
    return X, y


def test_log_likelihood_equals_the_in_process_value(client, data):
    X, y = data
    local = gs.log_likelihood(X, y[:, 0], PARAMS, method="tlr", tile_size=TILE)
    assert gs.log_likelihood(
        X, y[:, 0], PARAMS, method="tlr", tile_size=TILE, client=client
    ) == pytest.approx(local, rel=RTOL)
    # with a client "auto" means TLR, and "default" finds this client
    assert gs.log_likelihood(
        X, y[:, 0], PARAMS, tile_size=TILE, reml=True, client="default"
    ) == pytest.approx(
        gs.log_likelihood(X, y[:, 0], PARAMS, method="tlr", tile_size=TILE, reml=True), rel=RTOL
    )


def test_replicates_with_missing_values_run_as_groups(client, data):
    X, y = data
    y = y.copy()
    y[:200, 1] = np.nan
    y[100:150, 2] = np.nan  # three groups of replicates: all sites, and two others
    lik = gs.likelihood.make_likelihood(
        "tlr",
        X,
        y,
        np.ones((N, 1)),
        get_kernel("matern"),
        get_distance("euclidean"),
        tile_size=TILE,
        client=client,
    )
    assert len(lik.groups) == 3
    local = gs.log_likelihood(X, y, PARAMS, method="tlr", tile_size=TILE, trend="linear")
    assert gs.log_likelihood(
        X, y, PARAMS, method="tlr", tile_size=TILE, trend="linear", client=client
    ) == pytest.approx(local, rel=RTOL)


def test_simulation_equals_the_in_process_draws(client, data):
    """The same white noise (drawn here from the seed) times the same factor: the draws
    differ by the rounding of ``L z``, ``n eps ||L|| |z|`` < 1e-9 (||L||_2 < 40, |z| < 6)."""
    X = data[0]
    local = gs.simulate(X, PARAMS, n_samples=2, random_state=7, method="tlr", tile_size=TILE)
    remote = gs.simulate(X, PARAMS, n_samples=2, random_state=7, tile_size=TILE, client=client)
    np.testing.assert_allclose(remote, local, rtol=0, atol=1e-9)


def test_fit_agrees_with_the_in_process_fit(client, data):
    """Each evaluation's value differs from the in-process one by rounding (~1e-13
    relative), and the search branches on comparisons of such values with margins far
    larger, so both fits take the same steps; the estimates, smooth functions of the
    values along that path (Fisher-scoring steps ``I^{-1} g``, cond(I) < 1e4 here), agree
    to ~1e-9 relative: 1e-6 leaves margin, and the log-likelihood is held to 1e-8."""
    X, y = data[0][:400], data[1][:400, 0]
    settings = {"smoothness": 1.5, "method": "tlr", "tile_size": 100, "n_starts": 1}
    local = gs.SpatialGP(**settings).fit(X, y)
    remote = gs.SpatialGP(**settings, client=client).fit(X, y)
    assert remote.method_ == "tlr"
    assert remote.loglik_ == pytest.approx(local.loglik_, rel=1e-8)
    for name, value in local.params_.items():
        assert remote.params_[name] == pytest.approx(value, rel=1e-6), name
    # kriging through the distributed factor
    np.testing.assert_allclose(remote.predict(X[:5]), local.predict(X[:5]), rtol=1e-8)


#: The fit of the lost-worker tests: 1,000 sites in 8 tiles, two factorizations (the
#: value at the start and the TLR error measured there).
KILL_FIT = {"smoothness": 1.5, "method": "tlr", "tile_size": 125, "n_starts": 1}


class KillDuringFactorization:
    """Stands in for :func:`tlrcore.distributed.cholesky`: call `at` submits its graph, waits
    for its first diagonal tile, then kills `n_victims` worker processes (``SIGKILL``) while
    the rest of the graph is pending, and returns the factor as the function would.

    Attributes
    ----------
    pids : dict
        The worker processes before the fit (address -> pid).
    victims : list of str
        The addresses of the workers killed.
    calls : int
        The factorizations the fit ran.
    pending : int or None
        The tile rows of the factor not yet computed at the kill (None: no kill yet).
    """

    def __init__(self, client, at, n_victims):
        self.at, self.calls, self.pending = at, 0, None
        self.pids = client.run(os.getpid)
        self.victims = sorted(self.pids)[:n_victims]
        self._cholesky = td.cholesky

    def __call__(self, A, *args, wait=True, **kwargs):
        L = self._cholesky(A, *args, wait=False, **kwargs)
        self.calls += 1
        if self.calls == self.at:
            distributed.wait(L.diagonal[0])
            self.pending = sum(not row.done() for row in L.rows[1:])
            for address in self.victims:
                os.kill(self.pids[address], signal.SIGKILL)
        return L.wait() if wait else L

    def check_killed_mid_fit(self, client):
        """Assert that the kill came with a factorization after it and work of the fit
        pending, that the scheduler removed the victims with tasks of the fit, and that
        their nannies replaced them by new processes."""
        assert self.pending is not None and self.pending > 0
        assert self.calls > self.at, "the fit ran no factorization after the kill"
        lost = set()
        for address in self.victims:
            (removal,) = (
                event
                for _, event in client.get_events(address)
                if event.get("action") == "remove-worker"
            )
            lost |= set(removal["processing-tasks"]) | set(removal["lost-computed-tasks"])
        names = {key[0] if isinstance(key, tuple) else key for key in lost}
        assert any(name.startswith("tlr-") for name in names), lost
        client.wait_for_workers(len(self.pids), timeout=60)
        pids = client.run(os.getpid)
        assert len(pids) == len(self.pids)
        assert not {self.pids[address] for address in self.victims} & set(pids.values())


@pytest.fixture(scope="module")
def undisturbed(client, data):
    """``(in-process fit, fit on the 2-worker cluster)`` of the first 1,000 sites."""
    X, y = data[0][:1000], data[1][:1000, 0]
    return gs.SpatialGP(**KILL_FIT).fit(X, y), gs.SpatialGP(**KILL_FIT, client=client).fit(X, y)


def check_the_undisturbed_fit(fitted, undisturbed):
    """`fitted` is the fit on the undisturbed cluster bit for bit, so the in-process one to
    the tolerances of :func:`test_fit_agrees_with_the_in_process_fit`."""
    local, remote = undisturbed
    assert fitted.loglik_ == remote.loglik_
    assert fitted.params_ == remote.params_
    assert fitted.loglik_ == pytest.approx(local.loglik_, rel=1e-8)
    for name, value in local.params_.items():
        assert fitted.params_[name] == pytest.approx(value, rel=1e-6), name


@pytest.mark.parametrize(
    "n_workers, n_victims", [(2, 1), (3, 2)], ids=["one-of-two", "two-of-three-at-once"]
)
def test_a_fit_that_loses_workers_gets_the_undisturbed_fit(
    n_workers, n_victims, data, undisturbed, monkeypatch
):
    """Worker processes killed in the first of the fit's two factorizations (one of two,
    or two of three together): the scheduler recomputes the tiles they held or were
    computing on the workers left and on the ones their nannies start, and the fit, its
    factor included (the kriging predictions), is that of the undisturbed cluster."""
    X, y = data[0][:1000], data[1][:1000, 0]
    with local_cluster(n_workers) as client:
        kill = KillDuringFactorization(client, at=1, n_victims=n_victims)
        monkeypatch.setattr(td, "cholesky", kill)
        fitted = gs.SpatialGP(**KILL_FIT, client=client).fit(X, y)
        kill.check_killed_mid_fit(client)
        predictions = fitted.predict(X[:5])
    check_the_undisturbed_fit(fitted, undisturbed)
    assert np.array_equal(predictions, undisturbed[1].predict(X[:5]))


def test_estimator_clone_get_params_pickle_and_save(client, data, tmp_path):
    est = gs.SpatialGP(method="tlr", client=client)
    assert est.get_params()["client"] is client
    copy = clone(est)
    assert copy.client is client and copy.method == "tlr"
    assert clone(gs.SpatialGP(client="default")).client == "default"
    X, y = data[0][:300], data[1][:300, 0]
    fitted = gs.SpatialGP(
        smoothness=1.5,
        method="tlr",
        tile_size=100,
        n_starts=1,
        fixed={"range": 0.15},
        client=client,
    ).fit(X, y)
    restored = pickle.loads(pickle.dumps(fitted))
    assert restored.client is None
    fitted.save(tmp_path / "model.npz")
    loaded = gs.load(tmp_path / "model.npz")
    assert loaded.client is None
    # the loaded model computes in process, with the factor of the same covariance
    np.testing.assert_allclose(loaded.predict(X[:5]), fitted.predict(X[:5]), rtol=1e-8)


def test_bad_client_arguments(client, data):
    X, y = data[0][:300], data[1][:300, 0]
    with pytest.raises(
        TypeError, match="client must be None, 'default' or a distributed.Client; got object"
    ):
        gs.log_likelihood(X, y, PARAMS, method="tlr", client=object())
    with pytest.raises(ValueError, match="client must be"):
        gs.simulate(X, PARAMS, client="tcp://nowhere:8786")
    with pytest.raises(ValueError, match="method='tlr'"):
        gs.log_likelihood(X, y, PARAMS, method="exact", client=client)
    with pytest.raises(ValueError, match="method='tlr'"):
        gs.simulate(X, PARAMS, method="exact", client=client)
    with pytest.raises(TypeError, match="client"):
        gs.SpatialGP(client=1).fit(X, y)


def test_a_singular_covariance_is_shifted_as_in_process(client, data):
    """A numerically singular covariance (Gaussian kernel, long range, no nugget): the
    cluster refactors with the in-process shifts, so it finds the same shift and the same
    value; with ``on_failure="raise"`` the error comes back naming the tile."""
    X = data[0][:400]
    args = (
        "tlr",
        X,
        np.ones((400, 1)),
        np.ones((400, 1)),
        get_kernel("gaussian"),
        get_distance("euclidean"),
    )
    remote = gs.likelihood.make_likelihood(*args, tile_size=100, accuracy=1e-6, client=client)
    local = gs.likelihood.make_likelihood(*args, tile_size=100, accuracy=1e-6)
    value, reference = remote.terms({"range": 5.0}, 0.0), local.terms({"range": 5.0}, 0.0)
    assert remote.n_safeguarded == local.n_safeguarded == 1
    ((factor,), (factor0,)) = (
        remote.factors({"range": 5.0}, 0.0),
        local.factors({"range": 5.0}, 0.0),
    )
    assert factor.shift == factor0.shift > 0
    assert value.logdet == pytest.approx(reference.logdet, rel=RTOL)
    strict = gs.likelihood.make_likelihood(
        *args, tile_size=100, accuracy=1e-6, client=client, on_failure="raise"
    )
    with pytest.raises(NotPositiveDefiniteError) as info:
        strict.terms({"range": 5.0}, 0.0)
    assert info.value.tile is not None


def test_a_singular_covariance_is_compensated_as_in_process(client, data):
    """``on_failure="compensate"`` on the cluster: the diagonal tasks run the in-process
    always-on compensation (block form), so the factor reports every tile compensated,
    the same tiles lifted, no shift, and the in-process value (to the module's 1e-10:
    the same operations on the same tiles, the triangular solves grouped otherwise)."""
    X = data[0][:400]
    args = (
        "tlr",
        X,
        np.ones((400, 1)),
        np.ones((400, 1)),
        get_kernel("gaussian"),
        get_distance("euclidean"),
    )
    options = {"tile_size": 100, "accuracy": 1e-4, "on_failure": "compensate"}
    remote = gs.likelihood.make_likelihood(*args, client=client, **options)
    local = gs.likelihood.make_likelihood(*args, **options)
    theta = {"range": 0.3}
    value, reference = remote.terms(theta, 0.0), local.terms(theta, 0.0)
    assert remote.n_safeguarded == local.n_safeguarded == 1
    ((factor,), (factor0,)) = remote.factors(theta, 0.0), local.factors(theta, 0.0)
    assert factor.shift == factor0.shift == 0.0
    assert factor.factor.compensated_tiles == factor0.factor.compensated_tiles == (0, 1, 2, 3)
    assert factor.factor.lifted_tiles == factor0.factor.lifted_tiles and factor.factor.lifted_tiles
    assert (
        factor.perturbation == pytest.approx(factor0.perturbation, rel=RTOL)
        and factor.perturbation > 0
    )
    assert value.logdet == pytest.approx(reference.logdet, rel=RTOL)


def test_block_generator_is_small_to_ship(client):
    """The covariance generator pickles as its sites, kernel and parameters (no cached
    distances), and a worker's block equals this process's bit for bit (the same
    function of the same coordinates)."""
    coords = np.random.default_rng(3).uniform(0.0, 1.0, (N, 2))
    block = Sites(coords, get_distance("euclidean"), NUMPY).covariance_block(
        get_kernel("matern"), PARAMS
    )
    rows, cols = np.arange(0, 300), np.arange(200, 700)
    block.entries(rows, rows)  # fills a cache, which is not sent
    assert len(pickle.dumps(block)) < coords.nbytes + 2_000
    remote = client.submit(lambda b: b(rows, cols), block).result()
    assert np.array_equal(remote, block(rows, cols))


def test_without_a_client_or_the_dask_extra():
    """``"default"`` with no client running, and ``client=`` without dask.distributed
    installed (a fresh process; ``import geostat`` does not import Dask)."""
    code = (
        "import sys, numpy as np, geostat as gs\n"
        "assert 'distributed' not in sys.modules and 'dask' not in sys.modules\n"
        "X, p = np.random.default_rng(0).random((50, 2)), {'variance': 1.0, 'range': 0.2}\n"
        "try:\n    gs.simulate(X, p, client='default')\n"
        "except ValueError as exc:\n    print(exc)\n"
        "sys.modules['distributed'] = None\n"
        "try:\n    gs.simulate(X, p, client='default')\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "client='default' uses the current Dask client, and there is none" in out
    assert "pip install 'geostat-tlr[dask]'" in out


@pytest.mark.slow
def test_larger_likelihood_with_groups_equals_the_in_process_value(client):
    """8,192 sites in 16 tiles, two replicate groups, REML with a linear trend."""
    n = 8192
    X = np.random.default_rng(5).uniform(0.0, 1.0, (n, 2))
    y = np.random.default_rng(6).standard_normal((n, 2))
    y[: n // 4, 1] = np.nan
    settings = {"method": "tlr", "tile_size": 512, "trend": "linear", "reml": True}
    local = gs.log_likelihood(X, y, PARAMS, **settings)
    assert gs.log_likelihood(X, y, PARAMS, **settings, client=client) == pytest.approx(
        local, rel=RTOL
    )


def test_a_space_time_anisotropic_log_likelihood_equals_the_in_process_value(client):
    """Lag kernels on the workers: the same ARA tiles (their generator asks for whole-tile
    compression, which the cluster honours as the in-process build does)."""
    rng = np.random.default_rng(19)
    sites = rng.uniform(size=(60, 2))
    X = np.column_stack([np.repeat(sites, 10, axis=0), np.tile(np.arange(10.0), 60)])
    y = rng.normal(size=X.shape[0])
    kernel = gs.SpaceTime(space=gs.Anisotropic(gs.Exponential()))
    params = {
        "variance": 1.0,
        "range": 0.3,
        "anisotropy_ratio": 0.5,
        "anisotropy_angle": 0.3,
        "time_range": 2.0,
        "separability": 0.4,
        "nugget": 0.1,
    }
    local = gs.log_likelihood(X, y, params, kernel=kernel, method="tlr", tile_size=128, time=True)
    assert gs.log_likelihood(
        X, y, params, kernel=kernel, method="tlr", tile_size=128, time=True, client=client
    ) == pytest.approx(local, rel=RTOL)
