"""Adaptive randomized approximation of a batch of tiles at once, from products only.

The batched ARA of [1]_ (Algorithm 5) for every back end. ``count`` tiles ``T_i`` are seen
through ``sample(active, Omega)`` (``T_i Omega`` for the tiles still sampling) and
``project(Q)`` (``T_i^T Q_i``). A round's tiles share the Gaussian block (one batched GEMM;
each tile's estimates stay unbiased) and leave the batch once their estimated error is
below the tolerance (dynamic batching). Only products and small Gram eigenproblems are
used, which GPUs batch well: SVQB orthonormalization [2]_, ``Y W lambda^{-1/2}`` for
``Y^T Y = W diag(lambda) W^T``, twice; the stopping rule of :mod:`tlrcore.compress.ara`;
and truncation of ``Q B^T = (Q Z)(B Z)^T``, ``Z`` the eigenvectors of ``B^T B``, whose
dropped columns ``c >= r`` cost exactly ``||(B Z)_{:, r:}||_F``, so the tolerance holds to
rounding (below about ``sqrt(eps) ||T||`` the ranks exceed the SVD optimum). The largest
dropped ``||(B Z)_{:, c}||`` is the spectral norm of the truncation step; the tile's
spectral error lies between it and ``sqrt(dropped^2 + (2 e)^2)``, with the stopping rule's
probability.

References
----------
.. [1] Boukaram, W., Zampini, S., Turkiyyah, G., Keyes, D. E. (2021). H2OPUS-TLR: High
   performance tile low rank symmetric factorizations using adaptive randomized
   approximation. arXiv:2108.11932.
.. [2] Stathopoulos, A., Wu, K. (2002). A block orthogonalization procedure with constant
   synchronization requirements. SIAM J. Sci. Comput. 23(6), 2165-2182.
"""

from __future__ import annotations

import math

import numpy as np

from tlrcore.backends import upload_indices
from tlrcore.errors import FactorizationError

__all__ = ["batched_ara"]

_SAFETY = 0.25
#: Rounds that draw `block_size` columns; later ones draw twice as many. Most tiles stop
#: within these (their rank, then a measurement); the few of high rank that go on would
#: otherwise pay a round's fixed costs per `block_size` columns.
_NARROW_ROUNDS = 2
_ESTIMATE_MARGIN = 2.0
_NOISE = 64 * np.finfo(np.float64).eps
#: Gram eigenvalues below this multiple of the largest are not trusted as directions.
_GRAM_FLOOR = 1e3 * np.finfo(np.float64).eps


