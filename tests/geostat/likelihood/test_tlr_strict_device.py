"""The TLR likelihood on the strict device stand-in: no hidden host round trips.

:class:`strict_device.StrictBackend` holds its arrays as device arrays that refuse, as
CuPy's do, every implicit move to the host, and counts the reads it is asked for. A whole
log-likelihood (covariance tiles generated on the "device", packed build, batched
Cholesky, solves, the GLS trend and log-determinant) then runs the GPU's code path on the
CPU: it must give the value of :class:`standin.StandIn` (the same code on NumPy arrays),
and its reads must be those of the tile columns (the ARA's rounds and the diagonal tiles'
checks) plus a number that does not grow with the tiles.
"""

import numpy as np
import pytest
from standin import StandIn
from strict_device import StrictBackend

from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood import TLRLikelihood

PARAMS = {"variance": 1.3, "range": 0.1, "nugget": 0.02, "smoothness": 0.5}
TILE = 128
#: The files whose reads are made once per tile column or per ARA round.
PER_COLUMN = ("tlrcore/compress/ara_batched.py", "tlrcore/cholesky/packed.py")


def evaluate(backend, n, replicates=1):
    rng = np.random.default_rng(n)
    X = rng.uniform(size=(n, 2))
    y = rng.normal(size=(n, replicates))
    F = np.column_stack([np.ones(n), X[:, 0]])
    likelihood = TLRLikelihood(
        X,
        y,
        F,
        get_kernel("exponential"),
        get_distance("euclidean"),
        accuracy=1e-8,
        tile_size=TILE,
        backend=backend,
    )
    return likelihood.log_likelihood(PARAMS)


@pytest.mark.parametrize("replicates", [1, 2])
def test_the_strict_device_gives_the_stand_in_value(replicates):
    strict = evaluate(StrictBackend(), 1024, replicates)
    assert strict == pytest.approx(evaluate(StandIn(), 1024, replicates), rel=1e-12, abs=1e-9)


def test_reads_besides_the_tile_columns_do_not_grow_with_the_tiles():
    """Reads outside the ARA's and the diagonal tiles' are the build's check that each tile
    column's generated values are finite (one per column) and a fixed number per
    evaluation (the build's and the likelihood's own: norms, the GLS products, the
    log-determinant): from 8 tile columns to 32 they grow by 24, where a read per tile
    would add hundreds."""
    others = {}
    for n in (1024, 4096):
        B = StrictBackend()
        evaluate(B, n)
        sites = B.sites["syncs"]
        others[n] = sum(
            count
            for site, count in sites.items()
            if not site.rsplit(":", 1)[0].replace("\\", "/").endswith(PER_COLUMN)
        )
        per_column = sum(sites.values()) - others[n]
        assert per_column <= 20 * (n // TILE), (n, per_column)
    assert others[1024] <= 40 and others[4096] - others[1024] <= (4096 - 1024) // TILE, others


def probe_blocks(backend, n):
    """The first two blocks of a Matérn 1.5 likelihood's probe traces (the first with the
    information's products and the control variate, the second traces only), and the
    strict back end's counts of each."""
    rng = np.random.default_rng(n)
    X = rng.uniform(size=(n, 2))
    likelihood = TLRLikelihood(
        X,
        rng.normal(size=(n, 1)),
        np.ones((n, 1)),
        get_kernel("matern", 1.5),
        get_distance("euclidean"),
        accuracy=1e-8,
        tile_size=TILE,
        backend=backend,
    )
    theta = {"range": PARAMS["range"], "smoothness": 1.5}
    counts = []
    with likelihood.fitting():
        start = getattr(backend, "counts", None) and backend.counts.snapshot()
        _, blocks = likelihood.probe_traces(theta, PARAMS["nugget"], 0)
        first = next(blocks)
        if start is not None:
            counts.append((backend.counts - start, dict(backend.sites["syncs"])))
            start = backend.counts.snapshot()
        second = blocks.send(False)
        if start is not None:
            counts.append((backend.counts - start, None))
    return first, second, counts


def test_probe_traces_run_on_the_strict_device_with_reads_that_do_not_grow():
    """The scoring's probe traces (the derivative's TLR build, the solves and products of the
    probes, the block Vecchia control variate) on the strict device: the stand-in's
    traces, a block of traces alone read 6 times whatever the tiles, and the first block's
    reads outside the tile columns stay as few from 8 tile columns to 16; the kernel
    itself reads nothing."""
    others = {}
    for n in (1024, 2048):
        first, second, ((counts, sites), (later, _)) = probe_blocks(StrictBackend(), n)
        plain_first, plain_second, _ = probe_blocks(StandIn(), n)
        np.testing.assert_allclose(first.traces, plain_first.traces, rtol=1e-12)
        np.testing.assert_allclose(second.traces, plain_second.traces, rtol=1e-12)
        assert first.controlled == plain_first.controlled
        assert later.syncs <= 8 and later.uploads <= 4, later
        assert not any("geostat/kernels/" in site.replace("\\", "/") for site in sites), sites
        per_call = (*PER_COLUMN, "tlrcore/packed/build.py")
        others[n] = sum(
            count
            for site, count in sites.items()
            if not site.rsplit(":", 1)[0].replace("\\", "/").endswith(per_call)
        )
    assert others[1024] <= 40 and others[2048] - others[1024] <= 4, others
