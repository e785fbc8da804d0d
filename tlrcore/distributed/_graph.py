"""Task keys, the placement of tile rows on the workers, and graph submission.

Tile row ``i`` of ``A`` and of ``L`` lives on worker ``i mod P``: left-looking, ``L(i, k)``
reads row ``L(i, :k)``, local, and row ``k``, the only tile data a column sends. The
placement is loose (``allow_other_workers``): a lost worker's tasks run elsewhere."""

from __future__ import annotations

from uuid import uuid4

import distributed
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

from tlrcore.concurrency.heap import reuse_task_memory

__all__ = ["CriticalFirst", "RowPlacement", "check_open", "prefix", "submit"]

#: Seconds to wait for a worker when the scheduler lists none: a worker whose nanny restarts
#: it, or that misses heartbeats on a busy machine, is away for a few seconds.
WORKER_WAIT = 10.0


class RowPlacement:
    """Maps a task key ``(name, i, ...)`` to the worker of tile row ``i``, cycling over
    `addresses`."""

    def __init__(self, addresses):
        if not addresses:
            raise ValueError(
                "the dask client has no workers; start some (or wait_for_workers) before building."
            )
        self.addresses = list(addresses)

    @classmethod
    def of(cls, client):
        """Cyclic map over the client's workers (sorted by address), waiting up to
        :data:`WORKER_WAIT` seconds for one."""
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
    """Scheduling priority of a task (higher first): the critical chain (keys of other names
    than `tiles`, and tiles ``(name, k + 1, k)``) before the tiles ``(name, i, k)`` of
    earlier columns, earlier first."""

    def __init__(self, tiles, n_tiles):
        self.tiles = {tiles} if isinstance(tiles, str) else set(tiles)
        self.n_tiles = n_tiles

    def __call__(self, key):
        if key[0] in self.tiles and key[1] != key[2] + 1:
            return -key[2]
        return self.n_tiles


def check_open(client, holder=None):
    """Raise a ValueError saying what to do when `client` is closed or closing (`holder`:
    ``"matrix"`` or ``"factor"`` whose tiles went with it, None for an argument)."""
    if client.status not in ("closing", "closed"):
        return
    if holder is None:
        raise ValueError(
            f"client is a closed Dask client (status {client.status!r}): make a new one, "
            "client = distributed.Client(...), and pass it."
        )
    raise ValueError(
        f"the Dask client of this {holder} is closed (status {client.status!r}), and the "
        f"{holder}'s tiles went with it: build the {holder} again with an open client (client = "
        "distributed.Client(...))."
    )


def prefix(kind):
    """A new, unique key name ``tlr-{kind}-{uuid}``."""
    return f"tlr-{kind}-{uuid4().hex}"


def run_task(func, *args):
    """``func(*args)``, in a worker process set to serve task after task from its heap
    (:func:`~tlrcore.concurrency.heap.reuse_task_memory`); a process with a client of its
    own (workers in threads of the user's process) is left as it is."""
    if not _has_client():
        reuse_task_memory()
    return func(*args)


def _has_client():
    """Whether this process holds a Dask client (a worker process does not)."""
    try:
        distributed.default_client()
    except ValueError:
        return False
    return True


def submit(client, tasks, placement, wanted, priority=None):
    """Send `tasks` (``key -> (func, *args)``) in one graph, placed by `placement` with the
    optional `priority` (callables of the key), each run by :func:`run_task`; the futures
    of the keys `wanted`."""
    annotations = {"workers": placement, "allow_other_workers": True}
    if priority is not None:
        annotations["priority"] = priority
    layer = MaterializedLayer(
        {key: (run_task, *task) for key, task in tasks.items()}, annotations=annotations
    )
    name = prefix("graph")
    return client.get(HighLevelGraph({name: layer}, {name: set()}), wanted, sync=False)
