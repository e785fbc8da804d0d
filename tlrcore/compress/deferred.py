"""Tile columns of a :class:`~tlrcore.TLRMatrix` compressed when first read.

A left-looking factorization reads tile column ``k`` of ``A`` only when it factors column
``k``, and with ``overwrite_a`` never again: a matrix whose columns are compressed just in
time, a few columns ahead, and released once factored never holds its low-rank tiles
whole. Each column is compressed by the same call, with the same tolerance and seeds, as
an eager build would make, so its factors are the same bit for bit whichever thread
compresses it and whenever."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence

__all__ = ["DeferredColumns"]


class DeferredColumns:
    """The tile columns of a matrix still to compress.

    Parameters
    ----------
    compress : callable
        ``compress(j)`` returns the factors of the tiles ``(i, j)``, ``i > j``, in order of
        ``i`` (what :func:`~tlrcore.compress.generated.compress_column` returns).
    n_tiles : int
    context : contextlib.ExitStack
        Held while columns are pending (the worker processes that compress them), closed
        once the last is compressed, or by :meth:`close`.
    """

    def __init__(
        self, compress: Callable[[int], Sequence], n_tiles: int, context: contextlib.ExitStack
    ) -> None:
        self._compress = compress
        self._locks = [threading.Lock() for _ in range(n_tiles)]
        # the last tile column has no tile below the diagonal
        self._pending = set(range(n_tiles - 1))
        self._count_lock = threading.Lock()
        self._context = context

    @property
    def remaining(self) -> list[int]:
        """The tile columns still to compress, in order."""
        return sorted(self._pending)

    def compress(self, j: int, store: Callable[[int, Sequence], None]) -> None:
        """Compress tile column `j` unless done, handing its factors to ``store(j, factors)``;
        a second caller waits for the first."""
        if j not in self._pending:
            return
        with self._locks[j]:
            if j not in self._pending:
                return
            store(j, self._compress(j))
            with self._count_lock:
                self._pending.discard(j)
                last = not self._pending
        if last:
            self.close()

    def drop(self, j: int) -> bool:
        """Forget tile column `j` if still pending (released before it was read), after any
        compression of it under way; whether it was."""
        with self._locks[j], self._count_lock:
            if j not in self._pending:
                return False
            self._pending.discard(j)
            last = not self._pending
        if last:
            self.close()
        return True

    def close(self) -> None:
        """Release what the compression held (idempotent)."""
        self._context.close()
