#!/usr/bin/env bash
# nobubble beside PyTorch 2.x at its best (issue 15): for R rounds, per thread count, model and
# optimizer, `nobubble bench` in fp32 and bf16 and tools/bench/torch_bench.py in four modes (eager
# fp32, torch.compile fp32, autocast bf16, torch.compile + autocast bf16), interleaved so that both see
# the same machine, on the same shapes (B x T), threads and optimizer; then one markdown table of
# medians over the rounds, the ratios (taken within each round, then their median) and a verdict per
# goal (tools/bench/vs_torch_table.py).
#
# PyTorch comes from PyPI into a virtual environment of this script's own (never a dependency of the
# build, the tests or CI): $NB_TORCH_VENV (default /tmp/nobubble-torch-venv), created and filled with
# torch's CPU wheel (https://download.pytorch.org/whl/cpu, else plain PyPI) when it has no torch >= 2.
#
# Usage: bench/vs_torch.sh [ROUNDS]          (3 by default; the goals want medians of >= 3)
# Environment (defaults): NB_VS_MODELS (tiny,small,medium,smollm-135m), NB_VS_THREADS (the online
# cores), NB_VS_OPTIMIZERS (adamw,muon), NB_VS_SEQ (512), NB_VS_BATCH (8), NB_VS_STEPS (5 timed steps,
# after 2 warm-up steps), NB_VS_BUILD (1: build with scripts/build.sh first; 0: use build/nobubble),
# NB_VS_MUON (torch: torch.optim.Muon where present, whose Newton-Schulz runs in bf16; rule: nobubble's
# rule in fp32, written in torch_bench.py), NB_VS_PRECISIONS (nobubble's: fp32,bf16), NB_VS_MODES
# (PyTorch's: eager-fp32,compile-fp32,eager-bf16,compile-bf16), NB_VS_KEEP (a folder that keeps the
# rounds' JSON files; by default they go to a temporary folder, removed at the end). On a CPU without
# bf16 instructions the fp32 goals are the measurable ones: NB_VS_PRECISIONS=fp32
# NB_VS_MODES=eager-fp32,compile-fp32 skips the emulated bf16 runs (PyTorch's autocast bf16 is about
# 3x slower than its fp32 there).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
models=${NB_VS_MODELS:-tiny,small,medium,smollm-135m}
threads=${NB_VS_THREADS:-$(getconf _NPROCESSORS_ONLN)}
optimizers=${NB_VS_OPTIMIZERS:-adamw,muon}
seq=${NB_VS_SEQ:-512}
batch=${NB_VS_BATCH:-8}
steps=${NB_VS_STEPS:-5}
precisions=${NB_VS_PRECISIONS:-fp32,bf16}
modes=${NB_VS_MODES:-eager-fp32,compile-fp32,eager-bf16,compile-bf16}
venv=${NB_TORCH_VENV:-/tmp/nobubble-torch-venv}
case "$rounds" in ''|*[!0-9]*|0) echo "vs_torch.sh: ROUNDS '$rounds': expected a positive integer" >&2; exit 2;; esac

has_torch2() { "$venv/bin/python" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null; }
if ! has_torch2; then
  echo "installing PyTorch into $venv (once)" >&2
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q --index-url https://download.pytorch.org/whl/cpu torch \
    || "$venv/bin/pip" install -q torch
  has_torch2 || { echo "vs_torch.sh: no torch >= 2 in $venv after installing" >&2; exit 1; }
fi
[ "${NB_VS_BUILD:-1}" = 0 ] || bash scripts/build.sh >/dev/null
# the PyTorch model must be nobubble's before anything is compared (the float64 reference fixtures)
"$venv/bin/python" -W ignore tools/bench/torch_bench_check.py >&2

if [ -n "${NB_VS_KEEP:-}" ]; then  # the rounds' JSON files stay there, for a second look at the table
  out=$NB_VS_KEEP
  mkdir -p "$out"
  rm -f "$out"/nb_*.json "$out"/torch_*.json
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
{ lscpu | grep -m1 "Model name" || echo "Model name: unknown"; } | sed 's/^[^:]*: */cpu: /' > "$out/cpu.txt"
{ lscpu | grep -m1 "^Flags" || echo "Flags: unknown"; } | sed 's/^[^:]*: */flags: /' >> "$out/cpu.txt"
echo "cores: $(getconf _NPROCESSORS_ONLN)" >> "$out/cpu.txt"
IFS=, read -r -a tlist <<< "$threads"
IFS=, read -r -a mlist <<< "$models"
IFS=, read -r -a olist <<< "$optimizers"
for r in $(seq 1 "$rounds"); do
  for t in "${tlist[@]}"; do
    for m in "${mlist[@]}"; do
      for o in "${olist[@]}"; do
        echo "round $r/$rounds: $m, $o, $t threads" >&2
        ./build/nobubble bench --models "$m" --threads "$t" --optimizers "$o" --precisions "$precisions" \
          --seq "$seq" --batch "$batch" --steps "$steps" --json > "$out/nb_${r}_${t}_${m}_${o}.json"
        OMP_NUM_THREADS=$t "$venv/bin/python" tools/bench/torch_bench.py --models "$m" --threads "$t" \
          --optimizers "$o" --modes "$modes" --seq "$seq" --batch "$batch" --steps "$steps" --muon-impl "${NB_VS_MUON:-torch}" --json \
          > "$out/torch_${r}_${t}_${m}_${o}.json" 2> "$out/torch_${r}_${t}_${m}_${o}.log" \
          || { cat "$out/torch_${r}_${t}_${m}_${o}.log" >&2; exit 1; }
      done
    done
  done
done
python3 tools/bench/vs_torch_table.py "$out" "$rounds"
