#!/usr/bin/env bash
# Stopping with SIGINT/SIGTERM: no code runs in signal context (a handler interrupting oneDNN's
# GEMM corrupted the heap, RELIABILITY.md). While a run trains, every thread of the process but the
# signal thread (comm "nb-signals") blocks SIGINT, SIGTERM and SIGUSR1: the one-process trainer with
# OpenMP threads, a pipeline on threads, and a sweep. A SIGTERM still stops the run cleanly with a
# checkpoint that resumes bitwise to the uninterrupted run; a second SIGTERM exits at once (143).
# The heap corruption itself is a matter of chance (see tools/reliability/stop_signals.sh); this checks the
# mechanism, deterministically.
set -u
bin=${1:?usage: cli_signals.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"

small_corpus "$bin" "$work/data" 300 && ok || fail "prepare"

# lines FILE: its line count (0 when absent). wait_lines FILE N: until FILE has N lines (20 s at most).
lines() { cat "$1" 2>/dev/null | wc -l; }
wait_lines() { for _ in $(seq 1 400); do [ "$(lines "$1")" -ge "$2" ] && return 0; sleep 0.05; done; return 1; }
hash_of() { sed -n 's/.*weights \([0-9a-f]\{16\}\)$/\1/p' "$1"; }

# masks_ok WHAT PID MIN_THREADS: exactly one signal thread, at least MIN_THREADS threads in all, and
# every other thread blocks SIGINT, SIGTERM and SIGUSR1 (SigBlk bits 1, 14, 9: 0x4202).
masks_ok() {
  local what=$1 pid=$2 min=$3 t comm blk n=0 sig=0 bad=""
  for t in /proc/"$pid"/task/*; do
    comm=$(cat "$t/comm" 2>/dev/null) && blk=$(sed -n 's/^SigBlk:[[:space:]]*//p' "$t/status" 2>/dev/null) && [ -n "$blk" ] || continue
    n=$((n + 1))
    if [ "$comm" = nb-signals ]; then sig=$((sig + 1)); continue; fi
    (( (0x$blk & 0x4202) == 0x4202 )) || bad="$bad $comm:$blk"
  done
  [ $sig -eq 1 ] && [ $n -ge "$min" ] && [ -z "$bad" ] && ok ||
    fail "$what: $n threads (expected >= $min), $sig signal threads (expected 1), threads not blocking the stop signals:${bad:- none}"
}

# OpenMP threads sleep when idle (they spin otherwise, slow on a shared machine); no effect on results.
export OMP_WAIT_POLICY=passive

# ---------------------------------------------------------------- one process, OpenMP threads
run=(--data "$work/data" --batch 4 --seq 64 --steps 30 --threads 2 --log-every 1 --eval-batches 1)
"$bin" train "${run[@]}" > "$work/full.log" 2>&1 || fail "uninterrupted run: $(tail -3 "$work/full.log")"
"$bin" train "${run[@]}" --out "$work/one" --save-dir "$work/one_ck" > "$work/one.log" 2>&1 &
pid=$!
wait_lines "$work/one/metrics.jsonl" 2 || fail "one process: no progress"
masks_ok "one process, --threads 2" $pid 3
kill -TERM $pid; wait $pid; rc=$?
at=$(sed -n 's/.*stopped on request after step \([0-9]*\); resume with --resume .*/\1/p' "$work/one.log")
[ $rc -eq 1 ] && [ -n "$at" ] && [ "$at" -lt 30 ] && grep -q "SIGTERM: stopping at the end of a step" "$work/one.log" &&
  ok || fail "one process: SIGTERM: rc $rc: $(tail -3 "$work/one.log")"
"$bin" train "${run[@]}" --resume "$work/one_ck/step_$(printf %06d "${at:-0}")" > "$work/res.log" 2>&1 ||
  fail "resume: $(tail -3 "$work/res.log")"
a=$(hash_of "$work/full.log"); b=$(hash_of "$work/res.log")
[ -n "$a" ] && [ "$a" = "$b" ] && ok || fail "stopped at step $at and resumed: weights $b, uninterrupted $a"

# ---------------------------------------------------------------- a pipeline on threads
"$bin" train --data "$work/data" --batch 4 --seq 64 --steps 100000 --set n_layers=2 --stages 2 --pipeline 2bw \
  --microbatches 2 --threads-per-stage 1 --log-every 1 --out "$work/pipe" > "$work/pipe.log" 2>&1 &
pid=$!
wait_lines "$work/pipe/metrics.jsonl" 2 || fail "pipeline: no progress"
masks_ok "pipeline, 2 stages on threads" $pid 4
kill -INT $pid; wait $pid; rc=$?
[ $rc -eq 1 ] && grep -q "stopped on request after step" "$work/pipe.log" && ok || fail "pipeline: SIGINT: rc $rc: $(tail -3 "$work/pipe.log")"

# ---------------------------------------------------------------- a second signal exits at once
# Steps of a second or more: the first SIGTERM comes during step 1, the second as soon as the first
# is acknowledged, long before step 1 ends.
"$bin" train --data "$work/data" --batch 16 --seq 128 --microbatches 8 --steps 1000 --threads 1 \
  --save-dir "$work/twice_ck" > "$work/twice.log" 2>&1 &
pid=$!
for _ in $(seq 1 400); do grep -qx nb-signals /proc/$pid/task/*/comm 2>/dev/null && break; sleep 0.05; done
kill -TERM $pid
for _ in $(seq 1 400); do grep -q "SIGTERM: stopping" "$work/twice.log" && break; sleep 0.05; done
kill -TERM $pid; wait $pid; rc=$?
[ $rc -eq 143 ] && grep -q "SIGTERM again: exiting at once" "$work/twice.log" && [ ! -e "$work/twice_ck/step_000001" ] &&
  ok || fail "second SIGTERM: rc $rc (expected 143): $(tail -3 "$work/twice.log")"

# ---------------------------------------------------------------- a sweep
printf 'fixed: --data %s --batch 4 --seq 64 --steps 100000 --log-every 1 --threads 1\naxis seed: 1\n' "$work/data" > "$work/s.grid"
"$bin" sweep "$work/s.grid" --out "$work/sw" > "$work/sw.log" 2>&1 &
pid=$!
wait_lines "$work/sw/runs/1/metrics.jsonl" 2 || fail "sweep: no progress: $(cat "$work/sw.log")"
masks_ok "sweep" $pid 2
child=$(pgrep -P $pid | head -1)
[ -n "$child" ] && masks_ok "the sweep's child" "$child" 2 || fail "sweep: no child"
kill -TERM $pid; wait $pid; rc=$?
[ $rc -eq 130 ] && grep -q "stopped on request after step" "$work/sw/runs/1/train.log" && ok ||
  fail "sweep: SIGTERM: rc $rc: $(cat "$work/sw.log") / $(tail -2 "$work/sw/runs/1/train.log")"
finish
