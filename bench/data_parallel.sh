#!/usr/bin/env bash
# Data parallelism on one machine (issue 40, item 4): for R rounds, interleaved, `small` trained for 12 steps
# of 4 micro-batches of 8 x 256 tokens (AdamW) three ways: one process with 2 threads; 2 replicas over MPI
# (--data-parallel 2, one thread each); a 2-stage 1F1B pipeline over MPI (one thread a stage). Prints each
# run's tokens/s (summary.json) and the medians. Pause any background sweep first.
#
# Usage: bench/data_parallel.sh [ROUNDS (3)]     (after scripts/build.sh; needs mpirun and the MPI build)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
b=./build/nobubble
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -f data/bible-gcide/manifest.json ] || "$b" prepare --corpus bible+gcide
common=(--data data/bible-gcide --model small --batch 8 --seq 256 --microbatches 4 --steps 12 --eval-every 0 --quiet
        --optimizer adamw)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
lscpu | grep -m1 "Model name" | sed 's/^[^:]*: */cpu: /'
for r in $(seq 1 "$rounds"); do
  "$b" train "${common[@]}" --threads 2 --out "$out/one_$r" > /dev/null
  mpirun --bind-to none -np 2 "$b" train "${common[@]}" --pipeline 1f1b --data-parallel 2 --threads-per-stage 1 \
    --out "$out/dp_$r" > /dev/null
  mpirun --bind-to none -np 2 "$b" train "${common[@]}" --pipeline 1f1b --stages 2 --threads-per-stage 1 \
    --out "$out/pp_$r" > /dev/null
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
names = {"one": "one process, 2 threads", "dp": "2 replicas (--data-parallel 2), MPI", "pp": "2-stage 1F1B pipeline, MPI"}
med = {}
print("| run | tokens/s: median (rounds) | against one process |")
print("|---|---|---|")
for k in ("one", "dp", "pp"):
    v = [json.load(open(f"{out}/{k}_{r}/summary.json"))["tokens_per_s"] for r in range(1, rounds + 1)]
    med[k] = statistics.median(v)
    print("| %s | %.0f (%s) | %.2f |" % (names[k], med[k], ", ".join("%.0f" % x for x in v), med[k] / med["one"]))
PY
