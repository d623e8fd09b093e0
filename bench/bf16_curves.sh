#!/usr/bin/env bash
# bf16 against fp32 (issue 15): per model and seed, the same run in both precisions (seed and data order
# shared), validation every STEPS/10 steps; then a table per model of the final validation losses, the
# gap bf16 - fp32 paired per seed with a 95% t interval, and the paired gap at every evaluation beside
# fp32's seed-to-seed spread (BENCHMARKS.md, "bf16 against fp32: loss curves"). Finished runs are kept,
# and a run stopped part way resumes from its last checkpoint (every STEPS/10 steps; bitwise the run that
# was not stopped): run it again to go on. Loss values do not depend on timing, so it may run beside
# other work.
# Usage: bench/bf16_curves.sh [MODELS (tiny)] [STEPS (1000)] [OUT (runs/bf16_curves)]
# NB_CURVES_BIN=PATH runs that binary instead of build/nobubble (a copy that later builds do not replace,
# so that a run resumed in another session continues on the same bits).
set -euo pipefail
cd "$(dirname "$0")/.."
models=${1:-tiny}
steps=${2:-1000}
out=${3:-runs/bf16_curves}
bin=${NB_CURVES_BIN:-./build/nobubble}
[ -x "$bin" ] || bash scripts/build.sh >/dev/null
[ -f data/bible/tokenizer.json ] || "$bin" prepare --out data/bible >/dev/null
mkdir -p "$out"
IFS=, read -r -a mlist <<< "$models"
for m in "${mlist[@]}"; do
  for seed in 1 2 3; do
    for p in fp32 bf16; do
      run=$out/$m-$p-s$seed
      [ -f "$run/summary.json" ] && continue
      last=$(ls -d "$run"/checkpoints/step_* 2>/dev/null | sort | tail -1 || true)
      if [ -n "$last" ]; then start=(--resume "$last"); else start=(--force); fi
      echo "bf16_curves: $run${last:+ (from $last)}" >&2
      OMP_NUM_THREADS=1 "$bin" train --data data/bible --model "$m" --steps "$steps" --warmup $((steps / 10)) \
        --seed "$seed" --data-seed "$seed" --eval-every $((steps / 10)) --eval-batches 8 --precision "$p" --threads 1 \
        --quiet --save-dir "$run/checkpoints" --save-every $((steps / 10)) --keep 2 "${start[@]}" --out "$run" \
        >> "$run.log" 2>&1 || { echo "bf16_curves: $run failed: $(tail -2 "$run.log")" >&2; exit 1; }
      rm -rf "$run/checkpoints"   # they were there to resume it
    done
  done
  python3 - "$out" "$m" <<'PY'
import json, math, statistics, sys
out, model = sys.argv[1:]
T975 = {1: 12.706205, 2: 4.302653, 3: 3.182446, 4: 2.776445}
def vals(path):
    v = {}
    for line in open(path):
        r = json.loads(line)
        x = r.get("val_loss")
        if isinstance(x, (int, float)) and not math.isnan(x):
            v[r["step"]] = x
    return v
curves = {s: (vals(f"{out}/{model}-fp32-s{s}/metrics.jsonl"), vals(f"{out}/{model}-bf16-s{s}/metrics.jsonl")) for s in (1, 2, 3)}
steps = sorted(set.intersection(*[set(f) & set(b) for f, b in curves.values()]))
last = steps[-1]
print(f"\n{model}: final validation loss (step {last})\n")
print("| seed | fp32 | bf16 | bf16 - fp32 | largest \\|bf16 - fp32\\| over the evaluations |")
print("|---|---|---|---|---|")
gaps = []
for s, (f, b) in curves.items():
    gaps.append(b[last] - f[last])
    print(f"| {s} | {f[last]:.4f} | {b[last]:.4f} | {gaps[-1]:+.4f} | {max(abs(b[k] - f[k]) for k in steps):.4f} |")
n = len(gaps)
mean, sd = statistics.mean(gaps), statistics.stdev(gaps)
hw = T975[n - 1] * sd / math.sqrt(n)
print(f"\npaired gap bf16 - fp32: mean {mean:+.4f}, sd {sd:.4f}, 95% interval [{mean - hw:+.4f}, {mean + hw:+.4f}] "
      f"(t, {n - 1} df): {'within noise' if mean - hw <= 0 <= mean + hw else 'NOT within noise'}\n")
print("| step | fp32 mean | bf16 mean | paired gap mean | fp32 seed sd |")
print("|---|---|---|---|---|")
for k in steps:
    fs = [c[0][k] for c in curves.values()]
    bs = [c[1][k] for c in curves.values()]
    print(f"| {k} | {statistics.mean(fs):.4f} | {statistics.mean(bs):.4f} | "
          f"{statistics.mean([b - a for a, b in zip(fs, bs)]):+.4f} | {statistics.stdev(fs):.4f} |")
PY
done
