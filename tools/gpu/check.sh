#!/usr/bin/env bash
# The GPU checks, on a machine with an NVIDIA GPU, from a folder made by tools/gpu/pack.sh (default .gpu),
# run from the repository's root: the machine's description, tests/test_cuda, tests/test_cuda_kernels (the
# layers' and optimizers' kernels against the CPU's functions), tests/cli_cuda.sh, then
# whole training steps timed (`nobubble bench`) with the products on the GPU and on the CPU. Writes its
# log and the benchmark's JSON into RESULTS (default: the current folder's gpu-check/).
#
#   bash tools/gpu/check.sh [PACK] [RESULTS]
set -uo pipefail
pack=${1:-.gpu}
results=${2:-gpu-check}
mkdir -p "$results" /tmp/nb-gpu
tar -C /tmp/nb-gpu -xJf "$pack/lib.tar.xz"
# cuBLAS: the toolkit's, else a Python package's.
cublas=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublas.so.13*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=/tmp/nb-gpu/lib${cublas:+:$(dirname "$cublas")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$(cd "$pack/bin" && pwd)
{
  echo "== machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  lscpu | grep -E '^(Model name|CPU\(s\)|Flags)' | cut -c1-300; echo "cuBLAS: ${cublas:-not found}"
  ldd "$bin/nobubble-core" "$bin/test_cuda" "$bin/test_cuda_kernels" | grep "not found"
  echo "== tests/test_cuda"; "$bin/test_cuda" | grep -v '^ok'; echo "rc=${PIPESTATUS[0]}"
  echo "== tests/test_cuda_kernels"; "$bin/test_cuda_kernels"; echo "rc=$?"
  echo "== tests/cli_cuda.sh"; bash tests/cli_cuda.sh "$bin/nobubble"; echo "rc=$?"
} 2>&1 | tee "$results/check.log"
# Whole steps, the same settings on both backends: --threads 16 (the machine's cores) for the CPU's
# products and everything that stays on the CPU.
for gemm in cuda tiles; do
  echo "== bench, --gemm $gemm" | tee -a "$results/check.log"
  NB_GEMM=$gemm "$bin/nobubble" bench --models small,medium --threads 16 --precisions fp32,bf16 --steps 3 --json \
    > "$results/bench_$gemm.json" 2>> "$results/check.log"
  echo "rc=$?" | tee -a "$results/check.log"; cat "$results/bench_$gemm.json" | tee -a "$results/check.log"; echo
done
