#!/usr/bin/env bash
# Every GPU check of issue 42 and the benchmark, in one call on a lent GPU machine (the `device` tool), from
# the repository's root. The programs come from a pack made here by tools/gpu/pack.sh (the GPU machine has the
# driver and the CUDA toolkit, not nobubble's other libraries); where no pack is given and the machine can build
# (cmake, nvcc and the libraries of scripts/setup.sh), it builds one first. Writes everything under RESULTS.
#
#   here:        cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DNB_CUDA=ON -DNB_NATIVE=OFF \
#                  -DCMAKE_C_FLAGS=-march=x86-64-v3 && cmake --build build-cuda -j2 \
#                  --target nobubble_launcher test_cuda test_cuda_kernels && bash tools/gpu/pack.sh build-cuda .gpu
#   the device:  see "A 15-minute lease" below. Everything at once (bash tools/device/check.sh .gpu DIR) takes
#                about 12 minutes, mostly torch.compile: more than one call's 10-minute limit, so split it by PARTS.
#
# Parts, in this order, each command under its own time limit:
#   1. machine: the GPU, the driver, the host's CPU flags;
#   2. tests: tests/test_cuda (cuBLAS products), tests/test_cuda_kernels (every kernel against the CPU or a
#      double reference, both attention forms), tests/cli_cuda.sh (--gemm cuda), tests/cli_cuda_device.sh
#      (--device cuda: CPU against GPU over 50 steps, bitwise twice, resume, a 2-stage 2BW pipeline against its
#      simulation, tensor-core attention, eval); about 2 minutes on an H100;
#   3. bench: `nobubble bench --device cuda` at T = 2048 for MODELS (small, medium, smollm-135m, smollm-360m),
#      the largest of BATCHES (16 8 4 2 1) that runs, tokens/s and the fraction of the data sheet's dense bf16
#      peak (989 TFLOP/s for the H100 SXM and the H200; PEAK_GFLOPS to change it), in bf16 and fp32;
#   3b. next: the same in bf16 with the kernels not yet run on a GPU (NB_CUDA_KERNELS=next: attention on the
#      tensor cores, RMSNorm's dgain on every SM; opt-in until they have passed here);
#   4. torch: PyTorch on the same models and shapes where this machine's python has torch with CUDA
#      (tools/bench/torch_bench.py --device cuda, TORCH_MODES: torch.compile + bf16 autocast, eager bf16,
#      compile fp32; about a minute of compilation per model and mode); at bench's batch, or BATCHES' first
#      where bench did not run in this call;
#   5. profile: each kernel's share of the GPU's time over `bench --steps 1` (its 2 warm-up steps and the timed one)
#      of PROFILE_MODEL (smollm-135m) at batch 1,
#      T = 2048, bf16 (ncu's per-kernel summary, added up by tools/device/ncu_summary.py), where ncu is there;
#      NB_CUDA_KERNELS in the environment applies.
# A kernel test that fails is run again under compute-sanitizer (memcheck) where the machine has it, to name the
# kernel that faults; each test's whole output is kept as RESULTS/NAME.out; NB_TEST_KEEP (a folder) keeps the
# CLI tests' logs and JSON.
#
# A 15-minute lease (device time counts from each machine's start, about half a minute): on 2026-12-05 two calls of
# about 3.5 minutes each ran the tests, the benchmark of four models and PyTorch's, and the profile (docs/gpu.md
# gives their commands). With the `next` part, for example:
#   run(command='MODELS="smollm-135m medium" BATCHES="8 4" TORCH_MODES="compile-bf16,eager-bf16"
#                PARTS="machine tests bench next torch" bash tools/device/check.sh .gpu /tmp/dc; tar ...',
#       carry=[".gpu"], timeout_s=480)
#   run(command='PARTS="profile" bash tools/device/check.sh .gpu /tmp/dc;
#                NB_CUDA_KERNELS=next PARTS="profile" bash tools/device/check.sh .gpu /tmp/dc-next; ...',
#       carry=[".gpu"], timeout_s=300)  (the profile with and without the kernels not yet run on a GPU)
# ($OUT takes at most 8 files: tar the results folder into one.)
set -uo pipefail
pack=${1:-.gpu}
results=${2:-device-check}
peak=${PEAK_GFLOPS:-989000}
mkdir -p "$results"
log="$results/check.log"
say() { echo "== $*" | tee -a "$log"; }
if [ ! -d "$pack" ] && command -v cmake > /dev/null && command -v nvcc > /dev/null; then
  say "building a pack into $pack"
  { cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DNB_CUDA=ON &&
    cmake --build build-cuda -j"$(nproc)" --target nobubble_launcher test_cuda test_cuda_kernels &&
    bash tools/gpu/pack.sh build-cuda "$pack"; } >> "$log" 2>&1 || say "the build failed (its log is above)"
