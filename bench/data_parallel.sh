#!/usr/bin/env bash
# Data parallelism on one machine (issue 40, item 4): for R rounds, interleaved, `small` trained for 12 steps
# of 4 micro-batches of 8 x 256 tokens (AdamW) six ways: one process with 2 threads; 2 replicas over MPI
# (--data-parallel 2, one thread each) with the gradient's sum in one piece after the backward
# (--dp-bucket-mib 0), in 1 MiB buckets started during it, and at the default 25 MiB (small's 24.7 MB
# gradient: one bucket, started as the backward ends); a 2-stage 1F1B pipeline over MPI (one thread a
# stage); and 2 replicas of it (D x P = 4 ranks on 2 cores: what it costs, not what it gains). Prints each
# run's tokens/s (summary.json), the medians and each replicated run's seconds of REDUCE and how many
# buckets were summed before it. Pause any background sweep first.
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
  for k in "dp 25" "dp0 0" "dp1 1"; do
    read -r name mib <<<"$k"
    mpirun --bind-to none -np 2 "$b" train "${common[@]}" --pipeline 1f1b --data-parallel 2 --threads-per-stage 1 \
      --dp-bucket-mib "$mib" --out "$out/${name}_$r" > /dev/null
  done
  mpirun --bind-to none -np 2 "$b" train "${common[@]}" --pipeline 1f1b --stages 2 --threads-per-stage 1 \
    --out "$out/pp_$r" > /dev/null
  mpirun --bind-to none --oversubscribe -np 4 "$b" train "${common[@]}" --pipeline 1f1b --stages 2 --data-parallel 2 \
    --threads-per-stage 1 --out "$out/dpp_$r" > /dev/null
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
names = {"one": "one process, 2 threads", "dp0": "2 replicas (--data-parallel 2), MPI, one sum (--dp-bucket-mib 0)",
         "dp1": "2 replicas, MPI, 1 MiB buckets", "dp": "2 replicas, MPI, 25 MiB buckets (default)",
         "pp": "2-stage 1F1B pipeline, MPI", "dpp": "2 replicas x 2-stage 1F1B, MPI (4 ranks on 2 cores)"}
med = {}
print("| run | tokens/s: median (rounds) | against one process | REDUCE s per step, stage 0 | buckets summed before REDUCE |")
print("|---|---|---|---|---|")
for k in ("one", "dp0", "dp1", "dp", "pp", "dpp"):
    runs = [json.load(open(f"{out}/{k}_{r}/summary.json")) for r in range(1, rounds + 1)]
    v = [s["tokens_per_s"] for s in runs]
    med[k] = statistics.median(v)
    red = early = "-"
    if k.startswith("d"):
        st = [s["pipeline"]["stages"][0] for s in runs]
        red = "%.3f" % statistics.median(x["reduce_s"] / s["run"]["steps"] for x, s in zip(st, runs))
        early = "%d of %d" % (statistics.median(x["buckets_early"] for x in st), statistics.median(x["buckets"] for x in st))
    print("| %s | %.0f (%s) | %.2f | %s | %s |" % (names[k], med[k], ", ".join("%.0f" % x for x in v),
                                                 med[k] / med["one"], red, early))
PY
