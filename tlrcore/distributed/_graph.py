"""Task keys, the placement of tile rows on the workers, and graph submission.

Placement: tile row ``i`` (the diagonal tile ``(i, i)`` and the tiles ``(i, j)``, ``j <
i``, of ``A`` and of ``L``) lives on worker ``i mod P`` (a 1-D block-cyclic map over
rows). Left-looking, tile ``L(i, k)`` reads the whole row ``L(i, :k)``, which is then
local, and row ``k``, which is the only tile data a column sends to the other workers
(:mod:`tlrcore.distributed.cholesky`). The placement is a loose restriction
(``allow_other_workers``): when a worker is lost, the scheduler runs its tasks elsewhere.
"""

from __future__ import annotations

from uuid import uuid4

from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

__all__ = ["CriticalFirst", "RowPlacement", "check_open", "prefix", "submit"]

#: Seconds to wait for a worker when the scheduler lists none: a worker whose nanny restarts
#: it, or that misses heartbeats on a busy machine, is away for a few seconds (seen once in
#: the test suite on 2 cores, between two evaluations of a fit).
WORKER_WAIT = 10.0


class RowPlacement:
    """Maps a task key ``(name, i, ...)`` to the worker of tile row ``i``.

    Parameters
    ----------
    addresses : list of str
        The workers, in the order of the cyclic map.
    """

    def __init__(self, addresses):
        if not addresses:
            raise ValueError(
                "the dask client has no workers; start some (or wait_for_workers) before building."
            )
        self.addresses = list(addresses)

    @classmethod
    def of(cls, client):
        """Cyclic map over the client's current workers (sorted by address), waiting up to
        :data:`WORKER_WAIT` seconds for one when there are none."""
        workers = client.scheduler_info(n_workers=-1)["workers"]
        if not workers:
            try:
                client.wait_for_workers(1, timeout=WORKER_WAIT)
            except TimeoutError:
                pass
            workers = client.scheduler_info(n_workers=-1)["workers"]
        return cls(sorted(workers))

    def owner(self, i):
        """Address of the worker of tile row `i`."""
        return self.addresses[i % len(self.addresses)]

    def __call__(self, key):
        return [self.owner(key[1])]


class CriticalFirst:
    """Scheduling priority of a factorization task (higher runs first, among the tasks
    ready on a worker): the critical chain ``R(k + 1, k) -> D(k + 1) -> C(k + 1)`` (and
    the log-diagonal terms) before anything else, then the tiles of earlier columns.

    Parameters
    ----------
    row : str
        Key name of the tile tasks ``(row, i, k)`` (of ``L``, or of ``A``, whose tile
        ``(k + 1, k)`` the chain reads); every other key ``(name, k)`` belongs to the
        chain.
    n_tiles : int
    """

    def __init__(self, row, n_tiles):
        self.row, self.n_tiles = row, n_tiles

    def __call__(self, key):
        if key[0] == self.row and key[1] != key[2] + 1:
            return -key[2]
        return self.n_tiles


def check_open(client, holder=None):
    """Raise a ValueError, saying what to do, when `client` is closed or closing: its calls
    would fail with Dask's bare ``RuntimeError: IOLoop is closed``.

    Parameters
    ----------
    client : distributed.Client
    holder : str or None
        What keeps its tiles on the client's cluster (``"matrix"``, ``"factor"``): its
        tiles went with the client. None for a `client` argument.
    """
    if client.status not in ("closing", "closed"):
        return
    if holder is None:
        raise ValueError(
            f"client is a closed Dask client (status {client.status!r}): make a new one, "
            "client = distributed.Client(...), and pass it."
        )
    raise ValueError(
        f"the Dask client of this {holder} is closed (status {client.status!r}), and the {holder}'s "
        f"tiles went with it: build the {holder} again with an open client "
        "(client = distributed.Client(...))."
    )


def prefix(kind):
    """A new, unique key name ``tlr-{kind}-{uuid}`` for a set of tasks."""
    return f"tlr-{kind}-{uuid4().hex}"


def submit(client, tasks, placement, wanted, priority=None):
    """Send the tasks (a dict ``key -> (func, *args)``; arguments may be futures of earlier
    graphs) in one graph, each on the worker `placement` gives (and with the scheduling
    priority `priority` gives, a callable of the key, if any), and return the futures of
    the keys `wanted` (a list)."""
    annotations = {"workers": placement, "allow_other_workers": True}
    if priority is not None:
        annotations["priority"] = priority
    layer = MaterializedLayer(tasks, annotations=annotations)
    name = prefix("graph")
    return client.get(HighLevelGraph({name: layer}, {name: set()}), wanted, sync=False)
