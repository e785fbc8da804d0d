"""Local Dask clusters for the tests (CI has 2 cores and only loopback networking)."""

import os
from contextlib import contextmanager


@contextmanager
def local_cluster(n_workers=2):
    """A client of a new ``LocalCluster`` of `n_workers` worker processes with 1 thread each,
    whose nannies start a new process for one that dies; its scheduler's HTTP server (no
    dashboard) takes a free port.

    Starting the cluster sets ``OMP_NUM_THREADS=1``, ``OPENBLAS_NUM_THREADS=1`` and more in
    this process's environment (for its workers) and leaves them there, which would make
    every process started later (notebook kernels, the CLI) run BLAS on one thread: the
    environment is restored when the cluster closes."""
    import distributed

    environment = dict(os.environ)
    try:
        with (
            distributed.LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                scheduler_kwargs={"dashboard_address": ":0"},
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            yield client
    finally:
        os.environ.clear()
        os.environ.update(environment)
