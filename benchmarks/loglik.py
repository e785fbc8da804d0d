"""One Gaussian log-likelihood through a TLR Cholesky factor versus dense SciPy, side by side.

For each kernel, n and accuracy: TLR build (ordering + compression), factorization and
solve times, peak resident memory, mean ranks of A and L, and |loglik_tlr - loglik_dense|
where the dense covariance fits; the dense baseline (build + one-thread LAPACK Cholesky,
see geostat.solvers) runs in the same invocation. Every configuration runs in a fresh
subprocess so that its peak memory is its own; with ``--repeats r`` each runs `r` times
and the table shows the medians.

Two ratios need no second machine: ``x dense n^3`` is the one-thread dense SciPy
Cholesky at ``--dense-ref`` sites (16,384), measured in the same invocation and
extrapolated by ``(n / n_ref)^3``, over the TLR total; and the closing lines give each
TLR total over that of the next smaller n (e.g. 262,144 over 131,072).

Run: ``python benchmarks/loglik.py`` (2-D exponential and Matern 1.5, range 0.1, n up to
131,072; 3-D exponential, range 0.2, up to 65,536; accuracies 1e-6 and 1e-8; dense up to
32,768) or e.g. ``python benchmarks/loglik.py --n 32768 --accuracy 1e-8 --kernels
exp2d``; at the largest sizes: ``python benchmarks/loglik.py --n 131072 262144 --accuracy
1e-8 --kernels exp2d --dense-max 0 --repeats 3 --repeats-max 131072`` (262,144 once).

Output: a table on standard output, one row per kernel, n, accuracy and build, then the
ratios and a legend. ``--build deferred eager`` runs each TLR configuration with both
builds in turn (the default, ``deferred``, compresses each tile column as the
factorization reads it, as the likelihood does). With ``--json FILE`` the results are
also written to ``FILE`` as a JSON list of records: ``{"kernel", "n", "accuracy",
"build", "repeats", "tlr", "dense"}`` per configuration (``tlr`` and ``dense`` the
medians of every number of the runs, or ``{"error": ...}``; ``dense`` null above
``--dense-max``) and ``{"kernel", "n", "dense_reference"}`` for the dense Cholesky at
``--dense-ref``. The observations drawn from the model are cached in the temporary
directory (``geostat-loglik-{kernel}-{n}.npy``) and reused by later runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from geostat.data.atomic import atomic_write_text

KERNELS = {
    "exp2d": ("exponential", None, 2, 0.1),
    "matern15_2d": ("matern", 1.5, 2, 0.1),
    "exp3d": ("exponential", None, 3, 0.2),
}
#: Largest n per kernel (3-D stops at 64K).
MAX_N = {"exp3d": 65536}
NUGGET = 1e-2


#: Accuracy of the TLR simulation that draws the observations from the model.
SAMPLE_ACCURACY = 1e-10


def problem(kernel_key, n, data="model"):
    """Sites, observations, kernel and parameters of one configuration.

    ``data="model"`` draws the observations from the model itself (through a TLR factor
    at :data:`SAMPLE_ACCURACY`, cached in a temporary file so that every process sees
    the same vector); ``"white"`` uses standard normal noise, whose quadratic form
    ``y^T C^{-1} y`` is 15-50x larger than any draw of the model and so magnifies the
    compression error of the quadratic term.
    """
    from geostat.kernels import get_kernel

    name, smoothness, dim, range_ = KERNELS[kernel_key]
    kernel = get_kernel(name, smoothness)
    rng = np.random.default_rng(n)
    X = rng.uniform(size=(n, dim))
    params = {"variance": 1.0, "range": range_, "nugget": NUGGET, **kernel.fixed_shape}
    if data == "white":
        return X, rng.normal(size=n), kernel, params
    path = Path(tempfile.gettempdir()) / f"geostat-loglik-{kernel_key}-{n}.npy"
    if not path.exists():
        import geostat as gs

        y = gs.simulate(
            X, params, kernel=kernel, random_state=n, method="tlr", accuracy=SAMPLE_ACCURACY
        )
        np.save(path, y)
    return X, np.load(path), kernel, params


class AnonymousPeak:
    """Peak of the process's resident memory that the system cannot reclaim without swap:
    anonymous and shared memory (``RssAnon + RssShmem`` of ``/proc/self/status``, the latter
    the memory files through which worker processes return tiles), sampled every
    :attr:`interval` seconds on a thread (NaN off Linux), in GiB. Unlike the resident set,
    it leaves out file pages mapped in (a factor's rows moved to files,
    :mod:`tlrcore.concurrency.spill`), which the system can drop and read again."""

    interval = 0.02

    def __enter__(self):
        self.peak, self._done = float("nan"), threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()

    def _sample(self):
        while True:
            try:
                with open("/proc/self/status") as status:
                    fields = dict(line.split(":", 1) for line in status if ":" in line)
                kib = float(fields["RssAnon"].split()[0]) + float(fields["RssShmem"].split()[0])
            except (OSError, KeyError, ValueError):
                return
            self.peak = kib / 2**20 if self.peak != self.peak else max(self.peak, kib / 2**20)
            if self._done.wait(self.interval):
                return


def loglik_from(factor, y):
    """Log-likelihood of zero-mean `y` from a factor with ``solve`` and ``logdet`` (TLR or
    dense)."""
    alpha = factor.solve(y)
    return -0.5 * (float(y @ alpha) + factor.logdet() + y.size * np.log(2 * np.pi))


def run_tlr(kernel_key, n, accuracy, tile_size=None, data="model", build="deferred"):

    X, y, kernel, params = problem(kernel_key, n, data)
    with AnonymousPeak() as anonymous:
        result = _timed_tlr(X, y, kernel, params, accuracy, tile_size, build == "deferred")
    return {**result, "peak_anon_gib": anonymous.peak}


def _timed_tlr(X, y, kernel, params, accuracy, tile_size, deferred):
    import tlrcore as tlr
    from geostat.distance import get_distance
    from geostat.solvers import tlr_covariance

    start = time.perf_counter()
    A, perm = tlr_covariance(
        X,
        kernel,
        params,
        get_distance("euclidean"),
        accuracy=accuracy,
        tile_size=tile_size,
        deferred=deferred,
    )
    built = time.perf_counter()
    peak_build = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    # a deferred matrix holds its diagonal tiles alone until factored; its ranks unknown
    tile, a_gib = A.tile_size, A.nbytes / 2**30
    rank_a = {} if deferred else {"rank_A": A.mean_rank}
    a_diagonal_gib = A.diagonal.nbytes / 2**30
    factor = tlr.cholesky(A, overwrite_a=True)  # as the likelihood does: A is a temporary
    factored = time.perf_counter()
    value = loglik_from(factor, y[perm])
    solved = time.perf_counter()
    return {
        "build": built - start,
        "factor": factored - built,
        "solve": solved - factored,
        "loglik": value,
        "tile": tile,
        **rank_a,
        "rank_L": float(np.mean(factor.ranks[np.tril_indices(factor.n_tiles, -1)]))
        if factor.n_tiles > 1
        else 0.0,
        "A_gib": a_gib,
        "L_gib": factor.nbytes / 2**30,
        "A_diagonal_gib": a_diagonal_gib,
        "L_diagonal_gib": factor.diagonal.nbytes / 2**30,
        "peak_build_gib": peak_build,
        "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }


def run_dense(kernel_key, n, data="model"):
    from geostat.distance import get_distance
    from geostat.solvers import DenseCholesky, covariance_block

    X, y, kernel, params = problem(kernel_key, n, data)
    block = covariance_block(X, kernel, params, get_distance("euclidean"))
    start = time.perf_counter()
    C = np.empty((n, n))
    cols = np.arange(n)
    for first in range(0, n, 2048):
        rows = np.arange(first, min(first + 2048, n))
        C[rows] = block(rows, cols)
    built = time.perf_counter()
    factor = DenseCholesky(C, overwrite=True)
    factored = time.perf_counter()
    value = loglik_from(factor, y)
    solved = time.perf_counter()
    return {
        "build": built - start,
        "factor": factored - built,
        "solve": solved - factored,
        "loglik": value,
        "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }


def in_subprocess(kind, *args):
    """Run one configuration in a fresh interpreter. The dense baseline runs with
    ``TLRCORE_NUM_THREADS=1``: the NumPy back end would otherwise factor by blocks on every
    core (:mod:`tlrcore.dense.blocked`), and the reference is one-thread LAPACK."""
    env = {**os.environ, "TLRCORE_NUM_THREADS": "1"} if kind == "dense" else None
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
    )
    if out.returncode != 0:
        return {
            "error": out.stderr.strip().splitlines()[-1] if out.stderr else f"exit {out.returncode}"
        }
    return json.loads(out.stdout.strip().splitlines()[-1])


def repeated(repeats, *args):
    """Median of every number over `repeats` fresh subprocesses (the first error, if any)."""
    runs = [in_subprocess(*args) for _ in range(repeats)]
    failed = [run for run in runs if "error" in run]
    if failed:
        return failed[0]
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def total(result):
    return result["build"] + result["factor"] + result["solve"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[8192, 16384, 32768, 65536, 131072])
    parser.add_argument("--accuracy", type=float, nargs="+", default=[1e-6, 1e-8])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    parser.add_argument("--dense-max", type=int, default=32768)
    parser.add_argument(
        "--dense-ref",
        type=int,
        default=16384,
        help="n of the dense Cholesky extrapolated by n^3 (0: none)",
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="runs per configuration (medians shown)"
    )
    parser.add_argument(
        "--repeats-max", type=int, default=0, help="run larger n only once (0: no limit)"
    )
    parser.add_argument(
        "--tile-size", type=int, default=0, help="0: geostat.ordering.auto_tile_size"
    )
    parser.add_argument(
        "--data",
        default="model",
        choices=["model", "white"],
        help="observations drawn from the model (default) or white noise",
    )
    parser.add_argument(
        "--build",
        nargs="+",
        default=["deferred"],
        choices=["deferred", "eager"],
        help="TLR builds to run, each configuration once per build in turn: deferred (tile "
        "columns compressed as the factorization reads them, as the likelihood does) or eager "
        "(the whole matrix compressed first)",
    )
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, data, kernel_key, n, *rest = args.child
        if kind == "sample":
            problem(kernel_key, int(n), data)
            result = {}
        elif kind == "dense":
            result = run_dense(kernel_key, int(n), data)
        else:
            result = run_tlr(
                kernel_key, int(n), float(rest[0]), int(rest[1]) or None, data, rest[2]
            )
        print(json.dumps(result))
        return

    def repeats(n):
        return 1 if args.repeats_max and n > args.repeats_max else args.repeats

    header = (
        f"{'kernel':<12}{'n':>7}{'acc':>7}{'build':>9}{'tile':>6}{'build s':>8}{'factor s':>9}"
        f"{'solve s':>8}{'total s':>8}{'peak GiB':>9}{'build':>6}{'anon':>6}{'A GiB':>7}{'diag':>6}"
        f"{'L GiB':>7}{'diag':>6}"
        f"{'rank A':>7}{'rank L':>7}{'x dense n^3':>12}"
        f"{'dense s':>9}{'dense GiB':>10}{'speedup':>8}{'|err|':>10}"
    )
    records, lines = [], []
    for kernel_key in args.kernels:
        reference = None
        if args.dense_ref:
            in_subprocess("sample", args.data, kernel_key, args.dense_ref)
            reference = repeated(args.repeats, "dense", args.data, kernel_key, args.dense_ref)
            lines.append(
                f"{kernel_key}: dense SciPy Cholesky (one BLAS thread) at n={args.dense_ref}: "
                f"{reference.get('factor', float('nan')):.2f} s (median of {args.repeats})"
            )
            records.append(
                {"kernel": kernel_key, "n": args.dense_ref, "dense_reference": reference}
            )
        print(header)
        print("-" * len(header))
        for n in args.n:
            if n > MAX_N.get(kernel_key, n):
                continue
            in_subprocess("sample", args.data, kernel_key, n)
            if n == args.dense_ref:
                dense = reference
            else:
                dense = (
                    repeated(repeats(n), "dense", args.data, kernel_key, n)
                    if n <= args.dense_max
                    else None
                )
            for accuracy, build in itertools.product(args.accuracy, args.build):
                tlr_result = repeated(
                    repeats(n), "tlr", args.data, kernel_key, n, accuracy, args.tile_size, build
                )
                records.append(
                    {
                        "kernel": kernel_key,
                        "n": n,
                        "accuracy": accuracy,
                        "build": build,
                        "repeats": repeats(n),
                        "tlr": tlr_result,
                        "dense": dense,
                    }
                )
                if "error" in tlr_result:
                    print(
                        f"{kernel_key:<12}{n:>7}{accuracy:>7.0e}{build:>9}  "
                        f"TLR failed: {tlr_result['error']}",
                        flush=True,
                    )
                    continue
                if reference and "error" not in reference:
                    ratio = reference["factor"] * (n / args.dense_ref) ** 3 / total(tlr_result)
                    extrapolated = f"{ratio:>12.1f}"
                else:
                    extrapolated = f"{'-':>12}"
                if dense and "error" not in dense:
                    speedup = total(dense) / total(tlr_result)
                    dense_cols = f"{total(dense):>9.1f}{dense['peak_gib']:>10.2f}{speedup:>8.1f}"
                    err = f"{abs(tlr_result['loglik'] - dense['loglik']):>10.2e}"
                else:
                    dense_cols, err = f"{'-':>9}{'-':>10}{'-':>8}", f"{'-':>10}"
                print(
                    f"{kernel_key:<12}{n:>7}{accuracy:>7.0e}{build:>9}{int(tlr_result['tile']):>6}"
                    f"{tlr_result['build']:>8.2f}{tlr_result['factor']:>9.2f}"
                    f"{tlr_result['solve']:>8.2f}{total(tlr_result):>8.2f}"
                    f"{tlr_result['peak_gib']:>9.2f}{tlr_result['peak_build_gib']:>6.2f}"
                    f"{tlr_result['peak_anon_gib']:>6.2f}"
                    f"{tlr_result['A_gib']:>7.2f}{tlr_result['A_diagonal_gib']:>6.2f}"
                    f"{tlr_result['L_gib']:>7.2f}{tlr_result['L_diagonal_gib']:>6.2f}"
                    f"{tlr_result.get('rank_A', float('nan')):>7.1f}{tlr_result['rank_L']:>7.1f}"
                    f"{extrapolated}{dense_cols}{err}",
                    flush=True,
                )
    for kernel_key in args.kernels:
        for accuracy, build in itertools.product(args.accuracy, args.build):
            done = [
                (r["n"], total(r["tlr"]))
                for r in records
                if r.get("kernel") == kernel_key
                and r.get("accuracy") == accuracy
                and r.get("build") == build
                and "error" not in r["tlr"]
            ]
            steps = [
                f"{n}/{m}: {t / s:.2f}" for (m, s), (n, t) in zip(done, done[1:], strict=False)
            ]
            if steps:
                lines.append(
                    f"{kernel_key} {accuracy:.0e} {build} TLR total time ratios: "
                    + ", ".join(steps)
                )
    print()
    print("\n".join(lines))
    print(
        f"observations: {args.data}; nugget {NUGGET}; medians of {args.repeats} runs"
        + (f" (n > {args.repeats_max}: one run)" if args.repeats_max else "")
        + ";"
    )
    print(
        "dense = covariance build + one-thread LAPACK Cholesky + solve (SciPy LAPACK); "
        "speedup = dense total / TLR total;"
    )
    if args.dense_ref:
        print(
            f"x dense n^3 = dense Cholesky at n={args.dense_ref} x (n/{args.dense_ref})^3 "
            "/ TLR total;"
        )
    print(
        "peak GiB = maximum resident set of the configuration's process "
        "(build: by the end of the build; anon: of its anonymous and shared memory, without "
        "file pages mapped in, such as a factor's rows moved to files); "
        "A GiB, L GiB = bytes of the TLR matrix after its build (a deferred one: its diagonal "
        "tiles alone) and of its factor, diag = of their dense diagonal tiles; rank A: nan "
        "(and none in the JSON) for a deferred build, whose columns are released as they are "
        "factored."
    )
    if args.json:
        atomic_write_text(args.json, json.dumps(records, indent=1, allow_nan=False))


if __name__ == "__main__":
    main()
