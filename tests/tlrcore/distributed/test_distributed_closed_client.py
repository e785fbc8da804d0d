"""tlrcore.distributed with a cluster in this process: a closed Dask client, given to
``from_generator`` or holding the tiles of a matrix or a factor, gives a ValueError that says
the client is closed and what to do, not Dask's bare ``RuntimeError: IOLoop is closed``;
workers in this process's threads leave its C allocator alone."""

import os

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
td = pytest.importorskip("tlrcore.distributed")

N, TILE = 200, 50


class Exponential:
    """``exp(-|x - y| / 0.2) + 0.01 [x == y]`` on sites of a line: a picklable generator."""

    def __init__(self, X):
        self.X = X

    def __call__(self, rows, cols):
        block = np.exp(-np.abs(self.X[rows][:, None] - self.X[cols][None, :]) / 0.2)
        block[rows[:, None] == cols[None, :]] += 0.01
        return block


@pytest.fixture
def client():
    """A client of a cluster in this process (one worker, one thread), closed by the test
    or at its end; the environment as it was before."""
    environment = dict(os.environ)
    made = distributed.Client(
        processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None
    )
    try:
        yield made
    finally:
        made.close()
        os.environ.clear()
        os.environ.update(environment)


@pytest.fixture
def block():
    return Exponential(np.linspace(0.0, 1.0, N))


def test_a_closed_client_is_refused_naming_it_and_the_fix(client, block):
    client.close()
    with pytest.raises(
        ValueError, match=r"client is a closed Dask client .*distributed\.Client\(\.\.\.\)"
    ):
        td.DistributedTLRMatrix.from_generator(client, block, N, TILE)


def test_a_matrix_and_a_factor_whose_client_closed_say_so(client, block):
    A = td.DistributedTLRMatrix.from_generator(client, block, N, TILE)
    L = td.cholesky(A)
    assert np.isfinite(L.logdet())
    client.close()
    matrix, factor = (
        "the Dask client of this matrix is closed",
        "the Dask client of this factor is closed",
    )
    for call, message in [
        (A.frobenius_norm, matrix),
        (lambda: td.cholesky(A), matrix),
        (A.gather, matrix),
        (L.logdet, factor),
        (lambda: L.solve(np.ones(N)), factor),
        (lambda: L.multiply_lower(np.ones(N)), factor),
        (L.gather, factor),
        (L.wait, factor),
    ]:
        with pytest.raises(
            ValueError, match=message + r" .*build the (matrix|factor) again with an open client"
        ):
            call()


def test_workers_in_this_process_leave_its_allocator_alone(client, block, monkeypatch):
    """Only a worker process (no client of its own) sets its heap for task after task."""
    from tlrcore.concurrency import heap

    monkeypatch.setattr(heap, "_task_heap", None)
    A = td.DistributedTLRMatrix.from_generator(client, block, N, TILE)
    assert np.isfinite(td.cholesky(A).logdet())
    assert heap._task_heap is None
