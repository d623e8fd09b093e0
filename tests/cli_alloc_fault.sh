#!/usr/bin/env bash
# The library never exits (issue 37, item 5): memory that runs out anywhere on a run's way (the model's
# stages, activation slots and scratch, attention's per-thread scratch, the optimizer's state and
# per-step scratch, the weight versions, bf16 copies) makes nb_train return -1 with a message naming
# what could not be allocated, after releasing what it took; never an exit, an abort or a crash.
# NB_TRAIN_FAULT=alloc:N fails the N-th allocation of the process (util/alloc.h). For each N from 1 (in
# steps of STRIDE) until the run no longer reaches an N-th allocation and succeeds, each run must:
# - exit 1 (not 3 as an exit() did, not a signal), without a sanitizer's report (a leak: under ASan,
#   which CI runs every test under), saying "out of memory allocating WHAT (BYTES bytes)" for that N;
# - leave no summary.json, and a metrics.jsonl (if any) of whole lines;
# and the run past the last allocation, in the same --out folder, trains the reference run's weights.
# One process exhaustively; a 2-stage pipeline on threads, bf16 with Muon on 2 OpenMP threads (the
# failures inside attention's and the optimizer's parallel regions) and SOAP (its eigen-decomposition's
# allocation inside the optimizer's parallel loop) in strides.
set -u
bin=${1:?usage: cli_alloc_fault.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"

small_corpus "$bin" "$work/data" || fail "prepare"
small=(--data "$work/data" --set n_layers=2 --set context=16 --batch 2 --steps 2 --quiet)
hash_of() { sed -n 's/.*"weights_hash": "\([0-9a-f]*\)".*/\1/p' "$1/summary.json" 2>/dev/null; }

# sweep NAME STRIDE FLAGS...: the reference run, then the runs with an allocation failed.
sweep() {
  local name=$1 stride=$2; shift 2
  local out=$work/$name n=1 points=0 bad=0 rc want
  "$bin" train "${small[@]}" "$@" --out "$work/$name-ref" > "$work/log" 2>&1 || { fail "$name: the reference run: $(cat "$work/log")"; return; }
  want=$(hash_of "$work/$name-ref")
  while :; do
    NB_TRAIN_FAULT=alloc:$n "$bin" train "${small[@]}" "$@" --out "$out" --force > "$work/log" 2>&1
    rc=$?
    [ $rc -eq 0 ] && break
    points=$((points + 1))
    if [ $rc -ne 1 ]; then
      fail "$name, alloc:$n: exit $rc, expected 1 (an error, not an exit, a signal or a sanitizer's report): $(tail -5 "$work/log")"; bad=$((bad + 1))
    elif grep -q "Sanitizer\|runtime error" "$work/log"; then   # a leak report keeps a failing process's status
      fail "$name, alloc:$n: the sanitizers report: $(grep -m 3 -A 6 "Sanitizer\|runtime error" "$work/log")"; bad=$((bad + 1))
    elif ! grep -q "out of memory allocating .* ([0-9]* bytes) \[injected: NB_TRAIN_FAULT=alloc:$n\]" "$work/log"; then
      fail "$name, alloc:$n: the message does not name what failed: $(tail -3 "$work/log")"; bad=$((bad + 1))
    elif [ -e "$out/summary.json" ]; then
      fail "$name, alloc:$n: the failed run wrote a summary.json"; bad=$((bad + 1))
    elif [ -s "$out/metrics.jsonl" ] && [ -n "$(tail -c 1 "$out/metrics.jsonl")" ]; then
      fail "$name, alloc:$n: metrics.jsonl ends in a partial line"; bad=$((bad + 1))
    fi
    [ $bad -ge 5 ] && { fail "$name: stopped after 5 failures"; return; }
    n=$((n + stride))
    [ $n -gt 5000 ] && { fail "$name: still failing at alloc:$n"; return; }
  done
  [ $bad -eq 0 ] && ok
  # The hook took effect (the model, its slots, the optimizer and the steps' scratch: dozens of points).
  [ $points -ge $((40 / stride)) ] && ok || fail "$name: only $points failure points (alloc:1 to alloc:$n): is the hook in place?"
  [ -n "$want" ] && [ "$(hash_of "$out")" = "$want" ] && ok \
    || fail "$name: the run past the last allocation, in the failed runs' --out, trains the reference weights ($(hash_of "$out"), want $want)"
}

sweep one-process 1 --threads 1
sweep pipeline 3 --threads 1 --stages 2 --pipeline 2bw --microbatches 2
sweep bf16-muon 4 --threads 2 --precision bf16 --optimizer muon --delay 2bw --ef 1 --stages 2
sweep soap 5 --threads 2 --optimizer soap
finish
