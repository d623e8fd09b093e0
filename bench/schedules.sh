#!/usr/bin/env bash
# The trained schedules on real workers: 1F1B, ZB-H1, PipeDream-2BW and interleaved 1F1B with 2 chunks, at P = 2 (M = 4) and P = 3 (M = 6), on threads and MPI; the steady-state tokens/s of each and
# their ratios to 1F1B, and the
# simulator's prediction of the ZB-H1 and interleaved runs from 1F1B's measured costs (`nobubble project
# --run ZBH1 --costs-from 1F1B`), the schedule's effect predicted rather than fitted.
#
# usage: bench/schedules.sh [REPEATS (3)] [STEPS (10)]   (after scripts/build.sh and
#        `nobubble prepare --out data/bible`). Medians over REPEATS; the ratios are taken between runs made
# back to back in the same repetition. This machine has 2 cores: at P = 3 the stages share them.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}; steps=${2:-10}
bin=./build/nobubble
source bench/common.sh
model=(--data data/bible --model small --set n_layers=8 --set d_ffn=1024 --seq 128 --steps "$steps"
       --eval-batches 1 --lr 1e-3 --batch 8 --threads-per-stage 1 --precision fp32 --quiet)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run() {  # run OUT transport P M kind
  local out=$1 transport=$2 P=$3 M=$4 kind=$5
  rm -rf "$out"
  if [ "$transport" = mpi ]; then
    mpirun -np "$P" --oversubscribe --bind-to none $bin train "${model[@]}" --stages "$P" --microbatches "$M" \
      --pipeline "$kind" --transport mpi --out "$out" >/dev/null
  else
    $bin train "${model[@]}" --stages "$P" --microbatches "$M" --pipeline "$kind" --out "$out" >/dev/null
  fi
}

printf "%-8s %2s %2s %11s %11s %11s %11s %10s %10s %10s %14s %14s\n" transport P M "1f1b tok/s" "zbh1 tok/s" \
  "2bw tok/s" "il tok/s" "zbh1/1f1b" "2bw/1f1b" "il/1f1b" "zbh1 predicted" "il predicted"
for c in "threads 2 4" "threads 3 6" "mpi 2 4" "mpi 3 6"; do
  read -r transport P M <<<"$c"
  kinds=(1f1b zbh1 2bw interleaved)
  : > "$tmp/rows"
  for rep in $(seq 1 "$reps"); do
    for kind in "${kinds[@]}"; do run "$tmp/$kind" "$transport" "$P" "$M" "$kind"; done
    pred=$($bin project --run "$tmp/zbh1" --costs-from "$tmp/1f1b" --json)
    ilpred=$($bin project --run "$tmp/interleaved" --costs-from "$tmp/1f1b" --json)
    echo "$(steady "$tmp/1f1b") $(steady "$tmp/zbh1") $(steady "$tmp/2bw") $(steady "$tmp/interleaved")" \
      "$(field error <<<"$pred") $(field error <<<"$ilpred")" >> "$tmp/rows"
  done
  col() { awk -v c="$1" '{print $c}' "$tmp/rows" | median; }
  printf "%-8s %2d %2d %11.0f %11.0f %11.0f %11.0f %10.3f %10.3f %10.3f %+13.1f%% %+13.1f%%\n" "$transport" "$P" "$M" "$(col 1)" \
    "$(col 2)" "$(col 3)" "$(col 4)" "$(awk '{print $2 / $1}' "$tmp/rows" | median)" \
    "$(awk '{print $3 / $1}' "$tmp/rows" | median)" "$(awk '{print $4 / $1}' "$tmp/rows" | median)" \
    "$(awk '{print 100 * $5}' "$tmp/rows" | median)" "$(awk '{print 100 * $6}' "$tmp/rows" | median)"
done
echo "(medians of $reps runs of $steps steps; il: interleaved 1F1B with 2 chunks; zbh1"
echo " and il predicted: the step time the simulator predicts for the ZB-H1 and interleaved runs from the 1F1B"
echo " run's costs, against the run's measured one)"
