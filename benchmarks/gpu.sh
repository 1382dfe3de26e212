#!/usr/bin/env bash
# The GPU checks and timings of benchmarks/README.md's GPU section, in one run that fits
# a short lease: what the card is, what float64 costs on it, the benchmark surface on
# the GPU against its 16 CPU threads, n = 1000 and 5000, and the GPU surface against
# the same surface on this machine's CPU. Logs go to $OUT (or /tmp). Needs jax with
# CUDA, xarray, optax, pandas, scipy, filelock, threadpoolctl; bnlab from this checkout.
#     bash benchmarks/gpu.sh            # SIDE=21 SIZES="1000 5000" by default
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore::UserWarning
out=${OUT:-/tmp}
side=${SIDE:-21}
sizes=${SIZES:-1000 5000}
step() {  # step SECONDS NAME COMMAND...: run, keep its log, go on after a timeout
    local limit=$1 name=$2; shift 2
    echo "== $name (at most ${limit} s)"
    timeout "$limit" "$@" 2>&1 | tee "$out/$name.log" | grep -v "^WARNING\|^I0000\|^W0000"
}
step 30 info bash -c 'nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv;
  python -c "import jax, sys; print(sys.version.split()[0], jax.__version__, jax.devices())"'
step 60 cholesky python benchmarks/devices.py --cholesky --sizes 281 $sizes
step 150 devices python benchmarks/devices.py --side "$side" --repeats 1
step 140 large python benchmarks/devices.py --large --sizes $sizes --repeats 1
step 90 agreement python benchmarks/devices.py --against-cpu --side 5
