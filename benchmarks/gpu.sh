#!/usr/bin/env bash
# The GPU checks and timings of benchmarks/README.md ("Batched surfaces (issue 46)") in
# one run that fits a short lease (≤ 5 minutes): what the card is, then
# benchmarks/batched.py: per method and size, bnlab's batched (vmap) surface on the GPU,
# the scan surface on the same machine's CPU, the ratio to the floor (iterations × one
# batched Cholesky, timed in the same run), and a check that the two agree. Logs go to
# $OUT (or /tmp). Needs jax with CUDA, xarray, optax, pandas, scipy, filelock,
# threadpoolctl; bnlab from this checkout. Sizes are n:side pairs:
#     bash benchmarks/gpu.sh                  # SIZES="281:21 1000:21" LARGE="5000:11"
#     SIZES="40:5" LARGE="80:3" CPU_MAX_N=40 bash benchmarks/gpu.sh   # a CPU-only try
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore::UserWarning
out=${OUT:-/tmp}
sizes=${SIZES:-281:21 1000:21}
large=${LARGE:-5000:11}
cpu_max_n=${CPU_MAX_N:-281}
step() {  # step SECONDS NAME COMMAND...: run, keep its log, go on after a timeout
    local limit=$1 name=$2; shift 2
    echo "== $name (at most ${limit} s)"
    timeout "$limit" "$@" 2>&1 | tee "$out/$name.log" | grep -v "^WARNING\|^I0000\|^W0000"
}
step 20 info bash -c 'nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv;
  python -c "import jax, sys; print(sys.version.split()[0], jax.__version__, jax.devices())"'
# shellcheck disable=SC2086
step 180 batched python benchmarks/batched.py --sizes $sizes --cpu-max-n "$cpu_max_n"
# the memory-split size: each surface once (with compiling), cold layout, values checked
# on the CPU at one grid point (the first: small ℓ and σ², few iterations; a CPU solve at
# n = 5000 takes seconds per iteration)
# shellcheck disable=SC2086
step 100 large python benchmarks/batched.py --sizes $large --cpu-max-n "$cpu_max_n" \
    --layouts cold --first-only --check 1
