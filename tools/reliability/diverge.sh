#!/usr/bin/env bash
# Divergence loop (issue 13; figures in RELIABILITY.md): runs that are made to diverge (learning rates
# 1e2..1e6, every optimizer, one process, its 2BW delay simulation and a real 2BW pipeline), each saving
# every step with --keep 1, and counts how many lost their last good checkpoint: a run loses it when none
# of the checkpoints it kept evaluates to a finite validation loss with `nobubble eval` exiting 0.
# Also counts runs that exited 0 or without naming the step, and kept checkpoints with a non-finite loss
# that eval did not refuse.
# Usage: tools/reliability/diverge.sh [path/to/nobubble]   (default build/nobubble)
set -u
bin=${1:-build/nobubble}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/../../tests/support/small_corpus.sh"
small_corpus "$bin" "$work/data" || { echo "prepare failed"; exit 1; }
runs=0 diverged=0 lost=0 silent=0 nan_accepted=0 never_saved=0 named_bad=0 named=0
for mode in "" "--delay 2bw --stages 2" "--pipeline 2bw --stages 2 --microbatches 2"; do
  for opt in adamw sgd lion muon normuon adan mars soap; do
    for lr in 1e2 1e3 1e4 1e6; do
      runs=$((runs + 1))
      rm -rf "$work/ck"
      # shellcheck disable=SC2086
      "$bin" train --data "$work/data" --set n_layers=2 --set context=16 --batch 2 --steps 40 --lr "$lr" --optimizer "$opt" \
        --schedule constant --save-dir "$work/ck" --save-every 1 --keep 1 --quiet $mode > "$work/log" 2>&1
      rc=$?
      if [ $rc -eq 0 ]; then continue; fi   # this one did not diverge within 40 steps
      diverged=$((diverged + 1))
      grep -q "became .* at step [0-9]" "$work/log" || { silent=$((silent + 1)); echo "no step named ($opt $lr $mode): $(tail -1 "$work/log")"; }
      # The checkpoint the message says to resume from (this code's wording, or the one before it) must
      # evaluate to a finite loss.
      pick=$(sed -n 's/.*resume from \([^,]*\), the newest checkpoint whose weights proved finite.*/\1/p; s/.*the newest being \([^ ]*\) (resume from it.*/\1/p' "$work/log" | head -1)
      if [ -n "$pick" ]; then
        named=$((named + 1))
        if ! "$bin" eval --checkpoint "$pick" --data "$work/data" --batch 2 --batches 2 2>/dev/null | grep -q "val loss [0-9]"; then
          named_bad=$((named_bad + 1)); echo "named a checkpoint that is not finite ($opt $lr $mode): $pick"
        fi
      fi
      kept=$(ls "$work/ck" 2>/dev/null | grep -v 'partial\|deleting')
      [ -z "$kept" ] && { never_saved=$((never_saved + 1)); continue; }
      good=0
      for c in $kept; do
        if "$bin" eval --checkpoint "$work/ck/$c" --data "$work/data" --batch 2 --batches 2 > "$work/eval" 2>&1; then
          if grep -q "val loss [0-9]" "$work/eval"; then good=1; else nan_accepted=$((nan_accepted + 1)); fi
        fi
      done
      [ $good -eq 1 ] || { lost=$((lost + 1)); echo "lost ($opt $lr $mode): kept $(echo $kept)"; }
    done
  done
done
echo "runs $runs, diverged $diverged, last good checkpoint lost $lost, diverged before any save $never_saved, exit without naming the step $silent, non-finite loss accepted by eval $nan_accepted, checkpoint named to resume from $named, of which not finite $named_bad"
