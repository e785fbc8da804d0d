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

# 1. 1,048,576 sites: ran out of memory in the build on an H200 before the cap on generator
#    calls (tlrcore.packed.build._CHUNK_ENTRIES); 524,288 took 107 s there. One evaluation
#    only (no second one timing the phases apart).
step 330 tlr1m python3 benchmarks/gpu.py --parts 2 --backend cupy --sizes 1048576 --accuracies 1e-6 --repeats 1 --no-phases
# 2. Every CuPy test case (129 of 129 passed on an H200).
step 90 pytest-gpu python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu --durations=10 \
    tests/tlrcore/test_backends.py tests/tlrcore/test_batched.py tests/tlrcore/test_batched_tlr.py \
    tests/geostat/test_kernels_xp.py tests/geostat/test_likelihood_backends.py \
    tests/geostat/test_tlr_batched_likelihood.py tests/geostat/test_persistence.py
# 3. One log-likelihood at 131,072 sites (44.3 s on an H200, against 54 s on two CPU cores).
step 80 tlr131k python3 benchmarks/gpu.py --parts 2 --backend cupy --sizes 131072 --accuracies 1e-8 --repeats 1
# 4. Batched Cholesky and the low-rank GEMMs, medians of 3 (one run each on an H200).
step 60 batched python3 benchmarks/gpu.py --parts 1 --backend cupy --count 2000 --repeats 3
nvidia-smi --query-gpu=memory.used,memory.total --format=csv
