"""ACA of all the tiles of one tile column together, their reads served in few calls.

Each tile ``A(i, j)``, ``i > j``, runs its own :func:`~tlrcore.compress.aca.aca_steps`
coroutine, so its pivots, terms and rank are exactly those of
:func:`~tlrcore.compress.aca_compress` given the same entries. What changes is who reads
the entries: in every round, the requests of all the tiles that are still running are
collected and handed to two callables at once, one for the rows and one for the columns.
The tiles of a column share their columns (the indices of tile ``j``), so all the rows
they ask for in a round are one block of the matrix, read by one generator call instead
of one per tile (:meth:`tlrcore.TLRMatrix.from_generator`); that call overhead, not the
arithmetic, dominated the generator time of ACA on kernel matrices.
"""

from tlrcore.compress.aca import aca_steps

__all__ = ["aca_column"]


def aca_column(read_rows, read_columns, sizes, p, tol, max_rank=None, recompressed=True):
    """Compress the blocks ``A_t`` of shapes ``(sizes[t], p)`` by ACA, all together.

    Parameters
    ----------
    read_rows : callable
        ``read_rows(parts)`` with ``parts`` a list of ``(t, idx)``: the list of the rows
        ``A_t[idx, :]``, float64 and finite, in that order.
    read_columns : callable
        ``read_columns(parts)``: the list of the columns ``A_t[:, idx]``.
    sizes : sequence of int
        Rows of each block.
    p : int
        Columns of every block.
    tol : float
        Absolute Frobenius tolerance of every block (checked by the caller).
    max_rank : int or None, default None
        As in :func:`~tlrcore.compress.aca_compress` (checked by the caller).
    recompressed : bool, default True
        Recompress each block's ACA terms (:func:`~tlrcore.compress.aca.aca_steps`).

    Returns
    -------
    list of (U, V)
        One pair per block, equal to what :func:`~tlrcore.compress.aca_compress` returns
        for that block given the same entries.
    """
    steps = [aca_steps(m, p, tol, max_rank, recompressed) for m in sizes]
    results = [None] * len(steps)
    pending = {}
    for t in range(len(steps)):
        _advance(steps, t, None, pending, results)
    while pending:
        answers = {t: [None] * len(requests) for t, requests in pending.items()}
        for kind, read in (("rows", read_rows), ("cols", read_columns)):
            wanted = [
                (t, q, idx)
                for t, requests in pending.items()
                for q, (what, idx) in enumerate(requests)
                if what == kind
            ]
            if wanted:
                for (t, q, _), values in zip(wanted, read([(t, idx) for t, _, idx in wanted])):
                    answers[t][q] = values
        for t, values in answers.items():
            _advance(steps, t, values, pending, results)
    return results


def _advance(steps, t, values, pending, results):
    """Send `values` to coroutine `t`: its next requests go to `pending`, its result (when
    it returns) to `results`."""
    try:
        pending[t] = steps[t].send(values)
    except StopIteration as done:
        pending.pop(t, None)
        results[t] = done.value
