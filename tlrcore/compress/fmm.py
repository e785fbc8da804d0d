r"""The product ``A @ X`` of a kernel matrix ``A_ij = f(t_i, s_j)`` through Chebyshev
interpolation on a tree of boxes: the black-box fast multipole method [1]_.

The targets ``t_i`` and the sources ``s_j`` share one tree of cubes (a uniform
``2^d``-tree on their bounding cube, its leaves holding about `leaf_size` sources). Two
boxes of one level are well separated when they do not touch. On such a pair the kernel
is interpolated in both points at the tensor Chebyshev nodes ``\bar x_m`` of each box,

.. math::

    f(t, s) \approx \sum_{m, m'} S_p(\bar t_m, t) \, f(\bar t_m, \bar s_{m'}) \,
    S_p(\bar s_{m'}, s), \qquad
    S_p(\bar x, x) = \prod_{a=1}^{d} \Bigl(\frac1p + \frac2p \sum_{k=1}^{p-1}
    T_k(\bar x_a) T_k(x_a)\Bigr),

(coordinates scaled to ``[-1, 1]`` in their box), so the sources' weights are gathered
at the nodes of their boxes (anterpolation, then child to parent, which is exact for a
polynomial of degree below ``p``), carried to the nodes of every well-separated target
box of the same level whose parents touch (``f`` at ``p^d x p^d`` node pairs: one matrix
per offset and level where ``f`` depends on ``t - s`` alone, else one per pair of
boxes), passed down to the children, and interpolated at the targets; the pairs of
touching leaves are summed directly. Work is ``O((m + n) (p^d + leaf size))`` (the
pairs' matrices add ``O(p^{2d})`` kernel entries per box); memory one matrix per offset
plus ``p^d q`` numbers per box.

The error of the interpolation falls geometrically with ``p`` where ``f`` is analytic
away from ``t = s`` (exponential, Matérn, Gaussian kernels of a smooth distance); it is
not bounded here. The
caller checks a sample of rows against a direct product.

References
----------
.. [1] W. Fong, E. Darve, "The black-box fast multipole method", J. Comput. Phys. 228
   (2009) 8712-8725.
"""

from __future__ import annotations

import itertools

import numpy as np

from tlrcore.compress._recompress import check_block_output
from tlrcore.concurrency.threads import column_progress, runner, tile_pool, workers
from tlrcore.errors import GeneratorError

__all__ = ["balanced_leaf_size", "bounding_cube", "fmm_product", "leaf_counts"]

#: Deepest level of the tree (box keys take ``d`` bits per level in an int64).
MAX_LEVEL = 20
#: Targets or sources whose interpolation weights are formed at once.
CHUNK = 2**15