fi
[ -f "$pack/lib.tar.xz" ] || { say "no pack at $pack: make one with tools/gpu/pack.sh"; exit 1; }
mkdir -p /tmp/nb-gpu && tar -C /tmp/nb-gpu -xJf "$pack/lib.tar.xz"
cublas=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublas.so.13*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=/tmp/nb-gpu/lib${cublas:+:$(dirname "$cublas")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$(cd "$pack/bin" && pwd)

part() { [[ " ${PARTS:-machine tests bench next torch profile} " == *" $1 "* ]]; }

part machine && say "1. machine" && { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  lscpu | grep -E '^(Model name|CPU\(s\))'; echo "CPU flags: $(grep -o -w 'avx2\|avx512f\|avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "cuBLAS: ${cublas:-not found}"
  ldd "$bin/nobubble-core" "$bin/test_cuda" "$bin/test_cuda_kernels" | grep "not found"; } 2>&1 | tee -a "$log"

# t NAME LIMIT COMMAND...: the whole output in $results/NAME.out (spaces as _), its last 40 lines in the log
t() {
  local name=$1 limit=$2; shift 2; say "$name"
  timeout "$limit" "$@" > "$results/${name// /_}.out" 2>&1
  local rc=$?
  tail -40 "$results/${name// /_}.out" | tee -a "$log"; echo "rc=$rc" | tee -a "$log"
}
part tests && say "2. tests" && {
t test_cuda 60 "$bin/test_cuda"
t test_cuda_kernels 90 "$bin/test_cuda_kernels"
if ! grep -q '^rc=0$' <(tail -1 "$log") && command -v compute-sanitizer > /dev/null; then
  t "test_cuda_kernels under compute-sanitizer" 120 compute-sanitizer --tool memcheck --print-limit 20 "$bin/test_cuda_kernels"
fi
t cli_cuda.sh 60 bash tests/cli_cuda.sh "$bin/nobubble"
t cli_cuda_device.sh 200 bash tests/cli_cuda_device.sh "$bin/nobubble"
}

models=${MODELS:-small medium smollm-135m smollm-360m}
declare -A batch_of
part bench && say "3. benchmark: nobubble bench --device cuda, T = 2048, fraction of $peak GFLOP/s" &&
for m in $models; do
  for b in ${BATCHES:-16 8 4 2 1}; do
    if timeout 60 "$bin/nobubble" bench --device cuda --models "$m" --threads 4 --seq 2048 --batch "$b" --steps 3 \
        --precisions bf16,fp32 \
        --peak-gflops "$peak" --no-memory-check --json > "$results/bench_$m.json" 2> "$results/bench_$m.err"; then
      batch_of[$m]=$b
      grep -o '"model": [^}]*' "$results/bench_$m.json" | tee -a "$log"
      break
    fi
    echo "$m at batch $b: $(tail -1 "$results/bench_$m.err")" | tee -a "$log"
  done
done

part next && say "3b. the same bench in bf16 with the kernels not yet run on a GPU (NB_CUDA_KERNELS=next)" &&
for m in $models; do
  [ -n "${batch_of[$m]:-}" ] || { echo "$m: no batch from bench in this call (PARTS must hold bench): skipped" | tee -a "$log"; continue; }
  NB_CUDA_KERNELS=next timeout 60 "$bin/nobubble" bench --device cuda --models "$m" --threads 4 --seq 2048 \
    --batch "${batch_of[$m]}" --steps 3 --precisions bf16 --peak-gflops "$peak" --no-memory-check --json \
    > "$results/bench_next_$m.json" 2> "$results/bench_next_$m.err" &&
    grep -o '"model": [^}]*' "$results/bench_next_$m.json" | tee -a "$log" ||
    echo "$m with the next kernels: $(tail -1 "$results/bench_next_$m.err")" | tee -a "$log"
done

part torch && say "4. PyTorch on the same GPU" && if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2> /dev/null; then
  for m in $models; do
    b=${batch_of[$m]:-}
    [ -n "$b" ] || part bench || b=$(set -- ${BATCHES:-16 8 4 2 1}; echo "$1")
    [ -n "$b" ] || continue  # bench ran and found no batch that fits
    timeout 120 python3 tools/bench/torch_bench.py --device cuda --models "$m" --seq 2048 --batch "$b" \
      --modes "${TORCH_MODES:-compile-bf16,eager-bf16,compile-fp32}" --steps 5 --json > "$results/torch_$m.json" 2>> "$log"
    echo "rc=$?" | tee -a "$log"; cat "$results/torch_$m.json" | tee -a "$log"
  done
else
  echo "no torch with CUDA in this machine's python3: skipped" | tee -a "$log"
fi
if part profile && ! command -v ncu > /dev/null; then
  say "5. profile: skipped, no ncu on this machine"
elif part profile; then
  pm=${PROFILE_MODEL:-smollm-135m}
  say "5. profile: bench --steps 1 of $pm (2 warm-up steps and 1 timed), batch 1, T = 2048, bf16 (each kernel's share of the GPU's time)"
  timeout 240 ncu --metrics gpu__time_duration.sum --print-summary per-kernel --target-processes all "$bin/nobubble" \
    bench --device cuda --models "$pm" --threads 4 --seq 2048 --batch 1 --steps 1 --precisions bf16 \
    --no-memory-check > "$results/ncu_$pm.txt" 2>&1
  echo "rc=$?" | tee -a "$log"
  python3 tools/device/ncu_summary.py "$results/ncu_$pm.txt" 30 2>&1 | tee -a "$log"
fi
say "done"
