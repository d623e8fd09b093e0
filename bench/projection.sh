#!/usr/bin/env bash
# The simulator's accuracy (docs/projection.md): real pipelines here, 1F1B and 2BW at P = 2, 3, 4 on
# threads and on MPI processes, and D = 2 replicas of a 2-stage pipeline over MPI, and interleaved 1F1B
# (2 chunks) where M allows it (P = 2 and 4); each run's steady-state step time against `nobubble project
# --run`'s prediction from the per-stage costs the run measured, and from the costs another kind's run
# measured (1F1B's costs predicting 2BW and interleaved, 2BW's predicting 1F1B: the schedule's effect
# predicted, not fitted).
#
# usage: bench/projection.sh [REPEATS (3)] [STEPS (10)]   (after scripts/build.sh and
#        `nobubble prepare --out data/bible`). Prints one row per (transport, P, D, kind) with the medians
# over REPEATS of the measured step, both predictions and their errors. This machine has 2 cores: at
# P = 3 and 4 the stages share them (one GEMM thread each), which the measured costs carry.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}; steps=${2:-10}
bin=./build/nobubble
source bench/common.sh
# small with 8 blocks of d_ffn 1024 (bench/pipeline.sh's model with one more block, so that 4 stages
# each hold 2); a step of M = 4 micro-batches of 8 sequences (with D = 2, each replica runs 2 of them).
model=(--data data/bible --model small --set n_layers=8 --set d_ffn=1024 --batch 8 --seq 128 --steps "$steps"
       --eval-batches 1 --lr 1e-3 --microbatches 4 --threads-per-stage 1 --quiet)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

run() {  # run OUT transport P D kind
  local out=$1 transport=$2 P=$3 D=$4 kind=$5
  rm -rf "$out"
  if [ "$transport" = mpi ]; then
    mpirun -np $((P * D)) --oversubscribe --bind-to none $bin train "${model[@]}" --stages "$P" --pipeline "$kind" \
      --transport mpi --data-parallel "$D" --out "$out" >/dev/null
  else
    $bin train "${model[@]}" --stages "$P" --pipeline "$kind" --out "$out" >/dev/null
  fi
}

configs=("threads 2 1" "threads 3 1" "threads 4 1" "mpi 2 1" "mpi 3 1" "mpi 4 1" "mpi 2 2")
printf "%-8s %2s %2s %-11s %12s %14s %8s %16s %8s\n" transport P D kind "measured ms" "predicted ms" error \
  "from other kind" error
for c in "${configs[@]}"; do
  read -r transport P D <<<"$c"
  : > "$tmp/rows"
  kinds=(1f1b 2bw); [ $((4 / D % P)) -eq 0 ] && kinds+=(interleaved)  # M per replica a multiple of P
  for rep in $(seq 1 "$reps"); do
    for kind in "${kinds[@]}"; do run "$tmp/$kind" "$transport" "$P" "$D" "$kind"; done
    for kind in "${kinds[@]}"; do
      other=$([ $kind = 1f1b ] && echo 2bw || echo 1f1b)
      self=$($bin project --run "$tmp/$kind" --json)
      cross=$($bin project --run "$tmp/$kind" --costs-from "$tmp/$other" --json)
      echo "$kind $(field measured_step_s <<<"$self") $(field predicted_step_s <<<"$self") $(field error <<<"$self")" \
        "$(field predicted_step_s <<<"$cross") $(field error <<<"$cross")" >> "$tmp/rows"
    done
  done
  for kind in "${kinds[@]}"; do
    col() { awk -v k="$kind" -v c="$1" '$1 == k {print $c}' "$tmp/rows" | median; }
    printf "%-8s %2d %2d %-11s %12.1f %14.1f %+7.1f%% %16.1f %+7.1f%%\n" "$transport" "$P" "$D" "$kind" \
      "$(awk -v x="$(col 2)" 'BEGIN {print 1e3 * x}')" "$(awk -v x="$(col 3)" 'BEGIN {print 1e3 * x}')" \
      "$(awk -v x="$(col 4)" 'BEGIN {print 100 * x}')" "$(awk -v x="$(col 5)" 'BEGIN {print 1e3 * x}')" \
      "$(awk -v x="$(col 6)" 'BEGIN {print 100 * x}')"
  done
done
echo "(medians of $reps runs of $steps steps; error: predicted / measured - 1; the steady window is the run's own)"
