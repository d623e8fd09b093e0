#!/usr/bin/env bash
# Stress test of stopping with SIGINT/SIGTERM (not in ctest: minutes). Sends TRIES signals, SIGTERM
# or SIGINT at random, at a random moment of a run, cycling through six kinds of run:
#   one   the one-process trainer (tiny, --batch 4 --seq 64 --threads 1)
#   pipe  a 2-stage 2BW pipeline on threads (--pipeline 2bw --stages 2 --threads-per-stage 1)
#   sweep a one-point `nobubble sweep` (the signal to the sweep, which sends SIGTERM to its child)
# each with NB_GEMM=onednn and NB_GEMM=openblas. Every try must end in a clean stop: exit status 1
# (train) or 130 (sweep), "stopped on request after step N; resume with --resume DIR", and DIR
# resumed to the end gives the weights hash of an uninterrupted run with the same settings. A run
# that ended before the signal came counts as missed (neither a stop nor a failure). Any other end
# (an abort: exit 134, a crash, no checkpoint, another hash) is a failure; the script exits 1 if
# there is one, and keeps the logs of failures in WORK/failures/.
#
# usage: tools/reliability/stop_signals.sh [BIN (build/nobubble)] [TRIES (200)] [SEED (1)]
# The scratch folder is WORK=${STRESS_WORK:-a new mktemp -d}, removed at the end unless a try failed.
set -u
bin=$(realpath "${1:-build/nobubble}")
tries=${2:-200}
RANDOM=${3:-1}
work=${STRESS_WORK:-$(mktemp -d)}
mkdir -p "$work/failures"
export OMP_WAIT_POLICY=passive
source "$(dirname "$0")/../../tests/support/small_corpus.sh"

small_corpus "$bin" "$work/data" 300 ||
  { echo "prepare failed" >&2; exit 2; }

steps=40
common=(--data "$work/data" --batch 4 --seq 64 --steps $steps --eval-batches 1 --log-every 1)
declare -A flags
flags[one]="--threads 1"
flags[pipe]="--threads 1 --set n_layers=2 --stages 2 --pipeline 2bw --microbatches 2 --threads-per-stage 1"
flags[sweep]="--threads 1"
kinds=(one pipe sweep)
gemms=(onednn openblas)

hash_of() { sed -n 's/.*weights \([0-9a-f]\{16\}\)$/\1/p' "$1" | tail -1; }
now_ms() { date +%s%3N; }
wait_lines() { for _ in $(seq 1 600); do [ "$(cat "$1" 2>/dev/null | wc -l)" -ge "$2" ] && return 0; sleep 0.02; done; return 1; }

# The uninterrupted runs: their hashes, and how long training takes (the window for the signal).
declare -A ref window
for kind in "${kinds[@]}"; do
  for gemm in "${gemms[@]}"; do
    key=$kind/$gemm
    t0=$(now_ms)
    # shellcheck disable=SC2086
    NB_GEMM=$gemm "$bin" train "${common[@]}" ${flags[$kind]} > "$work/ref.log" 2>&1 ||
      { echo "reference run $key failed: $(tail -3 "$work/ref.log")" >&2; exit 2; }
    ref[$key]=$(hash_of "$work/ref.log")
    window[$key]=$(( ($(now_ms) - t0) * 8 / 10 ))
    echo "reference $key: weights ${ref[$key]}, $(( $(now_ms) - t0 )) ms"
  done
done

declare -A n_try n_stop n_miss n_fail n_abort
for key in "${!ref[@]}"; do n_try[$key]=0; n_stop[$key]=0; n_miss[$key]=0; n_fail[$key]=0; n_abort[$key]=0; done

# failed KEY WHY: records a failure, keeping the try's folder.
failed() {
  n_fail[$1]=$((n_fail[$1] + 1))
  local dest="$work/failures/$try"
  cp -r "$work/try" "$dest" 2>/dev/null
  echo "try $try ($1, $sig): FAILED: $2 (logs: $dest)"
}

