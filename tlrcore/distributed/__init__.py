"""The TLR Cholesky on a ``dask.distributed`` cluster.

Needs Dask (``pip install "dask[distributed]"``, or ``pip install ".[dask]"`` from a clone
of the repository); ``import tlrcore`` imports neither this subpackage nor Dask.

::

    from distributed import Client
    import tlrcore.distributed as td

    client = Client("tcp://scheduler:8786")          # or LocalCluster(), dask-jobqueue, ...
    A = td.DistributedTLRMatrix.from_generator(client, block, n, tile_size, accuracy=1e-8)
    L = td.cholesky(A, overwrite_a=True)
    L.logdet(), L.solve_lower(z)                      # a float, an n-vector

The tiles are computed on the workers from the picklable generator ``block``, placed by
tile row (row ``i`` on worker ``i mod P``), and factored by a task graph of the
left-looking steps with the in-process seeds: the factor, its log-determinant and solves
equal the in-process ones to rounding, with the tile-local safeguards too. When a worker
dies, the scheduler recomputes its tiles from the graph.

Modules
-------
matrix
    :class:`DistributedTLRMatrix`: the tiles as futures, built from a block generator.
factorize
    :func:`cholesky`: the factorization as a task graph.
factor
    :class:`DistributedCholesky`, a :class:`tlrcore.CholeskyFactor`.
_graph, _tasks
    Keys, placement and submission; the functions the workers run.
"""

from __future__ import annotations

try:
    import distributed  # noqa: F401
except ImportError as exc:
    raise ImportError(
        "tlrcore.distributed needs dask.distributed, which is not installed: "
        'pip install "dask[distributed]" (or, from a clone of the repository, '
        'pip install ".[dask]").'
    ) from exc

from tlrcore.distributed.factor import DistributedCholesky
from tlrcore.distributed.factorize import cholesky
from tlrcore.distributed.matrix import DistributedTLRMatrix

__all__ = ["DistributedCholesky", "DistributedTLRMatrix", "cholesky"]
