#!/usr/bin/env bash
# Two GEMM backends on a model's whole step, A/B: for R rounds, `nobubble bench` with NB_GEMM=A and
# NB_GEMM=B back to back, the order swapped every round (on a shared machine the second of a pair can be
# the slower one whatever it runs); then per pair the step's speedup and the ratio of the step's GEMM
# time to its time outside GEMMs (both from the same run: it cancels a drift of the machine that slows
# both alike), and their medians (BENCHMARKS.md, "Weight gradients on register tiles").
# Usage: bench/gemm_ab.sh [MODEL (medium)] [ROUNDS (6)] [A (hybrid)] [B (tiles)]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-medium}
rounds=${2:-6}
a=${3:-hybrid}
b=${4:-tiles}
[ -x build/nobubble ] || bash scripts/build.sh >/dev/null
out=$(mktemp -d)
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="$a $b"; else order="$b $a"; fi
  for g in $order; do
    NB_GEMM=$g ./build/nobubble bench --models "$model" --threads "${NB_AB_THREADS:-2}" --seq 512 --batch 8 --steps 3 \
      --json > "$out/$g.$r.json"
  done
done
python3 - "$out" "$rounds" "$a" "$b" <<'PY'
import json, statistics, sys
out, rounds, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def row(g, r):
    x = json.load(open(f"{out}/{g}.{r}.json"))["results"][0]
    step, share, gemm = x["median_step_s"], x["outside_gemm_share"], x["median_gemm_s"]
    return step, gemm / (step * share)
speed, gratio = [], []
print(f"| round | {a} step (s) | {b} step (s) | step speedup {a}/{b} | GEMM/non-GEMM {a} over {b} |")
print("|---|---|---|---|---|")
for r in range(1, rounds + 1):
    (sa, ga), (sb, gb) = row(a, r), row(b, r)
    speed.append(sa / sb)
    gratio.append(ga / gb)
    print(f"| {r} | {sa:.3f} | {sb:.3f} | {sa / sb:.3f} | {ga / gb:.3f} |")
print(f"median step speedup {statistics.median(speed):.3f}; median GEMM/non-GEMM ratio {statistics.median(gratio):.3f} "
      f"(range {min(gratio):.3f}-{max(gratio):.3f}); {sum(g > 1 for g in gratio)} of {rounds} pairs above 1")
PY
rm -rf "$out"
