#!/bin/bash
# The GPU checks, in order of priority, each bounded so that the
# whole run fits one call of a lent GPU machine (the limits add up to 590 s, under a call's 600 s;
# about 5 minutes in practice; device time is scarce).
# A fresh machine compiles CuPy's kernels on first use (its cache starts empty): on an H100
# the pytest step then took over 90 s, against 26 s with the cache warm, and the 131K step
# over 80 s; the limits below leave room for that.
# Run from the repository root on a machine with CuPy:
#   bash benchmarks/gpu_checks.sh [LOG_DIR]
# Logs go to LOG_DIR (default: $OUT, else ./gpu-logs). Record what they show in
# docs/performance.md.
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
step 180 pytest-gpu python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu --durations=10 \
    tests/tlrcore/test_backends.py tests/tlrcore/test_batched.py tests/tlrcore/test_batched_tlr.py \
    tests/geostat/test_kernels_xp.py tests/geostat/test_likelihood_backends.py \
    tests/geostat/test_tlr_batched_likelihood.py tests/geostat/test_persistence.py
# 2. One log-likelihood at 131,072 sites; the script times a second, phased evaluation after it.
step 180 tlr131k python3 benchmarks/gpu.py --parts 2 --backend cupy --sizes 131072 --accuracies 1e-8 --repeats 1
# 2a. A whole TLR fit by Fisher scoring on the GPU: Matern 1.5 + nugget + mean at 16,384 sites,
#    in evaluation equivalents (the field is simulated on the CPU first).
step 80 fit16k python3 benchmarks/fit_tlr.py --n 16384 --search scoring --device gpu --predict 100
# 2b. Where the time of a 65,536-site build and factorization goes (cProfile; statistics in
#    $logs/profile).
step 90 profile65k python3 benchmarks/gpu.py --parts 2 --backend cupy --sizes 65536 --accuracies 1e-8 --repeats 1 --profile "$logs/profile"
# 3. Batched Cholesky and the low-rank GEMMs, medians of 3.
step 60 batched python3 benchmarks/gpu.py --parts 1 --backend cupy --count 2000 --repeats 3
# 4. With GPU_CHECKS_1M=1 only, in a call of its own (about 8 minutes): 1,048,576 sites
#    at 1e-6, one evaluation, no second one timing the phases apart. It needs more GPU
#    memory than an H100 has (docs/performance.md).
[ "${GPU_CHECKS_1M:-0}" = 1 ] && step 520 tlr1m python3 benchmarks/gpu.py --parts 2 --backend cupy --sizes 1048576 --accuracies 1e-6 --repeats 1 --no-phases
nvidia-smi --query-gpu=memory.used,memory.total --format=csv
