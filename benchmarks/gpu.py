"""GPU back end: the same code on ``--backend numpy`` and ``--backend cupy``,
side by side with CPU baselines.

Part 1 (batched kernels). Batched Cholesky throughput, GFLOP/s counting ``m^3 / 3``
flops per matrix (padding not counted), for ``--count`` matrices (default 10,000):

* ``variable``: orders uniform in [16, 512] (seeded), a list;
* ``fixed 256``: all of order 256, one ``(count, 256, 256)`` array;
* ``fixed <mean>``: all of the variable batch's mean order, one array.

Every matrix is ``(G + G^T) / 2 + m I`` with ``G`` uniform in [-1, 1]. Methods: the
baseline, a Python loop of ``scipy.linalg.cholesky`` on the CPU (BLAS on one thread,
faster than threaded BLAS on such small matrices), then ``tlr.batched.cholesky`` with
each strategy on each ``--backend`` (inputs already on the device; the timed region,
between ``backend.synchronize()`` calls, includes stacking and padding); on NumPy also
``auto`` with one host thread (``TLRCORE_NUM_THREADS=1``), to show what the thread pool
across stacks gives. Each method runs once on a small sub-batch to warm up, then
``--repeats`` times, the methods taking turns (each round starting one method later);
the table gives medians, GFLOP/s, the ratio of the baseline's time to the method's
(above 1: faster) and the fastest and slowest run relative to the median. No method
checks for non-finite values (``check_finite=False``). Runs that allocate a large array
(a fixed batch's factors) can vary widely from run to run (first touches of fresh
memory), so read the spread with the medians.

Then batched GEMM for tile low-rank shapes: ``--gemm-count`` products ``(b x r_i)(r_i x
s)`` with ranks ``r_i`` uniform in [5, 100], for ``b`` in {512, 2048} and ``s`` in {16,
64} (``2 b r_i s`` flops each): a Python loop of ``A @ B`` (baseline) against
``tlr.batched.gemm`` with each strategy.

Part 2 (TLR log-likelihood). One Gaussian log-likelihood of a 2-D exponential covariance
(range 0.1, nugget 1e-2, uniform sites, constant trend) through ``TLRLikelihood`` on each
``--backend`` (on a GPU: tiles generated on the device from ``geostat.covariance.Sites``
in the packed layout, factored by the packed TLR Cholesky, ``variant="packed"``), at
``--sizes`` (default 65K to 1M) and ``--accuracies`` (1e-6, 1e-8), the median of
``--repeats`` after one warm-up at n = 4,096; side by side with the baseline, the dense
log-likelihood on the same device (covariance built there, one Cholesky, ``potrf`` on a
GPU) up to ``--dense-max``, with the difference of the two values, the mean rank of the
factor and its memory; then the build and the factorization timed apart (a second build
and factorization, which ``--no-phases`` skips), and the rate of the factorization's
low-rank products (``PackedCholesky.gemm_flops``, counted from shapes with padding, over
the factorization time: a lower bound of the GEMM-phase rate); ``--profile FOLDER`` runs
that second build and factorization under cProfile. On ``--backend numpy`` this is the
CPU algorithm (ACA tiles, thread-pooled left-looking Cholesky), the baseline for the
GPU's packed one. Observations are white noise, which magnifies the TLR error of the
quadratic term (see benchmarks/loglik.py). Part 2 on a GPU: ``--parts 2 --backend cupy
--repeats 3``; on a CPU e.g. ``--parts 2 --backend numpy --sizes 8192 16384 --dense-max
16384 --repeats 1``.

The batch is made smaller, with a note, when it would not fit in 70% of the free memory.

Run: ``python benchmarks/gpu.py --parts 1`` (``--count 1000 --repeats 3`` for a quick
run); on a GPU machine with CuPy, ``--backend numpy cupy`` or ``--backend cupy``.
``benchmarks/gpu_checks.sh`` runs the GPU checks.

Output: tables on standard output. With ``--profile FOLDER``, the cProfile statistics of
each part 2 case are also written to ``FOLDER/<backend>-<n>-<accuracy>.prof`` (read them
with ``python -m pstats``) and their top 25 functions printed. Measured results, profiles
included: ``docs/performance.md``, section "GPU".
"""

from __future__ import annotations

import argparse
import cProfile
import math
import os
import pstats
import resource
import statistics
import time
from unittest import mock

