#!/bin/bash
# The GPU checks still open (issue 6), in order of priority, each bounded so that the
# whole run fits one call of a lent GPU machine (about 8 minutes; device time is scarce).
# Run from the repository root on a machine with CuPy:
#   bash benchmarks/gpu_checks.sh [LOG_DIR]
# Logs go to LOG_DIR (default: $OUT, else ./gpu-logs). Measured so far (H100, Nov 2026):
# the user guide's "On a GPU" section.
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

# 1. One log-likelihood at 131,072 sites (never reached in the first GPU session).
step 120 tlr131k python3 benchmarks/gpu.py --parts 2 --backend cupy --sizes 131072 --accuracies 1e-8 --repeats 1
# 2. Every CuPy test case (123 of 129 passed before the fixes of session 32).
step 150 pytest-gpu python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu --durations=10 \
    tests/tlrcore/test_backends.py tests/tlrcore/test_batched.py tests/tlrcore/test_batched_tlr.py \
    tests/geostat/test_kernels_xp.py tests/geostat/test_likelihood_backends.py \
    tests/geostat/test_tlr_batched_likelihood.py tests/geostat/test_persistence.py
# 3. The largest sizes, one per process (memory held by one size cannot starve the next).
step 100 tlr524k python3 benchmarks/gpu.py --parts 2 --backend cupy --sizes 524288 --accuracies 1e-6 --repeats 1
step 100 tlr1m python3 benchmarks/gpu.py --parts 2 --backend cupy --sizes 1048576 --accuracies 1e-6 --repeats 1
# 4. Fixed-size batched Cholesky and the low-rank GEMMs (cut off in session 32).
step 60 batched python3 benchmarks/gpu.py --parts 1 --backend cupy --count 10000 --repeats 3
nvidia-smi --query-gpu=memory.used,memory.total --format=csv
