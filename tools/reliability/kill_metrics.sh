#!/usr/bin/env bash
# Stress loop (not part of ctest: minutes): runs killed with kill -9 at pseudo-random moments, each resumed
# from its newest checkpoint into the same --out, then metrics.jsonl checked. Once for the one-process
# trainer, once for a 2-stage 2BW pipeline on threads; a run saves every step (--save-every 1) so that
# kills often land just before or after a checkpoint's commit.
# A try fails when the final metrics.jsonl does not hold every step 1..N exactly once, in order, or when
# its lines differ from an uninterrupted run's (timing fields aside), or when the resumed run's
# summary.json lacks the uninterrupted run's final losses and weights hash (a kill after the final save
# leaves a resume with nothing to train: its summary must still be the run's, not nulls). Prints, per mode: tries, runs
# actually killed, failures, and the metrics lines lost in all.
# With KEEP (5th argument, e.g. 1) the runs prune with --keep KEEP, so that kills land inside removals too.
# After each kill, every step_N folder must be a whole checkpoint (its state and model files; a removal
# in progress is a step_N.deleting folder): a broken one under its committed name counts as a failure.
# Usage: tools/reliability/kill_metrics.sh path/to/nobubble [tries per mode (100)] [steps (12)] [modes ("one-process pipeline")] [keep (0)]
set -u
bin=${1:?usage: reliability/kill_metrics.sh path/to/nobubble [tries] [steps] [modes] [keep]}
tries=${2:-100}
steps=${3:-12}
modes=${4:-one-process pipeline}
keep=${5:-0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/../../tests/support/small_corpus.sh"
small_corpus "$bin" "$work/data" || { echo "prepare failed"; exit 1; }
small=(--data "$work/data" --set n_layers=2 --set context=16 --batch 2 --threads 1 --quiet --steps "$steps")
untimed() { sed 's/"time_s": [^,]*, "tokens_per_s": [^,]*, //' "$1/metrics.jsonl"; }
results() { grep '"final_train_loss"\|"final_val_loss"\|"weights_hash"' "$1/summary.json" 2>/dev/null; }
want_steps=$(seq 1 "$steps" | tr '\n' ' ')
total_fail=0
for mode in $modes; do
  flags=(); [ $mode = pipeline ] && flags=(--stages 2 --pipeline 2bw --microbatches 2)
  [ "$keep" -gt 0 ] && flags+=(--keep "$keep")
  "$bin" train "${small[@]}" "${flags[@]}" --save-dir "$work/ref/save" --save-every 1 --out "$work/ref/out" > /dev/null 2>&1 \
    || { echo "$mode: the uninterrupted run failed"; exit 1; }
  untimed "$work/ref/out" > "$work/ref.lines"
  results "$work/ref/out" > "$work/ref.results"
  TIMEFORMAT=%R
  elapsed=$( { time "$bin" train "${small[@]}" "${flags[@]}" --save-dir "$work/t/save" --save-every 1 --out "$work/t/out" > /dev/null 2>&1; } 2>&1 )
  span_ms=$(awk -v s="${elapsed:-1}" 'BEGIN { m = int(s * 1000); print (m < 100 ? 100 : m) }')
  rm -rf "$work/ref" "$work/t"
  seed=7919 kills=0 fails=0 lost=0 broken=0 summaries=0
  for trial in $(seq 1 "$tries"); do
    seed=$(( (seed * 1103515245 + 12345) % 2147483648 ))
    ms=$(( seed % span_ms ))
    d="$work/try"; rm -rf "$d"; mkdir -p "$d"
    "$bin" train "${small[@]}" "${flags[@]}" --save-dir "$d/save" --save-every 1 --out "$d/out" > /dev/null 2>&1 &
    pid=$!
    sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
    kill -9 $pid 2>/dev/null && kills=$((kills + 1))
    wait $pid 2>/dev/null
    for c in "$d"/save/step_[0-9]*; do
      case "$c" in *.partial|*.deleting|*'[0-9]*') continue ;; esac
      if ! { [ -f "$c/state.safetensors" ] || [ -f "$c/state.safetensors.index.json" ]; } \
         || ! ls "$c"/model*.safetensors > /dev/null 2>&1; then
        broken=$((broken + 1)); echo "$mode try $trial: broken checkpoint under its name: $c: $(ls "$c" | tr '\n' ' ')"
      fi
    done
    newest=$(ls -d "$d"/save/step_[0-9]* 2>/dev/null | grep -v '\.partial$\|\.deleting$' | sort | tail -1)
    # killed before its first checkpoint: start afresh over the killed run's metrics.jsonl (--force)
    resume=(--force); [ -n "$newest" ] && resume=(--resume "$newest")
    if ! "$bin" train "${small[@]}" "${flags[@]}" --save-dir "$d/save" --save-every 1 --out "$d/out" "${resume[@]}" \
         > "$d/log" 2>&1; then
      fails=$((fails + 1)); echo "$mode try $trial: the resumed run failed: $(tail -1 "$d/log")"; continue
    fi
    got=$(sed -n 's/^{"step": \([0-9]*\),.*/\1/p' "$d/out/metrics.jsonl" | tr '\n' ' ')
    missing=0
    for s in $(seq 1 "$steps"); do grep -q "^{\"step\": $s," "$d/out/metrics.jsonl" || missing=$((missing + 1)); done
    if ! diff -q "$work/ref.results" <(results "$d/out") > /dev/null; then
      summaries=$((summaries + 1)); echo "$mode try $trial (resumed from '${newest:-nothing}'): summary $(results "$d/out" | tr '\n' ' ')"
    fi
    if [ "$got" != "$want_steps" ] || ! diff -q "$work/ref.lines" <(untimed "$d/out") > /dev/null; then
      fails=$((fails + 1)); lost=$((lost + missing))
      echo "$mode try $trial (killed after ${ms} ms, resumed from '${newest:-nothing}'): steps $got"
    fi
  done
  echo "RESULT $mode (--keep $keep): $tries tries, $kills killed, $fails failures, $lost metrics lines lost, $broken broken checkpoints under a step_N name, $summaries summaries not the run's (run span ${span_ms} ms, $steps steps)"
  total_fail=$((total_fail + fails + broken + summaries))
done
[ $total_fail -eq 0 ]
