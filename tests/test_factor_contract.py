"""One contract for every factor of a symmetric matrix, against NumPy / SciPy on the dense matrix.

The contract is :class:`tlrcore.Factor` (``logdet``, ``solve``, ``to_dense``, ``ranks``,
``nbytes``, ``n``, ``backend``, ``perturbation``, ``shift``) and, for a Cholesky-type
factor (``to_dense()`` returns one array), :class:`tlrcore.CholeskyFactor`
(``solve_lower``, ``solve_upper``, ``multiply_lower``, ``perm``): every factor here is
an instance of the protocol, and these tests check what its members compute.

Every entry of :data:`FACTORS` is a pair ``(id, factory)``: ``factory(problem)`` returns a
factor of ``problem.dense`` (or of a TLR compression of it at ``problem.accuracy``). Append
an entry to run one more factor through the same tests. Here ``perturbation`` and
``shift`` are 0.0: the matrix is positive definite.

The matrix: a 2-D exponential covariance ``exp(-h / 0.1) + 0.01 [h = 0]`` of 900 uniform
sites in the unit square in Morton (Z-curve) order, so that tiles hold nearby sites; tile
size 128 (seven full tiles and a ragged one of 4), generated block by block.

Tolerances, from the accuracy ``eps`` alone (never bit equality between different
operations; every bound holds on any correct machine):

* Representation. The TLR matrix meets ``||A_tlr - A||_F <= eps ||A||_F`` (its contract),
  and the factorization compresses every updated tile once more to the same tile
  tolerance, adding at most about as much again, so the matrix a factor represents,
  ``A + E`` (``E = L L^T - A``), has ``||E||_F <= eta = 2 eps ||A||_F``. (Measured here:
  0.6-0.8 eps ||A||_F, up to 1.1 on other covariances in tests/tlrcore; a dense factor
  has only rounding, about ``n u ||A||_F``.)
* Relative size of ``E``. ``||A^{-1/2} E A^{-1/2}||_2 <= ||E||_F / lambda_min(A) = delta``,
  ``delta = eta / lambda_min``: 0.016 at ``eps = 1e-6`` and 1.6e-5 at ``1e-9`` here
  (``lambda_min >= 0.01``, the nugget).
* Solves. ``(1 + delta)^{-1} A^{-1} <= (A + E)^{-1} <= (1 - delta)^{-1} A^{-1}``, so a
  solution ``x = (A + E)^{-1} b`` has ``||x - A^{-1} b|| <= delta / (1 - delta) ||A^{-1} b||``
  (from ``x - x* = -(A + E)^{-1} E x*``), and a quadratic form ``||L^{-1} P b||^2 =
  b^T (A + E)^{-1} b`` is within the relative ``delta / (1 - delta)`` of ``b^T A^{-1} b``.
* Log-determinant. ``log det(A + E) - log det A = sum_i log(1 + mu_i)`` over the
  eigenvalues ``mu_i`` of ``A^{-1/2} E A^{-1/2}``; ``|mu_i| <= delta``, ``sum |mu_i| <=
  sqrt(n) ||A^{-1/2} E A^{-1/2}||_F <= sqrt(n) delta`` and ``|log(1 + mu)| <= |mu| / (1 -
  delta)``: the difference is at most ``sqrt(n) delta / (1 - delta)`` (0.47 and 4.7e-4).
* Rounding, for identities that hold exactly in exact arithmetic: a product undone by a
  solve, the ``L`` of ``to_dense`` against that of ``multiply_lower``, and ``logdet`` and
  ``solve`` against NumPy / SciPy on the matrix ``A + E`` that ``to_dense`` gives (these
  pin the factor's own arithmetic, where the bounds above only bound ``E``): ``10 n u``
  times the condition number involved (``cond(L) = sqrt(cond(A + E))``; ``sqrt(n)``
  times that for a log-determinant), ``u`` the unit roundoff; it is added to every bound
  above as well.

The a-priori bounds are loose by design (measured errors: 1e-8 to 1e-6 of the
log-determinant bound, about 1e-3 of the solve bound, 0.3-0.4 ``eta`` for ``E``); they
hold for any factor that meets the accuracy, on any machine.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.linalg
from problems import generator, morton_sites
from standin import StandIn
from threadpoolctl import threadpool_limits

import tlrcore as tlr
from geostat.solvers import DenseCholesky, TLRFactor
from tlrcore.backends import NUMPY

N, TILE, RANGE, NUGGET = 900, 128, 0.1, 1e-2
ACCURACIES = [1e-6, 1e-9]
EPS = np.finfo(np.float64).eps


SITES = morton_sites(N, seed=7)
_BLOCKS = generator(SITES, range_=RANGE, nugget=NUGGET)


def block(rows, cols):
    """``A[rows][:, cols]`` of the exponential covariance with a nugget (a module function:
    it pickles, as worker processes need)."""
    return _BLOCKS(rows, cols)


class Problem:
    """The matrix at one accuracy, as the factories see it."""

    block, n, tile = staticmethod(block), N, TILE

    def __init__(self, accuracy):
        self.accuracy = accuracy
        self.dense = reference().dense

    @functools.cached_property
    def tlr_matrix(self):
        """The TLR compression (ACA, tile layout) shared by the tile-by-tile factors."""
        return tlr.TLRMatrix.from_generator(block, N, TILE, accuracy=self.accuracy)


def tlr_factor_in_caller_order(p):
    """geostat's TLR factor of ``A`` through a site permutation: ``A[perm][:, perm]`` (here
    the reversed order) compressed and factored, ``A = P^T L L^T P`` answered in ``A``'s
    order."""
    perm = np.arange(N)[::-1].copy()
    permuted = tlr.TLRMatrix.from_generator(
        lambda rows, cols: block(perm[rows], perm[cols]), N, TILE, accuracy=p.accuracy
    )
    return TLRFactor(tlr.cholesky(permuted), perm)


#: ``(id, factory)``: every factor that goes through the contract.
FACTORS = [
    ("left-looking", lambda p: tlr.cholesky(p.tlr_matrix)),
    ("right-looking", lambda p: tlr.cholesky(p.tlr_matrix, variant="right")),
    ("tile-pivoted", lambda p: tlr.cholesky(p.tlr_matrix, safeguard="pivot")),
    (
        "batched-packed",
        lambda p: tlr.cholesky(
            tlr.TLRMatrix.from_generator(
                p.block, p.n, p.tile, accuracy=p.accuracy, method="batched", backend="numpy"
            )
        ),
    ),
    ("ldl-bunch-kaufman", lambda p: tlr.ldl(p.tlr_matrix)),
    (
        "dense-batched-cholesky",
        lambda p: DenseCholesky.from_factor(tlr.batched.cholesky([p.dense])[0]),
    ),
    ("geostat-dense-lapack", lambda p: DenseCholesky(p.dense.copy(), NUMPY, overwrite=True)),
    ("geostat-dense-standin", lambda p: DenseCholesky(p.dense.copy(), StandIn())),
    ("geostat-tlr-permuted", tlr_factor_in_caller_order),
]


class Reference:
    """The dense matrix, its spectrum, log-determinant and solves (computed once)."""

    def __init__(self):
        idx = np.arange(N)
        rng = np.random.default_rng(20261121)
        self.dense = block(idx, idx)
        self.lam = np.linalg.eigvalsh(self.dense)
        sign, self.logdet = np.linalg.slogdet(self.dense)
        assert sign > 0 and self.lam[0] >= NUGGET * (1 - 1e-12)
        self.b, self.B = rng.normal(size=N), rng.normal(size=(N, 3))
        self.x = scipy.linalg.solve(self.dense, self.b, assume_a="pos")
        self.X = scipy.linalg.solve(self.dense, self.B, assume_a="pos")
        self.norm = float(np.linalg.norm(self.dense))
        self.cond = float(self.lam[-1] / self.lam[0])

    def eta(self, accuracy):
        """Bound on ``||E||_F``, ``E = L L^T - A`` (see the module docstring)."""
        return 2.0 * accuracy * self.norm

    def delta(self, accuracy):
        """Bound on ``||A^{-1/2} E A^{-1/2}||_2``."""
        delta = self.eta(accuracy) / self.lam[0]
        assert delta < 0.5, "the accuracy is too coarse for these bounds"
        return delta

    def rounding(self, cond=None):
        """Rounding of an identity through an operator of condition number `cond`."""
        return 10.0 * N * EPS * (self.cond if cond is None else cond)


@functools.cache
def reference():
    return Reference()


@pytest.fixture(autouse=True, scope="module")
def one_blas_thread():
    """Dense references and products on one BLAS thread (the factorizations pin it
    themselves): at these orders BLAS threads only contend for the cores of a shared
    machine."""
    with threadpool_limits(1, "blas"):
        yield


@pytest.fixture(scope="module", params=ACCURACIES, ids=lambda a: f"acc{a:.0e}")
def problem(request):
    return Problem(request.param)


@pytest.fixture(
    scope="module", params=[factory for _, factory in FACTORS], ids=[name for name, _ in FACTORS]
)
def factor(request, problem):
    return request.param(problem)


@pytest.fixture(scope="module")
def lower(factor):
    """``G = multiply_lower(I) = P^T L`` of a Cholesky-type factor (None for an LDLᵀ)."""
    return None if is_ldl(factor) else host(factor, factor.multiply_lower(np.eye(N)))


def host(F, x):
    return F.backend.to_host(x)


def is_ldl(F):
    return isinstance(F.to_dense(), tuple)


def test_logdet_matches_slogdet(factor, problem):
    ref = reference()
    delta = ref.delta(problem.accuracy)
    bound = np.sqrt(N) * delta / (1 - delta) + ref.rounding() * abs(ref.logdet) / N
    assert abs(factor.logdet() - ref.logdet) <= bound


@pytest.mark.parametrize("shape", ["vector", "matrix"])
def test_solve_matches_scipy(factor, problem, shape):
    ref = reference()
    rhs, exact = (ref.b, ref.x) if shape == "vector" else (ref.B, ref.X)
    x = host(factor, factor.solve(rhs))
    assert isinstance(x, np.ndarray) and x.shape == rhs.shape
    delta = ref.delta(problem.accuracy)
    error = np.linalg.norm((x - exact).reshape(N, -1), axis=0)
    assert np.all(
        error
        <= (delta / (1 - delta) + ref.rounding()) * np.linalg.norm(exact.reshape(N, -1), axis=0)
    )


def test_triangular_solves_and_multiply_lower(factor, problem, lower):
    if is_ldl(factor):
        pytest.skip("an LDLᵀ factor has no triangular factor of A")
    ref = reference()
    delta = ref.delta(problem.accuracy)
    cond_l = np.sqrt(ref.cond * (1 + delta) / (1 - delta))
    # G = P^T L: G G^T is the matrix the factor represents, A + E.
    assert (
        np.linalg.norm(lower @ lower.T - ref.dense)
        <= ref.eta(problem.accuracy) + ref.rounding(1.0) * ref.norm
    )
    # a product undone by the solve; G^T = L^T P undoes solve_upper
    Z = np.random.default_rng(1).normal(size=(N, 2))
    back = host(factor, factor.solve_lower(factor.multiply_lower(Z)))
    assert np.linalg.norm(back - Z) <= ref.rounding(cond_l) * np.linalg.norm(Z)
    up = host(factor, factor.solve_upper(Z))
    assert up.shape == Z.shape
    assert np.linalg.norm(lower.T @ up - Z) <= ref.rounding(cond_l) * np.linalg.norm(Z)
    x = host(factor, factor.solve_upper(factor.solve_lower(ref.B)))
    assert np.linalg.norm(x - host(factor, factor.solve(ref.B))) <= ref.rounding() * np.linalg.norm(
        x
    )
    # ||L^{-1} P b||^2 = b^T (A + E)^{-1} b
    y = host(factor, factor.solve_lower(ref.b))
    assert y.shape == (N,)
    Y = host(factor, factor.solve_lower(ref.B))
    forms, exact = np.sum(Y * Y, axis=0), np.sum(ref.B * ref.X, axis=0)
    assert np.all(np.abs(forms - exact) <= (delta / (1 - delta) + ref.rounding()) * exact)
    assert abs(y @ y - ref.b @ ref.x) <= (delta / (1 - delta) + ref.rounding()) * (ref.b @ ref.x)


def test_to_dense_is_the_matrix_the_factor_represents(factor, problem, lower):
    ref = reference()
    if is_ldl(factor):
        L, D = factor.to_dense()
        represented = L @ D @ L.T
    else:
        L = factor.to_dense()
        assert isinstance(L, np.ndarray) and L.shape == (N, N)
        assert not np.triu(L, 1).any()
        perm = getattr(factor, "perm", None)
        perm = np.arange(N) if perm is None else np.asarray(perm)
        represented = np.empty((N, N))
        represented[np.ix_(perm, perm)] = L @ L.T
        # the same L as multiply_lower's, up to the order of the sums
        assert np.linalg.norm(lower[perm] - L) <= ref.rounding(1.0) * np.linalg.norm(L)
    assert (
        np.linalg.norm(represented - ref.dense)
        <= ref.eta(problem.accuracy) + ref.rounding(1.0) * ref.norm
    )
    # logdet and solve are those of the represented matrix A + E, to rounding
    sign, logdet = np.linalg.slogdet(represented)
    exact = scipy.linalg.solve(represented, ref.B)
    assert sign > 0 and abs(factor.logdet() - logdet) <= np.sqrt(N) * ref.rounding()
    x = host(factor, factor.solve(ref.B))
    assert np.all(
        np.linalg.norm(x - exact, axis=0) <= ref.rounding() * np.linalg.norm(exact, axis=0)
    )


def test_ranks_and_nbytes(factor):
    ranks = np.asarray(factor.ranks)
    n_tiles = ranks.shape[0]
    assert ranks.shape == (n_tiles, n_tiles) and ranks.dtype.kind in "iu"
    sizes = np.diag(ranks)
    assert sizes.sum() == N and sizes.min() >= 1
    assert not np.triu(ranks, 1).any()
    lower = np.tril(ranks, -1)
    assert np.all(lower >= 0) and np.all(lower <= np.minimum.outer(sizes, sizes))
    if n_tiles > 1:
        assert sorted(sizes) == sorted([TILE] * (N // TILE) + [N % TILE])
        assert (
            0 < lower.sum() < np.tril(np.minimum.outer(sizes, sizes), -1).sum()
        )  # low rank, not zero
    # the dense diagonal tiles and the U, V factors of the low-rank ones in float64, at most
    # three times (padding of the packed layout, the D blocks of an LDLᵀ); at least their
    # triangles and the factors in single precision
    low_rank = int(np.sum(lower * np.add.outer(sizes, sizes)))
    whole = 8 * (int(np.sum(sizes**2)) + low_rank)
    least = 8 * int(np.sum(sizes * (sizes + 1) // 2)) + 4 * low_rank
    assert least <= factor.nbytes <= 3 * whole


def test_every_factor_is_an_instance_of_the_protocol(factor):
    assert isinstance(factor, tlr.Factor)
    assert isinstance(factor, tlr.CholeskyFactor) != is_ldl(factor)


def test_shape_backend_and_no_perturbation(factor):
    assert factor.n == N
    assert factor.backend is not None
    assert isinstance(factor.backend.to_host(factor.solve(reference().b)), np.ndarray)
    assert factor.perturbation == 0.0 and factor.shift == 0.0
