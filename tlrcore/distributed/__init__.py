r"""The TLR Cholesky on a ``dask.distributed`` cluster.

Needs the ``dask`` extra (``pip install "geostat-tlr[dask]"``); ``import tlrcore`` does
not import this subpackage, nor Dask.

::

    from distributed import Client
    import tlrcore.distributed as td

    client = Client("tcp://scheduler:8786")          # or LocalCluster(), dask-jobqueue, ...
    A = td.DistributedTLRMatrix.from_generator(client, block, n, tile_size, accuracy=1e-8)
    L = td.cholesky(A, overwrite_a=True)
    L.logdet(), L.solve_lower(z)                      # a float, an n-vector

The tiles are computed on the workers from the picklable generator ``block`` (its sites
travel once), placed by tile row (row ``i`` on worker ``i mod P``), and factored by a
task graph of the left-looking steps of :mod:`tlrcore.cholesky.left`, with the same
seeds: the factor, its log-determinant and its solves equal the in-process ones to
rounding, also with the tile-local safeguards (``safeguard="compensate"``,
``"compensate-block"``, ``"schur"``, ``"modified"``), which run in the diagonal tasks. When a worker dies, the scheduler recomputes its tiles from the graph.

Modules
-------
matrix
    :class:`DistributedTLRMatrix`: the tiles as futures, built from a block generator.
factorize
    :func:`cholesky`: the factorization as a task graph.
factor
    :class:`DistributedCholesky`: ``logdet``, ``solve_lower``, ``solve_upper``, ``solve``,
    ``multiply_lower``, ``ranks``, ``nbytes``, ``gather`` (what :class:`tlrcore.TLRCholesky`
    answers, so ``geostat.solvers.TLRFactor`` wraps either).
_graph, _tasks
    Keys, placement and submission; the functions the workers run.
"""

from __future__ import annotations

try:
    import distributed  # noqa: F401
except ImportError as exc:
    raise ImportError(
        "tlrcore.distributed needs dask.distributed, which is not installed: install the 'dask' extra, "
        "pip install 'geostat-tlr[dask]'."
    ) from exc

from tlrcore.distributed.factor import DistributedCholesky
from tlrcore.distributed.factorize import cholesky
from tlrcore.distributed.matrix import DistributedTLRMatrix

__all__ = ["DistributedCholesky", "DistributedTLRMatrix", "cholesky"]
