#!/usr/bin/env bash
# The pipeline on real workers: PipeDream-2BW against 1F1B at P = 2 stages (one core each; as two
# threads and as two MPI processes), M in {2, 4, 8} micro-batches per step, against the ideal
# speedup (M + P - 1) / M that removing 1F1B's flush allows; 2BW's steady-state idle time per
# stage; and the pipeline's time per step against one process on one core and on two.
#
# usage: bench/pipeline.sh [REPEATS (3)] [STEPS (16)]   (after scripts/build.sh and
#        `nobubble prepare --out data/bible`). Throughput is measured over the second half of
# the steps but the last (steady state); each figure is the median over REPEATS, and each ratio is taken
# between runs made back to back in the same repetition, since this machine is shared and noisy.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}; steps=${2:-12}
bin=./build/nobubble
source bench/common.sh
# small with 7 blocks of d_ffn 1024: the head is then about one block of work, and the balanced
# split (4 blocks; 3 and the head) gives the two stages equal work.
model=(--data data/bible --model small --set n_layers=7 --set d_ffn=1024 --batch 4 --seq 128 --steps "$steps"
       --eval-batches 1 --lr 1e-3)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# The steady idle fractions of a pipeline run's stages, "a b".
idle() { grep -o '"steady_idle_fraction": [0-9.e+-]*' "$1/summary.json" | awk '{printf "%s%.4f", (NR > 1 ? " " : ""), $2}'; }

run() {  # run OUT transport kind M   (OUT is reused by every repeat: --force)
  local out=$1 transport=$2 kind=$3 M=$4
  if [ "$transport" = mpi ]; then
    mpirun -np 2 --bind-to core $bin train "${model[@]}" --stages 2 --microbatches "$M" --pipeline "$kind" \
      --transport mpi --threads-per-stage 1 --quiet --force --out "$out" >/dev/null
  else
    $bin train "${model[@]}" --stages 2 --microbatches "$M" --pipeline "$kind" --threads-per-stage 1 --quiet --force --out "$out" >/dev/null
  fi
}

printf "%-8s %2s %10s %10s %8s %8s %9s %16s %14s %14s\n" transport M "1f1b tok/s" "2bw tok/s" ratio ideal "of ideal" "2bw idle s0/s1" "vs 1 proc 1T" "vs 1 proc 2T"
for M in 2 4 8; do
  : > "$tmp/threads"; : > "$tmp/mpi"
  for rep in $(seq 1 "$reps"); do
    # The one-process runs (2bw delay, stages in sequence) on one core and on both.
    OMP_NUM_THREADS=1 $bin train "${model[@]}" --stages 2 --microbatches "$M" --delay 2bw --threads 1 --quiet --force --out "$tmp/c" >/dev/null
    $bin train "${model[@]}" --stages 2 --microbatches "$M" --delay 2bw --threads 2 --quiet --force --out "$tmp/d" >/dev/null
    for transport in threads mpi; do
      run "$tmp/a" "$transport" 1f1b "$M"
      run "$tmp/b" "$transport" 2bw "$M"
      echo "$(steady "$tmp/a") $(steady "$tmp/b") $(idle "$tmp/b") $(steady "$tmp/c") $(steady "$tmp/d")" >> "$tmp/$transport"
    done
  done
  for transport in threads mpi; do
    r=$tmp/$transport
    col() { awk -v c="$1" '{print $c}' "$r" | median; }
    ratio=$(awk '{print $2 / $1}' "$r" | median)
    ideal=$(awk -v M="$M" 'BEGIN {printf "%.3f", (M + 1) / M}')
    printf "%-8s %2d %10.0f %10.0f %8.3f %8s %8.1f%% %7.1f%% %6.1f%% %13.2fx %13.2fx\n" "$transport" "$M" "$(col 1)" "$(col 2)" \
      "$ratio" "$ideal" "$(awk -v r="$ratio" -v i="$ideal" 'BEGIN {print 100 * r / i}')" \
      "$(awk '{print 100 * $3}' "$r" | median)" "$(awk '{print 100 * $4}' "$r" | median)" \
      "$(awk '{print $2 / $5}' "$r" | median)" "$(awk '{print $2 / $6}' "$r" | median)"
  done
done
echo "(ratio: 2bw over 1f1b tokens/s; of ideal: ratio / ideal; vs 1 proc: the 2bw pipeline's"
echo " steady tokens/s over the one-process 2bw run with 1 and 2 GEMM threads; $reps repeats, median)"