import numpy as np
import scipy.linalg
from threadpoolctl import threadpool_limits

import tlrcore as tlr
from tlrcore.backends import cupy_available, get_backend
from tlrcore.batched import plan
from tlrcore.concurrency.threads import workers as library_threads

STRATEGIES = ("auto", "group", "pad")
ORDERS = (16, 512)
FIXED_ORDER = 256
RANKS = (5, 100)
GEMM_SHAPES = [(512, 16), (512, 64), (2048, 16), (2048, 64)]
WARMUP = 20


def spd_batch(orders, seed):
    """Host matrices ``(G + G^T) / 2 + m I`` of the given orders: a list."""
    rng = np.random.default_rng(seed)
    mats = []
    for m in orders:
        G = rng.uniform(-1.0, 1.0, (m, m))
        A = G + G.T
        A *= 0.5
        A[np.diag_indices(m)] += m
        mats.append(A)
    return mats


def spd_stack(count, m, seed):
    """``count`` such matrices of order `m` as one array, built in chunks."""
    out = np.empty((count, m, m))
    for start in range(0, count, 256):
        stop = min(count, start + 256)
        out[start:stop] = spd_batch([m] * (stop - start), seed + start)
    return out


def fit_count(count, bytes_per_matrix, backends):
    """`count`, lowered (with a note) so that ``count * bytes_per_matrix`` stays within 70%
    of the free memory of the host and of every back end."""
    free = min(get_backend(b).free_memory() for b in {"numpy", *backends})
    fits = int(0.7 * free // bytes_per_matrix)
    if fits < count:
        print(
            f"note: --count {count} needs about {count * bytes_per_matrix / 2**30:.1f} GiB but "
            f"{free / 2**30:.1f} GiB is free; measuring {fits} matrices instead."
        )
        return max(fits, 1)
    return count


def timed(backend, func):
    """Seconds `func` takes, synchronized with `backend` on both ends."""
    backend.synchronize()
    start = time.perf_counter()
    out = func()
    backend.synchronize()
    seconds = time.perf_counter() - start
    del out
    return seconds


def take_turns(methods, repeats, run):
    """Seconds of ``run(backend, call)`` for each method, `repeats` times; the methods
    take turns, starting one later each round, so that machine load and the allocator's
    state fall on all of them alike."""
    names = list(methods)
    times = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            backend, call = methods[name]
            times[name].append(
                timed(backend, lambda backend=backend, call=call: run(backend, call))
            )
    return times


def spread(seconds):
    """The fastest and slowest run, relative to the median."""
    median = statistics.median(seconds)
    return f"{min(seconds) / median:.2f}-{max(seconds) / median:.2f}"


def cholesky_methods(backends):
    """``name -> (backend, call(batch))`` for part 1's Cholesky table."""
    host = get_backend("numpy")

    def scipy_loop(mats):
        with threadpool_limits(1, "blas"):
            return [scipy.linalg.cholesky(A, lower=True, check_finite=False) for A in mats]

    def one_thread(mats):
        with mock.patch.dict(os.environ, {"TLRCORE_NUM_THREADS": "1"}):
            return tlr.batched.cholesky(mats, strategy="auto", check_finite=False)

    methods = {"scipy loop (CPU)": (host, scipy_loop)}
    for name in backends:
        backend = get_backend(name)
        for strategy in STRATEGIES:
            methods[f"{name} {strategy}"] = (
                backend,
                lambda mats, s=strategy: tlr.batched.cholesky(mats, strategy=s, check_finite=False),
            )
        if name == "numpy":
            methods["numpy auto, 1 thread"] = (backend, one_thread)
    return methods


def on_backend(backend, batch):
    """`batch` (list or array) on `backend`."""
    return (
        backend.asarray(batch)
        if isinstance(batch, np.ndarray)
        else [backend.asarray(a) for a in batch]
    )


def run_case(label, batch, orders, methods, repeats):
    """Time every method on `batch`; print one table row per method."""
    flops = float(np.sum(np.asarray(orders, dtype=float) ** 3) / 3.0)
    inputs = {backend.name: on_backend(backend, batch) for backend, _ in methods.values()}
    for backend, call in methods.values():
        call(inputs[backend.name][:WARMUP])
    times = take_turns(methods, repeats, lambda backend, call: call(inputs[backend.name]))
    base = statistics.median(times["scipy loop (CPU)"])
    for name, seconds in times.items():
        t = statistics.median(seconds)
        print(
            f"{label:<14} {name:<24} {t:10.3f} {flops / t / 1e9:9.1f} {base / t:9.2f}   "
            f"{spread(seconds)}"
        )


def part_batched(args):
    """Part 1: batched Cholesky (and GEMM) throughput against CPU loops."""
    rng = np.random.default_rng(args.seed)
    mean_bytes = 8.0 * (ORDERS[0] ** 2 + ORDERS[0] * ORDERS[1] + ORDERS[1] ** 2) / 3.0
    count = fit_count(args.count, 3.0 * mean_bytes, args.backend)
    orders = rng.integers(ORDERS[0], ORDERS[1] + 1, count)
    mean_order = int(round(orders.mean()))
    padded = plan.pad_up(orders)
    print(
        f"Part 1: batched Cholesky, {count} matrices, back ends {', '.join(args.backend)}, "
        f"{library_threads()} host threads, median of {args.repeats}"
    )
    print(
        f"variable orders: {len(np.unique(orders))} distinct (calls of 'group'), "
        f"{len(np.unique(padded))} padded (calls of 'pad'), "
        f"padded flops x{np.sum(padded**3.0) / np.sum(orders**3.0):.2f}"
    )
    print(f"{'batch':<14} {'method':<24} {'median s':>10} {'GFLOP/s':>9} {'vs scipy':>9}   min-max")
    methods = cholesky_methods(args.backend)
    run_case("variable", spd_batch(orders, args.seed), orders, methods, args.repeats)
    for m in (FIXED_ORDER, mean_order):
        run_case(f"fixed {m}", spd_stack(count, m, args.seed), [m] * count, methods, args.repeats)
    print(f"peak host memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.1f} GiB")
    part_gemm(args)


def part_gemm(args):
    """Part 1, second table: products of tile low-rank shapes with a rank per item."""
    print(
        f"\nBatched GEMM: {args.gemm_count} products (b x r)(r x s), r uniform in {list(RANKS)}, "
        f"median of {args.repeats}"
    )
    print(
        f"{'b':>5} {'s':>3} {'method':<24} {'median ms':>10} {'GFLOP/s':>9} {'vs loop':>9}"
        "   min-max"
    )
    host = get_backend("numpy")
    for b, s in GEMM_SHAPES:
        rng = np.random.default_rng(args.seed + b + s)
        ranks = rng.integers(RANKS[0], RANKS[1] + 1, args.gemm_count)
        As = [rng.standard_normal((b, r)) for r in ranks]
        Bs = [rng.standard_normal((r, s)) for r in ranks]
        flops = 2.0 * b * s * float(ranks.sum())

        def loop(As, Bs):
            with threadpool_limits(1, "blas"):
                return [A @ B for A, B in zip(As, Bs, strict=True)]

        methods = {"loop A @ B (CPU)": (host, loop)}
        for name in args.backend:
            backend = get_backend(name)
            for strategy in STRATEGIES:
                methods[f"{name} {strategy}"] = (
                    backend,
                    lambda A, B, st=strategy: tlr.batched.gemm(
                        A, B, strategy=st, check_finite=False
                    ),
                )
        inputs = {
            backend.name: (on_backend(backend, As), on_backend(backend, Bs))
            for backend, _ in methods.values()
        }
        for backend, call in methods.values():
            call(*inputs[backend.name])
        times = take_turns(
            methods,
            args.repeats,
            lambda backend, call, inputs=inputs: call(*inputs[backend.name]),
        )
        base = statistics.median(times["loop A @ B (CPU)"])
        for name, seconds in times.items():
            t = statistics.median(seconds)
            rate = flops / t / 1e9
            print(
                f"{b:>5} {s:>3} {name:<24} {t * 1e3:10.2f} {rate:9.1f} {base / t:9.2f}   "
                f"{spread(seconds)}"
            )


#: Nugget of the part 2 covariance (variance 1, range 0.1).
NUGGET = 1e-2
TLR_SIZES = [65536, 131072, 262144, 524288, 1048576]


def part_tlr(args):
    """Part 2: one TLR log-likelihood per back end against dense Cholesky on the same device."""
    from geostat.distance import get_distance
    from geostat.kernels import get_kernel

    kernel, distance = get_kernel("exponential"), get_distance("euclidean")
    params = {"variance": 1.0, "range": 0.1, "nugget": NUGGET, "smoothness": 0.5}
    for name in args.backend:
        backend = get_backend(name)
        print(
            f"\nPart 2: 2-D exponential log-likelihood (range 0.1, nugget {NUGGET}, "
            f"constant trend), backend {backend.name}, median of {args.repeats}"
        )
        print(
            f"{'n':>9} {'accuracy':>9} {'tile':>5} {'TLR s':>8} {'dense s':>8} {'dense/TLR':>9} "
            f"{'|dl|':>9} {'mean rank':>9} {'L GiB':>6} {'build s':>8} {'factor s':>8} "
            f"{'GFLOP/s':>8}"
        )
        _tlr_loglik(
            backend, 4096, 1e-6, 512, kernel, distance, params
        )  # warm-up: kernels compiled, pool filled
        for n in args.sizes:
            rng = np.random.default_rng(n)
            X = rng.uniform(size=(n, 2))
            y = rng.normal(size=(n, 1))
            tile = args.tile or (1024 if n <= 131072 else 2048)
            dense_time, dense_value = _dense_loglik(
                backend, X, y, kernel, distance, params, args.dense_max
            )
            for accuracy in args.accuracies:
                times = []
                for _ in range(args.repeats):
                    factor = None  # one factor held at a time (the GPU's memory)
                    seconds, value, factor = _tlr_loglik(
                        backend, n, accuracy, tile, kernel, distance, params, X, y
                    )
                    times.append(seconds)
                tlr_time = statistics.median(times)
                ranks = factor.ranks[np.tril_indices(factor.n_tiles, -1)]
                held = getattr(factor, "allocated_bytes", 0) or factor.nbytes  # pool slack included
                del factor
                build, factoring, flops = (
                    _profiled(
                        args.profile,
                        f"{backend.name}-{n}-{accuracy:.0e}",
                        _phases,
                        backend,
                        X,
                        accuracy,
                        tile,
                        kernel,
                        distance,
                        params,
                    )
                    if args.phases
                    else (math.nan, math.nan, 0.0)
                )
                ratio = f"{dense_time / tlr_time:9.2f}" if dense_time else f"{'-':>9}"
                error = (
                    f"{abs(value - dense_value):9.1e}" if dense_value is not None else f"{'-':>9}"
                )
                shown = f"{dense_time:8.2f}" if dense_time else f"{'-':>8}"
                rate = f"{flops / factoring / 1e9:8.1f}" if flops else f"{'-':>8}"
                print(
                    f"{n:>9} {accuracy:>9.0e} {tile:>5} {tlr_time:8.2f} {shown} {ratio} {error} "
                    f"{ranks.mean():9.1f} {held / 2**30:6.2f} {build:8.2f} {factoring:8.2f} {rate}",
                    flush=True,
                )
                if len(times) > 1:  # a first run that stands out pays one-time costs
                    print(f"{'':>9} each run: {', '.join(f'{t:.2f}' for t in times)} s")


def _phases(backend, X, accuracy, tile, kernel, distance, params):
    """``(build s, factor s, GEMM flops)`` of the TLR covariance of `X`, as the likelihood
    makes it (KD-tree order, tiles from ``Sites``), timed apart; the flops are the
    packed factorization's counted low-rank products (0 on the CPU algorithm)."""
    from geostat.covariance import Sites
    from geostat.solvers import site_order, tlr_matrix

    perm, tile = site_order(X, distance, kernel, "kdtree", tile)
    block = Sites(X[perm], distance, backend).covariance_block(kernel, params)
    backend.synchronize()
    start = time.perf_counter()
    A = tlr_matrix(block, X.shape[0], tile, accuracy, backend=backend)
    backend.synchronize()
    built = time.perf_counter()
    factor = tlr.cholesky(A, overwrite_a=True)
    backend.synchronize()
    return built - start, time.perf_counter() - built, getattr(factor, "gemm_flops", 0.0)


def _profiled(folder, name, func, *args):
    """``func(*args)``, under cProfile when `folder` is set: the statistics are written to
    ``folder/name.prof`` (``python -m pstats``) and the 25 functions of most own time
    printed. On a GPU the host's waits for the device land in the calls that synchronize."""
    if folder is None:
        return func(*args)
    profile = cProfile.Profile()
    result = profile.runcall(func, *args)
    os.makedirs(folder, exist_ok=True)
    profile.dump_stats(os.path.join(folder, f"{name}.prof"))
    pstats.Stats(profile).sort_stats("tottime").print_stats(25)
    return result


def _tlr_loglik(backend, n, accuracy, tile, kernel, distance, params, X=None, y=None):
    """``(seconds, value, factor)`` of one TLR log-likelihood (build, factor, solves)."""
    from geostat.likelihood import TLRLikelihood

    if X is None:
        X = np.random.default_rng(0).uniform(size=(n, 2))
        y = np.ones((n, 1))
    likelihood = TLRLikelihood(
        X, y, np.ones((n, 1)), kernel, distance, accuracy=accuracy, tile_size=tile, backend=backend
    )
    backend.synchronize()
    start = time.perf_counter()
    value = likelihood.log_likelihood(params)
    backend.synchronize()
    seconds = time.perf_counter() - start
    factor = likelihood.factors({"range": params["range"], "smoothness": 0.5}, params["nugget"])[
        0
    ].factor
    likelihood.release_factors()
    return seconds, value, factor


def _dense_loglik(backend, X, y, kernel, distance, params, dense_max):
    """``(seconds, value)`` of the dense log-likelihood on the back end's device: the
    covariance built there (geostat.covariance), Cholesky, one solve and the GLS constant;
    ``(None, None)`` above `dense_max`."""
    from geostat.covariance import Sites

    n = X.shape[0]
    if n > dense_max:
        return None, None
    xp = backend.xp
    block = Sites(X, distance, backend).covariance_block(kernel, params)
    everything = np.arange(n)
    backend.synchronize()
    start = time.perf_counter()
    L, info = backend.cholesky(block(everything, everything))
    if int(info):
        raise np.linalg.LinAlgError(f"dense Cholesky failed at minor {int(info)}")
    z = backend.solve_triangular(
        L, xp.concatenate([backend.asarray(y), xp.ones((n, 1))], axis=1), lower=True
    )
    logdet = 2.0 * float(xp.sum(xp.log(xp.diagonal(L))))
    zy, zf = z[:, :1], z[:, 1:]
    beta = float((zf.T @ zy)[0, 0]) / float((zf.T @ zf)[0, 0])
    r = zy - beta * zf
    value = -0.5 * (float((r.T @ r)[0, 0]) + logdet + n * math.log(2 * math.pi))
    backend.synchronize()
    return time.perf_counter() - start, value


PARTS = {1: part_batched, 2: part_tlr}


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--parts", type=int, nargs="+", default=sorted(PARTS), choices=sorted(PARTS)
    )
    parser.add_argument(
        "--backend",
        nargs="+",
        choices=["numpy", "cupy"],
        default=["numpy", "cupy"] if cupy_available() else ["numpy"],
    )
    parser.add_argument("--count", type=int, default=10_000, help="matrices per Cholesky batch")
    parser.add_argument("--gemm-count", type=int, default=256, help="products per GEMM batch")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=TLR_SIZES, help="part 2: numbers of sites"
    )
    parser.add_argument("--accuracies", type=float, nargs="+", default=[1e-6, 1e-8], help="part 2")
    parser.add_argument(
        "--phases",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="part 2: also time the build and the factorization apart (a second "
        "build and factorization per case)",
    )
    parser.add_argument(
        "--profile",
        metavar="FOLDER",
        default=None,
        help="part 2: run the timed-apart build and factorization under cProfile, the "
        "statistics written to FOLDER (the phase times then include its overhead)",
    )
    parser.add_argument(
        "--tile", type=int, default=None, help="part 2: tile size (default 1024 to 131K, then 2048)"
    )
    parser.add_argument(
        "--dense-max",
        type=int,
        default=32768,
        help="part 2: largest n of the dense baseline (about 24 n^2 bytes on the device: "
        "the distances, the covariance and its factor; 65,536 ran out of an H100's 80 GB)",
    )
    args = parser.parse_args(argv)
    for backend in args.backend:
        try:
            get_backend(backend)
        except ValueError as exc:  # CuPy or a GPU is missing: the message names the fix
            parser.error(str(exc))
    for part in args.parts:
        PARTS[part](args)


if __name__ == "__main__":
    main()