def fmm_product(
    function,
    targets,
    sources,
    X,
    order,
    leaf_size=64,
    bounds=None,
    invariant=True,
    description="product",
):
    """``A @ X`` (``(m, q)``) for ``A[i, j] = function(targets[i], sources[j])``.

    Parameters
    ----------
    function : callable
        ``function(P, Q)`` -> the ``(len(P), len(Q))`` entries between the points ``P``
        ``(a, d)`` and ``Q`` ``(b, d)``, smooth where the points differ.
    targets, sources : ndarray of shape (m, d) and (n, d)
        Finite points, ``d`` from 1 to 3.
    X : ndarray of shape (n, q)
    order : int
        Chebyshev nodes per dimension and box, ``p`` (1 to 32).
    leaf_size : int, default 64
        Sources per leaf box, about.
    bounds : tuple of (ndarray of shape (d,), float), optional
        The lowest corner and the side of the tree's cube, which must hold every point;
        by default the bounding cube of the points. Products with the same sources,
        `bounds` and settings give a target the same value, to the rounding of products
        of other shapes, whatever the other targets.
    invariant : bool, default True
        Whether `function` depends on ``P[i] - Q[j]`` alone: then one matrix of node
        interactions serves every pair of boxes with the same offset on a level;
        otherwise each pair's is formed.
    description : str
        Label of the progress counter.

    Returns
    -------
    ndarray of shape (m, q)

    Raises
    ------
    ValueError
        For points or weights of the wrong shape or not finite, or a bad `order` or
        `leaf_size`.
    GeneratorError
        If `function` returns a wrong shape or non-finite values.
    """
    targets, sources = _points(targets, "targets"), _points(sources, "sources")
    X = np.asarray(X, dtype=float)
    if targets.shape[1] != sources.shape[1] or not 1 <= targets.shape[1] <= 3:
        raise ValueError(
            "targets and sources must have the same number of columns, 1 to 3; got "
            f"{targets.shape[1]} and {sources.shape[1]}."
        )
    if X.ndim != 2 or X.shape[0] != sources.shape[0]:
        raise ValueError(f"X must be (n, q) with n = {sources.shape[0]}; got shape {X.shape}.")
    if not np.isfinite(X).all():
        raise ValueError("X must be finite.")
    for name, value, high in (("order", order, 32), ("leaf_size", leaf_size, None)):
        if not isinstance(value, (int, np.integer)) or value < 1 or (high and value > high):
            raise ValueError(f"{name} must be an integer from 1{f' to {high}' if high else ''}.")
    checked = _Checked(function)
    out = np.zeros((targets.shape[0], X.shape[1]))
    if not targets.shape[0] or not sources.shape[0]:
        return out
    tree = _Tree(targets, sources, int(leaf_size), bounds)
    with (
        tile_pool(min(workers(), max(1, len(tree.target_leaves) // 16))) as pool,
        column_progress(len(tree.target_leaves), description, unit="box") as counter,
    ):
        far = _FarField(tree, int(order), checked, invariant, runner(pool))
        local = far.locals(sources, X) if tree.levels >= 2 else None
        for rows, values in runner(pool)(
            lambda box: _leaf(tree, far, checked, targets, sources, X, local, box),
            range(len(tree.target_leaves)),
        ):
            out[rows] = values
            counter.update()
    return out


def leaf_counts(targets, sources, leaf_size=64, bounds=None):
    """The occupied leaves ``(of targets, of sources)`` of :func:`fmm_product`'s tree for
    these arguments: its work and memory grow with the first (a leaf's local expansion,
    its near sources and ``(6^d - 3^d)`` node interactions), so many more target leaves
    than source leaves (sources clustered, targets spread) make it slow."""
    targets, sources = _points(targets, "targets"), _points(sources, "sources")
    tree = _Tree(targets, sources, int(leaf_size), bounds)
    return len(tree.target_leaves), len(tree.source_leaves)


def balanced_leaf_size(n_sources, n_targets, order, d, invariant=True):
    """Sources per leaf (as `leaf_size` counts them) that balance the direct sums of
    touching leaves against the interactions of the boxes' nodes, from 16 to 1,024.

    A target meets the sources of ``3^d`` leaves, ``m 3^d s`` kernel entries in all; the
    pairs of boxes of all levels number about ``(6^d - 3^d) (n / s)`` times ``2^d / (2^d
    - 1)``, each ``p^{2d}`` kernel entries where the pair forms its own interactions, or
    as many multiply-adds where one matrix per offset serves all pairs (counted as a
    twentieth of an entry). In two dimensions these balance at ``s = 2 sqrt(n c / m)``,
    ``c`` the cost of a pair; leaves hold about half of `leaf_size`, hence
    ``4 sqrt(n c / m)``.
    """
    cost = float(order) ** (2 * d) / (20.0 if invariant else 1.0)
    return int(np.clip(4 * np.sqrt(n_sources * cost / max(1, n_targets)), 16, 1024))


def _points(points, name):
    points = np.asarray(points, dtype=float)
    if points.ndim != 2:
        raise ValueError(f"{name} must be 2-D (count, d); got shape {points.shape}.")
    if not np.isfinite(points).all():
        raise ValueError(f"{name} must be finite.")
    return points


class _Checked:
    """The kernel function, its blocks checked for shape and finiteness."""

    def __init__(self, function):
        self.function = function

    def __call__(self, P, Q, where):
        try:
            return check_block_output(
                self.function(P, Q), (P.shape[0], Q.shape[0]), f"the kernel function ({where})"
            )
        except ValueError as exc:
            raise GeneratorError(str(exc)) from None


class _Tree:
    """Leaf cells of the targets and sources in a uniform tree on their bounding cube,
    both sorted by leaf, and the occupied boxes of every level."""

    def __init__(self, targets, sources, leaf_size, bounds):
        self.d = targets.shape[1]
        self.low, self.width = bounding_cube(targets, sources) if bounds is None else bounds
        self.low = np.asarray(self.low, dtype=float)
        self.width = float(self.width)
        for name, points in (("targets", targets), ("sources", sources)):
            if (points < self.low).any() or (points > self.low + self.width).any():
                raise ValueError(f"bounds must hold all {name}; pass the bounding_cube of both.")
        self.levels = self._depth(sources, leaf_size)
        self.source_order, self.source_cells, source_keys = self._sorted(sources)
        self.target_order, target_cells, target_keys = self._sorted(targets)
        self.source_leaves, self.source_starts = _segments(source_keys)
        self.target_leaves, self.target_starts = _segments(target_keys)
        self.source_leaf_cells = self.source_cells[self.source_starts[:-1]]
        self.target_leaf_cells = target_cells[self.target_starts[:-1]]

    def cells(self, points, level):
        scaled = (points - self.low) / self.width * (1 << level)
        return np.clip(np.floor(scaled).astype(np.int64), 0, (1 << level) - 1)

    def key(self, cells, level):
        key = np.zeros(cells.shape[0], dtype=np.int64)
        for a in range(self.d):
            key = (key << level) | cells[:, a]
        return key

    def box_width(self, level):
        return self.width / (1 << level)

    def centers(self, cells, level):
        return self.low + (cells + 0.5) * self.box_width(level)

    def _depth(self, sources, leaf_size):
        """The shallowest level whose occupied boxes hold at most `leaf_size` sources on
        average."""
        for level in range(MAX_LEVEL + 1):
            occupied = np.unique(self.key(self.cells(sources, level), level)).size
            if sources.shape[0] <= leaf_size * occupied:
                return level
        return MAX_LEVEL

    def _sorted(self, points):
        cells = self.cells(points, self.levels)
        keys = self.key(cells, self.levels)
        order = np.argsort(keys, kind="stable")
        return order, cells[order], keys[order]


def bounding_cube(*point_sets):
    """The lowest corner ``(d,)`` and the side of a cube holding every point of the sets
    (each ``(count, d)``, not all empty), a little larger than their bounding box."""
    low = np.min([points.min(axis=0) for points in point_sets if points.shape[0]], axis=0)
    high = np.max([points.max(axis=0) for points in point_sets if points.shape[0]], axis=0)
    width = float(np.max(high - low))
    return low, width * (1 + 1e-12) if width > 0 else 1.0


def _segments(sorted_keys):
    """Unique keys of a sorted array and the starts of their runs (with the end)."""
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    return sorted_keys[starts], np.r_[starts, sorted_keys.size]


def chebyshev_nodes(order):
    """The ``p`` Chebyshev points of the first kind in ``[-1, 1]``."""
    return np.cos((2 * np.arange(order) + 1) * np.pi / (2 * order))


def interpolation_weights(u, order):
    """``S_p(t_m, u_i)``, ``(len(u), p)``: the Lagrange polynomials of the Chebyshev nodes
    ``t_m`` at the points ``u`` of ``[-1, 1]``."""
    k = np.arange(order)
    T = np.cos(k * np.arccos(np.clip(u, -1.0, 1.0))[:, None])
    C = np.cos(k[:, None] * np.arccos(chebyshev_nodes(order))[None, :]) * (2.0 / order)
    C[0] /= 2
    return T @ C


def _tensor_weights(local, order):
    """The tensor interpolation weights ``(count, p^d)`` of points in box coordinates."""
    weights = np.ones((local.shape[0], 1))
    for a in range(local.shape[1]):
        axis = interpolation_weights(local[:, a], order)
        weights = (weights[:, :, None] * axis[:, None, :]).reshape(local.shape[0], -1)
    return weights


class _FarField:
    """Multipole and local expansions on the tree: the far field of every target leaf."""

    def __init__(self, tree, order, checked, invariant, run):
        self.tree, self.order, self.checked = tree, order, checked
        self.invariant, self.run = invariant, run
        nodes = chebyshev_nodes(order)
        self.grid = np.stack(np.meshgrid(*([nodes] * tree.d), indexing="ij"), axis=-1).reshape(
            -1, tree.d
        )
        # child-to-parent interpolation, (child node, parent node), per side of the parent
        self.to_parent = [interpolation_weights(0.5 * nodes + side, order) for side in (-0.5, 0.5)]

    def locals(self, sources, X):
        """Local expansions at the target leaves, ``(target leaves, p^d, q)``."""
        tree = self.tree
        multipoles = {tree.levels: self._anterpolated(sources, X)}
        source_cells = {tree.levels: tree.source_leaf_cells}
        for level in range(tree.levels - 1, 1, -1):
            multipoles[level], source_cells[level] = self._upward(
                multipoles[level + 1], source_cells[level + 1], level
            )
        target_cells = {tree.levels: tree.target_leaf_cells}
        for level in range(tree.levels - 1, 1, -1):
            target_cells[level] = np.unique(target_cells[level + 1] >> 1, axis=0)
        local = None
        for level in range(2, tree.levels + 1):
            cells = target_cells[level]
            here = np.zeros((cells.shape[0], self.grid.shape[0], X.shape[1]))
            if local is not None:
                self._downward(local, target_cells[level - 1], here, cells, level)
            self._interactions(here, cells, multipoles[level], source_cells[level], level)
            local = here
        return local

    def _anterpolated(self, sources, X):
        tree = self.tree
        size = tree.box_width(tree.levels)
        starts = tree.source_starts
        out = np.empty((len(tree.source_leaves), self.grid.shape[0], X.shape[1]))
        first = 0
        while first < len(tree.source_leaves):
            last = max(first + 1, int(np.searchsorted(starts, starts[first] + CHUNK, "right")) - 1)
            last = min(last, len(tree.source_leaves))
            rows = tree.source_order[starts[first] : starts[last]]
            cells = tree.source_cells[starts[first] : starts[last]]
            local = (sources[rows] - tree.centers(cells, tree.levels)) * (2.0 / size)
            weights = _tensor_weights(local, self.order)
            out[first:last] = np.add.reduceat(
                weights[:, :, None] * X[rows][:, None, :], starts[first:last] - starts[first]
            )
            first = last
        return out

    def _along(self, values, matrices, upward):
        """`values` ``(k, p^d, q)`` carried along each node axis ``a`` by the child-to-parent
        weights ``matrices[a]`` (child node, parent node): up to the parent, or down."""
        p, d = self.order, self.tree.d
        shaped = values.reshape(values.shape[0], *([p] * d), values.shape[-1])
        for a, matrix in enumerate(matrices):
            operator = matrix if upward else matrix.T
            shaped = np.moveaxis(np.tensordot(shaped, operator, axes=([1 + a], [0])), -1, 1 + a)
        return shaped.reshape(values.shape)

    def _by_position(self, child_cells):
        """Children grouped by their position in the parent: ``(sides, members)``."""
        bits = child_cells & 1
        code = self.tree.key(bits, 1)
        for value in np.unique(code):
            members = np.flatnonzero(code == value)
            yield bits[members[0]], members

    def _upward(self, child_multipoles, child_cells, level):
        parents = np.unique(child_cells >> 1, axis=0)
        keys = self.tree.key(parents, level)
        out = np.zeros((parents.shape[0], *child_multipoles.shape[1:]))
        for sides, members in self._by_position(child_cells):
            where = np.searchsorted(keys, self.tree.key(child_cells[members] >> 1, level))
            matrices = [self.to_parent[side] for side in sides]
            out[where] += self._along(child_multipoles[members], matrices, upward=True)
        return out, parents

    def _downward(self, parent_locals, parent_cells, child_locals, child_cells, level):
        keys = self.tree.key(parent_cells, level - 1)
        for sides, members in self._by_position(child_cells):
            where = np.searchsorted(keys, self.tree.key(child_cells[members] >> 1, level - 1))
            matrices = [self.to_parent[side] for side in sides]
            child_locals[members] += self._along(parent_locals[where], matrices, upward=False)

    def _interactions(self, local, target_cells, multipoles, source_cells, level):
        """Add to `local` the sources of the well-separated boxes whose parents touch."""
        tree = self.tree
        source_keys = tree.key(source_cells, level)
        bits = target_cells & 1
        size = tree.box_width(level)
        nodes = self.grid * (size / 2)
        for offset in itertools.product(range(-3, 4), repeat=tree.d):
            offset = np.array(offset)
            if np.abs(offset).max() < 2:
                continue
            allowed = ((offset >= -2 - bits) & (offset <= 3 - bits)).all(axis=1)
            shifted = target_cells + offset
            allowed &= ((shifted >= 0) & (shifted < (1 << level))).all(axis=1)
            rows = np.flatnonzero(allowed)
            if not rows.size:
                continue
            keys = tree.key(shifted[rows], level)
            where = np.minimum(np.searchsorted(source_keys, keys), source_keys.size - 1)
            found = source_keys[where] == keys
            if not found.any():
                continue
            rows, where = rows[found], where[found]
            if self.invariant:
                kernel = self.checked(
                    nodes, nodes + offset * size, f"level {level}, offset {tuple(offset)}"
                )
                local[rows] += np.matmul(kernel, multipoles[where])
                continue
            centers = tree.centers(target_cells[rows], level)

            def pair(i, centers=centers, rows=rows, where=where, offset=offset):
                at = nodes + centers[i]
                kernel = self.checked(at, at + offset * size, f"level {level}, box pair {i}")
                return kernel @ multipoles[where[i]]

            for i, values in enumerate(self.run(pair, range(rows.size))):
                local[rows[i]] += values


def _leaf(tree, far, checked, targets, sources, X, local, box):
    """Target leaf `box`'s rows and their values: the far field from its local expansion,
    the touching leaves' sources directly."""
    rows = tree.target_order[tree.target_starts[box] : tree.target_starts[box + 1]]
    cells = tree.target_leaf_cells[box]
    points = targets[rows]
    values = np.zeros((rows.size, X.shape[1]))
    if local is not None:
        size = tree.box_width(tree.levels)
        weights = _tensor_weights(
            (points - tree.centers(cells, tree.levels)) * (2.0 / size), far.order
        )
        values += weights @ local[box]
    near = []
    for offset in itertools.product((-1, 0, 1), repeat=tree.d):
        neighbour = cells + np.array(offset)
        if (neighbour < 0).any() or (neighbour >= 1 << tree.levels).any():
            continue
        key = tree.key(neighbour[None], tree.levels)[0]
        at = int(np.searchsorted(tree.source_leaves, key))
        if at < tree.source_leaves.size and tree.source_leaves[at] == key:
            near.append(tree.source_order[tree.source_starts[at] : tree.source_starts[at + 1]])
    if near:
        columns = np.concatenate(near)
        values += checked(points, sources[columns], f"target leaf {box}") @ X[columns]
    return rows, values
