"""ACA of all the tiles of one tile column together, their reads served in few calls.

Each tile runs its own :func:`~tlrcore.compress.aca.aca_steps` coroutine, so its pivots,
terms and rank are those of :func:`~tlrcore.compress.aca_compress` given the same entries.
The requests of all running tiles are collected each round: the rows they ask for share
their columns, so one generator call reads them all, as the calls, not the arithmetic,
dominate the generator time of ACA on kernel matrices."""

from tlrcore.compress.aca import aca_steps

__all__ = ["aca_column"]


def aca_column(read_rows, read_columns, sizes, p, tol, max_rank=None, recompressed=True):
    """Compress the blocks ``A_t`` of shapes ``(sizes[t], p)`` by ACA together: one pair per
    block, what :func:`~tlrcore.compress.aca_compress` returns for it (`tol` and `max_rank`
    checked by the caller; `recompressed` as in :func:`~tlrcore.compress.aca.aca_steps`).

    ``read_rows(parts)`` and ``read_columns(parts)``, ``parts`` a list of ``(t, idx)``, return
    the lists of ``A_t[idx, :]`` and of ``A_t[:, idx]``, float64 and finite, in that order."""
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
                for (t, q, _), values in zip(
                    wanted, read([(t, idx) for t, _, idx in wanted]), strict=True
                ):
                    answers[t][q] = values
        for t, values in answers.items():
            _advance(steps, t, values, pending, results)
    return results


def _advance(steps, t, values, pending, results):
    """Send `values` to coroutine `t`; its next requests go to `pending`, its result to
    `results`."""
    try:
        pending[t] = steps[t].send(values)
    except StopIteration as done:
        pending.pop(t, None)
        results[t] = done.value