t_start=$(now_ms)
for try in $(seq 1 "$tries"); do
  kind=${kinds[$(( (try - 1) % 3 ))]}
  gemm=${gemms[$(( ((try - 1) / 3) % 2 ))]}
  key=$kind/$gemm
  sig=$([ $((RANDOM % 2)) -eq 0 ] && echo TERM || echo INT)
  delay=$(( RANDOM * 32768 + RANDOM ))
  delay=$(( delay % (window[$key] > 1 ? window[$key] : 1) ))
  rm -rf "$work/try"; mkdir -p "$work/try"
  n_try[$key]=$((n_try[$key] + 1))
  d=$work/try
  if [ $kind = sweep ]; then
    printf 'fixed: %s %s --save-dir %s\naxis seed: 1\n' "${common[*]}" "${flags[$kind]}" "$d/ck" > "$d/grid"
    NB_GEMM=$gemm "$bin" sweep "$d/grid" --out "$d/sw" --quiet > "$d/run.log" 2>&1 &
    metrics=$d/sw/runs/1/metrics.jsonl log=$d/sw/runs/1/train.log want_rc=130
  else
    # shellcheck disable=SC2086
    NB_GEMM=$gemm "$bin" train "${common[@]}" ${flags[$kind]} --out "$d/out" --save-dir "$d/ck" --quiet > "$d/run.log" 2>&1 &
    metrics=$d/out/metrics.jsonl log=$d/run.log want_rc=1
  fi
  pid=$!
  # The signal at a random moment after the first step (earlier, a train process may not have set
  # up its signal handling yet: that is startup, not what this checks).
  wait_lines "$metrics" 1
  sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
  kill -$sig $pid 2>/dev/null
  wait $pid; rc=$?
  if [ $rc -eq 0 ] && { [ $kind = sweep ] || grep -q "^done: $steps steps" "$log"; }; then
    n_miss[$key]=$((n_miss[$key] + 1))
    continue
  fi
  if [ $rc -ge 128 ] && [ $rc -ne 130 -o $kind != sweep ] || grep -qiE "corrupt|double free|malloc\(|free\(\)|abort|segmentation" "$log" "$d/run.log"; then
    n_abort[$key]=$((n_abort[$key] + 1))
    failed "$key" "exit $rc: $(grep -iE "corrupt|double free|malloc|abort|segmentation" "$log" "$d/run.log" | head -1)"
    continue
  fi
  at=$(sed -n 's/.*stopped on request after step [0-9]*; resume with --resume \(.*\)$/\1/p' "$log")
  if [ $rc -ne $want_rc ] || [ -z "$at" ] || [ ! -d "$at" ]; then
    failed "$key" "exit $rc (expected $want_rc), checkpoint '${at}': $(tail -2 "$log" | tr '\n' ' ')"
    continue
  fi
  # shellcheck disable=SC2086
  NB_GEMM=$gemm "$bin" train "${common[@]}" ${flags[$kind]} --resume "$at" > "$d/resume.log" 2>&1
  h=$(hash_of "$d/resume.log")
  if [ "$h" != "${ref[$key]}" ]; then
    failed "$key" "resumed from $at: weights '$h', uninterrupted ${ref[$key]}: $(tail -2 "$d/resume.log" | tr '\n' ' ')"
    continue
  fi
  n_stop[$key]=$((n_stop[$key] + 1))
done
rm -rf "$work/try"

total_fail=0; total_abort=0; total_stop=0; total_miss=0
echo
printf '%-16s %6s %8s %7s %9s %7s\n' run tries stopped missed failures aborts
for kind in "${kinds[@]}"; do
  for gemm in "${gemms[@]}"; do
    key=$kind/$gemm
    printf '%-16s %6d %8d %7d %9d %7d\n' "$key" ${n_try[$key]} ${n_stop[$key]} ${n_miss[$key]} ${n_fail[$key]} ${n_abort[$key]}
    total_fail=$((total_fail + n_fail[$key])); total_abort=$((total_abort + n_abort[$key]))
    total_stop=$((total_stop + n_stop[$key])); total_miss=$((total_miss + n_miss[$key]))
  done
done
printf '%-16s %6d %8d %7d %9d %7d\n' all "$tries" $total_stop $total_miss $total_fail $total_abort
echo "$(( ($(now_ms) - t_start) / 1000 )) s; every stop resumed to the uninterrupted run's weights unless counted as a failure"
if [ $total_fail -gt 0 ]; then echo "failures kept in $work/failures"; exit 1; fi
[ -z "${STRESS_WORK:-}" ] && rm -rf "$work"
exit 0
