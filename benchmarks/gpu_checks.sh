#!/bin/bash
# The GPU checks: the CuPy test cases, one TLR log-likelihood at 131,072 sites, a whole TLR
# fit by Fisher scoring, a profile of a 65,536-site build and factorization, and the
# batched kernels; in order of priority, each under a time limit, so that the whole script
# finishes within 10 minutes (the limits add up to 590 s). The limits allow for a cold
# CuPy kernel cache: a fresh machine compiles CuPy's kernels at first use, which can take
# the test step past 90 s and the 131,072-site step past 80 s.
# Run from the repository root on a machine with CuPy (the 'gpu' extra):
#   bash benchmarks/gpu_checks.sh [LOG_DIR]
# Logs go to LOG_DIR (default: $OUT, else ./gpu-logs); docs/performance.md ("GPU") quotes
# their figures with the card, the CuPy version and the date.
# Two machines of one kind can differ by 1.5 times on the same code, so a change is
# measured side by side: with GPU_CHECKS_BASE=DIR, step 2 also runs the older tree in DIR
# (its own benchmarks/gpu.py on its own packages, about 2 minutes more), made beforehand
# with `git archive REV benchmarks geostat tlrcore | tar -x -C DIR`.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
logs=${1:-${OUT:-gpu-logs}}
mkdir -p "$logs"
nvidia-smi -L
python3 -c "import cupy; print('cupy', cupy.__version__)"

step() {  # step SECONDS NAME COMMAND...: run COMMAND with a time limit, log to NAME.log
    local seconds=$1 name=$2
    shift 2
    echo "=== $name (at most $seconds s)"
    timeout "$seconds" "$@" > "$logs/$name.log" 2>&1
    echo "exit $?"
    tail -15 "$logs/$name.log"
}

# 1. Every CuPy test case.
step 150 pytest-gpu python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu --durations=10 \
    tests/tlrcore/backends/test_backends.py tests/tlrcore/batched/test_batched.py \
    tests/tlrcore/packed/test_batched_tlr.py tests/geostat/kernels/test_kernels_xp.py \
    tests/geostat/likelihood/test_likelihood_backends.py \
    tests/geostat/likelihood/test_tlr_batched_likelihood.py tests/geostat/data/test_persistence.py
# 2. Two log-likelihoods at 131,072 sites (each run's time shown: a first run that stands out
#    pays one-time costs, such as CuPy compiling kernels at this size), then a phased
#    evaluation; the older tree's once.
step 180 tlr131k python3 benchmarks/gpu.py --parts 2 --backend cupy --sizes 131072 --accuracies 1e-8 --repeats 2
[ -n "${GPU_CHECKS_BASE:-}" ] && PYTHONPATH=$GPU_CHECKS_BASE step 150 tlr131k-base \
    python3 "$GPU_CHECKS_BASE/benchmarks/gpu.py" --parts 2 --backend cupy --sizes 131072 --accuracies 1e-8 --repeats 1
# 2a. A whole TLR fit by Fisher scoring on the GPU: Matern 1.5 + nugget + mean at 16,384 sites,
#    in evaluation equivalents (the field is simulated on the CPU first).
step 80 fit16k python3 benchmarks/fit_tlr.py --n 16384 --search scoring --device gpu --predict 100
# 2b. Where the time of a 65,536-site build and factorization goes (cProfile; statistics in
#    $logs/profile). CUDA_LAUNCH_BLOCKING=1 makes every launch wait for its kernel, so the
#    device's time lands on the line that launched the work (and launch overhead shows as
#    the difference to the unprofiled time).
CUDA_LAUNCH_BLOCKING=1 step 120 profile65k python3 benchmarks/gpu.py --parts 2 --backend cupy --sizes 65536 --accuracies 1e-8 --repeats 1 --profile "$logs/profile"
# 3. Batched Cholesky and the low-rank GEMMs, medians of 3.
step 60 batched python3 benchmarks/gpu.py --parts 1 --backend cupy --count 2000 --repeats 3
# 4. With GPU_CHECKS_1M=1 only, about 8 minutes more (run it on its own): 1,048,576 sites
#    at 1e-6, one evaluation, no second one timing the phases apart. It needs more GPU
#    memory than an H100 has (docs/performance.md).
[ "${GPU_CHECKS_1M:-0}" = 1 ] && step 520 tlr1m python3 benchmarks/gpu.py --parts 2 --backend cupy --sizes 1048576 --accuracies 1e-6 --repeats 1 --no-phases
nvidia-smi --query-gpu=memory.used,memory.total --format=csv
