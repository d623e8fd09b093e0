#!/usr/bin/env bash
# train --gemm cuda (the products on a GPU through cuBLAS), where a GPU is; elsewhere the refusal is
# checked (it names -DNB_CUDA=ON, or says that no GPU was found) and the test is skipped (77).
# On a GPU: a 30-step fp32 run against the same run on the CPU's products (validation loss within 1e-4
# relative), the same run twice bitwise, a bf16 run within 1% of fp32's, a two-stage 2BW threads pipeline
# bitwise equal to its one-process simulation, and summary.json recording run.gemm.
set -u
bin=${1:?usage: cli_cuda.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"

small_corpus "$bin" "$work/data" 30 && ok || fail "prepare"
small=(--data "$work/data" --model tiny --set context=32 --set d_model=64 --set d_ffn=128 --set n_heads=4
       --set n_kv_heads=2 --set n_layers=2 --batch 2 --steps 30 --eval-batches 2)
hash_of() { sed -n 's/^done: .*weights \([0-9a-f]\{16\}\)$/\1/p' "$1"; }
val_of() { sed -n 's/^done: .*val loss \([^,]*\),.*/\1/p' "$1"; }
train() { local log=$1; shift; OMP_NUM_THREADS=2 "$bin" train "${small[@]}" "$@" > "$work/$log" 2>&1; }

train probe.log --gemm cuda --steps 1 ||
  skip_without_gpu "$work/probe.log" "nobubble train: --gemm: backend 'cuda'" "GPU" "--gemm cuda"

train cpu.log --gemm tiles --precision fp32 || fail "fp32 on the CPU: $(tail -3 "$work/cpu.log")"
train gpu.log --gemm cuda --precision fp32 --out "$work/gpu" || fail "fp32 on the GPU: $(tail -3 "$work/gpu.log")"
train gpu2.log --gemm cuda --precision fp32 || fail "fp32 on the GPU again"
grep -q '"gemm": "cuda"' "$work/gpu/summary.json" && ok || fail "summary.json records the backend"
python3 - "$(val_of "$work/cpu.log")" "$(val_of "$work/gpu.log")" <<'PY' && ok || fail "fp32: GPU val loss near the CPU's ($(val_of "$work/gpu.log") vs $(val_of "$work/cpu.log"))"
import sys
c, g = map(float, sys.argv[1:])
sys.exit(0 if abs(c - g) <= 1e-4 * c else 1)
PY
a=$(hash_of "$work/gpu.log"); b=$(hash_of "$work/gpu2.log")
[ -n "$a" ] && [ "$a" = "$b" ] && ok || fail "the GPU twice: weights $a vs $b"

train bf16.log --gemm cuda --precision bf16 || fail "bf16 on the GPU: $(tail -3 "$work/bf16.log")"
python3 - "$(val_of "$work/gpu.log")" "$(val_of "$work/bf16.log")" <<'PY' && ok || fail "bf16 on the GPU near fp32's"
import sys
f, b = map(float, sys.argv[1:])
sys.exit(0 if abs(f - b) <= 0.01 * f else 1)
PY

train one.log --gemm cuda --stages 2 --delay 2bw --microbatches 2 || fail "one-process 2bw on the GPU"
train pipe.log --gemm cuda --stages 2 --pipeline 2bw --microbatches 2 --threads-per-stage 1 ||
  fail "2bw pipeline on the GPU: $(tail -3 "$work/pipe.log")"
x=$(hash_of "$work/one.log"); y=$(hash_of "$work/pipe.log")
[ -n "$x" ] && [ "$x" = "$y" ] && ok || fail "the GPU pipeline ($y) equals its one-process run ($x)"
finish