def batched_ara(
    sample, project, count, shape, tol, backend, seed, block_size=16, max_rank=None, tiles=None
):
    """Compress ``count`` tiles of `shape` ``(m, p)`` to the absolute Frobenius tolerance `tol`
    each.

    ``sample(active, Omega)`` returns ``T_i Omega`` for the sorted host positions `active`,
    ``(len(active), m, s)``; ``project(Q)`` returns ``T_i^T Q_i``, ``(count, p, q)``, for ``Q``
    of shape ``(count, m, q)``. Round ``t`` draws its block with seed ``seed + t``, of
    `block_size` columns in the first two rounds and twice as many after; `block_size` at
    most 16 keeps the Gram eigenproblems in cuSOLVER's batched Jacobi solver (order 32);
    `max_rank` caps the ranks (the tolerance may then not be met); ``tiles = (first, column)``
    names tile ``i`` of the batch ``(first + i, column)`` in errors.

    Returns ``(U, V, ranks, dropped)``: ``U`` ``(count, m, r)`` with orthonormal columns and
    ``V`` ``(count, p, r)``, zero beyond each rank; on the host the ranks and each
    truncation's largest dropped singular value (0.0 if none).

    Reads from the back end: one per round (two numbers per sampling tile) and one for the
    truncation (two per tile), besides what `sample`, `project` and the back end's ``eigh``
    read. Copies to it: per round, in one transfer, its selections of tiles (the random
    block is the back end's :meth:`~tlrcore.backends.Backend.normal`, drawn on the device
    by CuPy's); per truncation, the budgets. The eigensolves are not checked one by one (on
    a GPU each check is a read): a failure leaves values that are not finite, which the
    round's or the truncation's read finds, raising
    :class:`~tlrcore.errors.FactorizationError` that names the tiles."""
    xp = backend.xp
    m, p = shape
    if count == 0 or m == 0 or p == 0:
        return (
            xp.zeros((count, m, 0)),
            xp.zeros((count, p, 0)),
            np.zeros(count, dtype=np.int64),
            np.zeros(count),
        )
    limit = min(m, p) if max_rank is None else min(m, p, max_rank + max(block_size, max_rank // 2))
    Q = xp.zeros((count, m, 0))
    estimate = np.full(count, np.inf)
    basis = np.zeros(count, dtype=np.int64)
    # Tiles leave the sampling for good, so tile i's columns of Q beyond prefix[i] are zero.
    prefix = np.zeros(count, dtype=np.int64)
    # Per appended round: its first column of Q, its width, the tiles and their kept counts.
    rounds = []
    active, active_on_device = np.arange(count), None
    round_ = 0
    # Dropped directions leave zero columns, so the padded width may pass `limit`.
    while active.size and Q.shape[2] < 2 * limit:
        full = block_size if round_ < _NARROW_ROUNDS else 2 * block_size
        width = int(min(full, limit - basis[active].min()))
        Y = sample(active, backend.normal(seed + round_, (p, width)))
        noise2 = _NOISE**2 * xp.sum(Y * Y, axis=(1, 2))[:, None]
        Qa = Q if active.size == count else Q[active_on_device]
        Y = _project_out(Qa, _project_out(Qa, Y))
        # Every active tile's panel is made before the round's one read: the estimates say
        # which tiles append theirs, the directions kept which keep sampling. A first pass
        # that keeps none leaves a zero panel, of which the second keeps none: the second
        # pass's count says both.
        panel, _ = _orthonormalize(xp, backend, Y, noise2)
        panel = _project_out(Qa, panel)
        panel, kept = _orthonormalize(xp, backend, panel, 0.25)
        residual, kept = backend.to_host(xp.stack([_norms(xp, Y), kept.astype(xp.float64)]))
        _check_finite(residual, active, tiles)
        estimate[active] = residual / math.sqrt(width)
        converged = estimate[active] <= _SAFETY * tol
        # A converged tile's full panel was only a measurement: it is not appended.
        appended = ~(converged & (width == full))
        basis[active[appended]] += kept[appended].astype(np.int64)
        following = active[appended & ~converged & (kept > 0) & (basis[active] < limit)]
        picks, into, active_on_device = upload_indices(
            xp, [np.flatnonzero(appended), active[appended], following]
        )
        if appended.any():
            grown = xp.zeros((count, m, width))
            grown[into] = panel if appended.all() else panel[picks]
            rounds.append((Q.shape[2], width, active[appended], kept[appended]))
            Q = xp.concatenate([Q, grown], axis=2)
            prefix[active[appended]] = Q.shape[2]
        active = following
        round_ += 1
    if Q.shape[2] == 0:  # every tile met its tolerance on its first samples: rank 0
        return Q, xp.zeros((count, p, 0)), np.zeros(count, dtype=np.int64), np.zeros(count)
    B = project(Q)
    complete = basis >= min(m, p)
    sampling_error = np.where(
        complete, 0.0, _ESTIMATE_MARGIN * np.where(np.isfinite(estimate), estimate, 0.0)
    )
    budget = np.sqrt(np.maximum(tol * tol - sampling_error**2, 0.0))
    caps = basis if max_rank is None else np.minimum(basis, max_rank)
    empty = _empty_columns(count, Q.shape[2], rounds)
    return _truncate(xp, backend, Q, B, budget, caps, prefix, empty, tiles)


def _empty_columns(count, width, rounds):
    """Which of the `width` columns of each tile's ``Q`` are zero (host, ``(count, width)``):
    a round's, for the tiles that did not append it, and the directions an appended panel
    dropped, its first ``width - kept`` (SVQB keeps the largest eigenvalues, which ``eigh``
    sorts last); `rounds` as the loop of :func:`batched_ara` records them."""
    empty = np.ones((count, width), dtype=bool)
    for start, w, tiles, kept in rounds:
        empty[tiles[:, None], start + np.arange(w)] = np.arange(w) < (w - kept)[:, None]
    return empty


def _check_finite(values, positions, tiles):
    """FactorizationError naming the tiles at `positions` whose `values` (host, per tile in
    the last axis) are not all finite."""
    bad = positions[~np.isfinite(values).reshape(-1, positions.size).all(axis=0)]
    if bad.size:
        names = (
            ", ".join(f"({tiles[0] + i}, {tiles[1]})" for i in bad[:5])
            if tiles is not None
            else f"at positions {bad[:5].tolist()} of the batch"
        )
        raise FactorizationError(
            f"batched ARA: the compression of tiles {names}{' ...' if bad.size > 5 else ''} "
            "met values that are not finite (NaN or infinity in the samples or in an "
            "eigensolve)."
        )


def _norms(xp, Y):
    """Frobenius norm of each matrix of a stack."""
    return xp.sqrt(xp.sum(Y * Y, axis=(1, 2)))


def _project_out(Q, Y):
    """``(I - Q Q^T) Y`` for stacks."""
    if Q.shape[2] == 0:
        return Y
    return Y - Q @ (Q.transpose(0, 2, 1) @ Y)


def _orthonormalize(xp, backend, Y, noise2):
    """SVQB: orthonormal columns spanning each ``Y``'s directions of norm above
    ``sqrt(noise2)`` (per matrix ``(count, 1)``, or one number), dropped ones as zero
    columns, and (on the back end) how many each kept."""
    gram = Y.transpose(0, 2, 1) @ Y
    lam, W = backend.eigh(gram, check=False)
    kept = lam > xp.maximum(noise2, _GRAM_FLOOR * lam[:, -1:])
    scale = xp.where(kept, lam, xp.inf) ** -0.5  # zero for the directions dropped
    return Y @ (W * scale[:, None, :]), xp.sum(kept, axis=1)


def _truncate(xp, backend, Q, B, budget, caps, prefix, empty, tiles):
    """Truncate each ``Q_i B_i^T`` to its Frobenius `budget`: ``(U, V, ranks, dropped)``.

    Tile ``i`` uses its first ``prefix[i]`` columns only (the rest are zero), so tiles are
    truncated in groups of one prefix: the Gram eigenproblems stay as small as each tile's
    basis (cuSOLVER's batched Jacobi solver takes orders up to 32). The ranks and dropped
    values of all groups come to the host in one read."""
    count, m, _ = Q.shape
    p = B.shape[1]
    widths = np.unique(prefix[prefix > 0])
    members = [np.flatnonzero(prefix == w) for w in widths]
    # per tile: the squared budget, the most directions, then which columns are empty
    limits = backend.asarray(np.concatenate([budget[:, None] ** 2, caps[:, None], empty], axis=1))
    parts = []
    for w, mine, at in zip(widths, members, upload_indices(xp, members), strict=True):
        if mine.size == count:
            parts.append((mine, None, Q[:, :, :w], B[:, :, :w], limits[:, : 2 + w]))
        else:
            parts.append((mine, at, Q[at, :, :w], B[at, :, :w], limits[at, : 2 + w]))
    grams = [_gram(xp, Bg, lg[:, 2:]) for *_, Bg, lg in parts]
    groups = [
        (mine, at, Qg, *_rotate(xp, Bg, Z, lg[:, :2]))
        for (mine, at, Qg, Bg, lg), (_, Z) in zip(
            parts, backend.eigh_stacks(grams, check=False), strict=True
        )
    ]
    found = backend.to_host(xp.concatenate([g[-1] for g in groups], axis=1))
    order = np.concatenate(members)
    _check_finite(found, order, tiles)
    ranks = np.zeros(count, dtype=np.int64)
    dropped = np.zeros(count)
    ranks[order], dropped[order] = found[0].astype(np.int64), np.sqrt(found[1])
    parts = [
        (at, *_trimmed(xp, Qg, Z, BZ, int(ranks[mine].max()), found_on_device[0]))
        for mine, at, Qg, Z, BZ, found_on_device in groups
    ]
    r = int(ranks.max())
    if len(parts) == 1 and parts[0][0] is None:
        return parts[0][1][:, :, :r], parts[0][2][:, :, :r], ranks, dropped
    U, V = xp.zeros((count, m, r)), xp.zeros((count, p, r))
    for at, Ug, Vg in parts:
        U[at, :, : Ug.shape[2]] = Ug
        V[at, :, : Vg.shape[2]] = Vg
    return U, V, ranks, dropped


def _gram(xp, B, empty):
    """``B^T B`` with ``-trace`` on the diagonal at the `empty` columns (1.0 where ``B``'s
    column is zero, as ``Q``'s is): their eigenvalues then lie below all others, by a gap of
    at least the norm, so their eigenvectors stay apart from the others' to rounding (a
    zero eigenvalue would mix them with the smallest) and come last in the truncation."""
    gram = B.transpose(0, 2, 1) @ B
    w = gram.shape[-1]
    diagonal = gram.reshape(gram.shape[0], -1)[:, :: w + 1]
    diagonal -= empty * xp.sum(diagonal, axis=1, keepdims=True)
    return gram


def _rotate(xp, B, Z, limits):
    """For tiles whose columns are all in use, given the eigenvectors `Z` of ``B^T B``
    (ascending eigenvalues) and per tile `limits` (on the back end) its squared budget and
    the most directions it has (its basis, at most ``max_rank``): ``Z`` largest first,
    ``BZ`` and, on the back end, the ranks meeting the budgets and the largest dropped
    squares stacked ``(2, count)``."""
    Z = xp.ascontiguousarray(xp.flip(Z, axis=2))
    BZ = B @ Z
    squares = xp.sum(BZ * BZ, axis=1)
    tail = squares @ xp.tri(squares.shape[1])  # tail[:, c] = sum of squares[:, c:]
    ranks = xp.minimum(xp.sum(tail > limits[:, :1], axis=1), limits[:, 1])
    # the maximum rather than column r: rounding can leave the tail's norms out of order
    beyond = xp.arange(squares.shape[1])[None, :] >= ranks[:, None]
    dropped2 = xp.max(xp.where(beyond, squares, 0.0), axis=1)
    return Z, BZ, xp.stack([ranks.astype(xp.float64), dropped2])


def _trimmed(xp, Q, Z, BZ, r, ranks):
    """``(U, V)`` of :func:`_rotate`'s tiles at their `ranks` (on the back end, as floats),
    `r` wide, the largest of them."""
    mask = (xp.arange(r)[None, :] < ranks[:, None]).astype(xp.float64)[:, None, :]
    return (Q @ Z[:, :, :r]) * mask, BZ[:, :, :r] * mask
