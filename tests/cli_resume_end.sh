#!/usr/bin/env bash
# A run's end and its checkpoints (issue "reliability, round two"):
# - a resume from the final checkpoint of a finished run changes nothing and says the run is complete;
# - a run killed right after its final save (NB_TRAIN_FAULT=after_save:N, a SIGKILL at that point) and
#   resumed as the stop message says gets the summary.json the uninterrupted run wrote (losses, weights),
#   as one process and as a 2-stage pipeline; a summary is never written with values no step measured;
# - --keep's pruning leaves either a whole checkpoint or nothing under a step_N name, also when killed
#   inside it (NB_TRAIN_FAULT=prune:0) or when a folder cannot be emptied, and a run clears the leftovers;
# - a divergence names the newest checkpoint whose weights proved finite, which `eval` finds finite, and
#   the newer ones as not to resume from;
# - --resume auto starts afresh without a checkpoint and resumes the newest with one (bitwise the
#   uninterrupted run), --resume latest resumes the newest and is refused without one or without --save-dir.
set -u
bin=${1:?usage: cli_resume_end.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"

small_corpus "$bin" "$work/data" || fail "prepare"
small=(--data "$work/data" --set n_layers=2 --set context=16 --batch 2 --threads 1 --quiet)
train() { "$bin" train "${small[@]}" "$@"; }
field() { sed -n "s/.*\"$2\": \\([^,]*\\),*\$/\\1/p" "$1/summary.json" | head -1; }
# The summary without the measured fields (a resumed run measures its own seconds and memory; a
# pipeline's stage times are checked apart).
untimed_summary() { grep -v '"seconds"\|"tokens_per_s"\|"pipeline"\|"memory"' "$1/summary.json"; }

# ---- --resume auto and latest: the save folder's newest checkpoint, or (auto) a fresh start without one
train --steps 6 --save-dir "$work/auto/save" --save-every 3 --out "$work/auto/out1" --resume auto > "$work/auto1.log" 2>&1 \
  && [ -d "$work/auto/save/step_000006" ] && ok || fail "--resume auto on an empty --save-dir starts afresh: $(tail -2 "$work/auto1.log")"
rm -rf "$work/auto/save/step_000006"    # as if stopped after step 3's checkpoint
train --steps 6 --save-dir "$work/auto/save" --save-every 3 --out "$work/auto/out2" --resume auto > "$work/auto2.log" 2>&1 \
  && grep -q "its newest complete checkpoint is $work/auto/save/step_000003" "$work/auto2.log" && ok \
  || fail "--resume auto resumes the newest checkpoint: $(tail -2 "$work/auto2.log")"
[ -n "$(field "$work/auto/out2" weights_hash)" ] && [ "$(field "$work/auto/out2" weights_hash)" = "$(field "$work/auto/out1" weights_hash)" ] \
  && ok || fail "--resume auto: weights $(field "$work/auto/out2" weights_hash), the uninterrupted run's $(field "$work/auto/out1" weights_hash)"
train --steps 9 --save-dir "$work/auto/save" --save-every 3 --out "$work/auto/out3" --resume latest > "$work/latest.log" 2>&1 \
  && grep -q "its newest complete checkpoint is $work/auto/save/step_000006" "$work/latest.log" && ok \
  || fail "--resume latest: $(tail -2 "$work/latest.log")"
train --steps 3 --save-dir "$work/auto/empty" --out "$work/auto/out4" --resume latest > /dev/null 2> "$work/latest_empty.err"
rc=$?
[ $rc -eq 2 ] && grep -q "holds no checkpoint (step_NNNNNN) yet" "$work/latest_empty.err" && ok \
  || fail "--resume latest without a checkpoint: exit $rc: $(cat "$work/latest_empty.err")"
train --steps 3 --out "$work/auto/out5" --resume auto > /dev/null 2> "$work/auto_nosave.err"
rc=$?
[ $rc -eq 2 ] && grep -q "needs --save-dir" "$work/auto_nosave.err" && ok || fail "--resume auto without --save-dir: exit $rc"

# ---- the finished run, resumed from its final checkpoint: nothing changes
train --steps 6 --save-dir "$work/a/save" --save-every 3 --out "$work/a/out" --export "$work/a/hf" > /dev/null 2>&1 \
  || fail "the reference run"
cp -r "$work/a" "$work/a.before"
train --steps 6 --save-dir "$work/a/save" --save-every 3 --out "$work/a/out" --export "$work/a/hf" \
  --resume "$work/a/save/step_000006" > "$work/a.log" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "the run is already complete: --resume $work/a/save/step_000006 is at its last step, 6; nothing to do, nothing changed (its results: $work/a/out/summary.json)" "$work/a.log" \
  && ok || fail "a resume of a finished run says it is complete (exit $rc): $(cat "$work/a.log")"
diff -r "$work/a.before" "$work/a" > /dev/null && ok || fail "a resume of a finished run changed its folders: $(diff -r "$work/a.before" "$work/a" | head -5)"
# The same through --resume SAVE_DIR (its newest checkpoint, the final one).
train --steps 6 --save-dir "$work/a/save" --save-every 3 --out "$work/a/out" --resume "$work/a/save" > "$work/a2.log" 2>&1 \
  && grep -q "already complete" "$work/a2.log" && diff -r "$work/a.before" "$work/a" > /dev/null && ok \
  || fail "--resume SAVE_DIR of a finished run: $(cat "$work/a2.log")"
# Past the last step (--steps smaller than the checkpoint's): refused as before, changing nothing.
expect_error "a resume past the last step refused" "past this run's 5 steps" \
  train --steps 5 --save-dir "$work/a/save" --out "$work/a/out" --resume "$work/a/save/step_000006"
diff -r "$work/a.before" "$work/a" > /dev/null && ok || fail "the refused resume past the last step changed the run's folders"

# ---- killed right after the final save, then resumed as the message recommends
for mode in one-process pipeline; do
  flags=(); [ $mode = pipeline ] && flags=(--stages 2 --pipeline 2bw --microbatches 2)
  d=$work/k-$mode
  train "${flags[@]}" --steps 6 --save-dir "$d/ref-save" --save-every 3 --out "$d/ref" --export "$d/ref-hf" > /dev/null 2>&1 \
    || fail "$mode: the uninterrupted run"
  NB_TRAIN_FAULT=after_save:6 train "${flags[@]}" --steps 6 --save-dir "$d/save" --save-every 3 --out "$d/out" \
    --export "$d/hf" > /dev/null 2>&1
  rc=$?
  [ $rc -eq 137 ] && [ -d "$d/save/step_000006" ] && [ ! -e "$d/out/summary.json" ] && ok \
    || fail "$mode: the fault hook kills the run after its final save, before its summary (exit $rc; $(ls "$d/out" "$d/save" | tr '\n' ' '))"
  train "${flags[@]}" --steps 6 --save-dir "$d/save" --save-every 3 --out "$d/out" --export "$d/hf" --resume "$d/save" \
    > "$d/log" 2>&1 || fail "$mode: the resume after the final save: $(cat "$d/log")"
  grep -q "summary.json was missing .*: rebuilt from" "$d/log" && ok || fail "$mode: the rebuild is said: $(cat "$d/log")"
  diff <(untimed_summary "$d/ref") <(untimed_summary "$d/out") > /dev/null && ok \
    || fail "$mode: the rebuilt summary equals the uninterrupted run's but for its timing: $(diff <(untimed_summary "$d/ref") <(untimed_summary "$d/out"))"
  grep -q '"peak_rss_bytes": null' "$d/out/summary.json" && ok || fail "$mode: no peak memory of the run in the rebuilt summary"
  s=$(field "$d/out" seconds); tps=$(field "$d/out" tokens_per_s)
  awk -v s="$s" -v t="$tps" 'BEGIN { exit !(s > 0 && t > 0) }' && ok || fail "$mode: measured timing in the rebuilt summary ($s s, $tps tokens/s)"
  cmp -s "$d/ref-hf/model.safetensors" "$d/hf/model.safetensors" && ok || fail "$mode: the export written by the resume"
  if [ $mode = pipeline ]; then   # the kind is kept; no stage times, which the resume did not measure
    grep -q '"pipeline": {"kind": "2bw", "transport": "threads"' "$d/out/summary.json" && ! grep -q '"busy_s"' "$d/out/summary.json" \
      && ok || fail "$mode: the rebuilt summary's pipeline section: $(grep pipeline "$d/out/summary.json")"
  fi
  "$bin" report "$d/out" --out "$d/report.html" > /dev/null 2>&1 && ok || fail "$mode: report reads the rebuilt run"
done
# A summary.json is never written with values no step measured: with the metrics gone it is refused.
d=$work/k-one-process
rm "$d/out/summary.json" "$d/out/metrics.jsonl"
expect_error "no summary without the metrics to rebuild it from" "holds neither the run's summary.json nor the metrics.jsonl" \
  train --steps 6 --save-dir "$d/save" --save-every 3 --out "$d/out" --resume "$d/save"
[ ! -e "$d/out/summary.json" ] && ok || fail "the refused rebuild wrote a summary"

# ---- --keep: a kill inside the pruning leaves whole checkpoints only, and the next run clears the rest
complete_checkpoints() {  # every step_N folder of $1 holds its state and its model
  local c
  for c in "$1"/step_[0-9]*; do
    case "$c" in *.partial|*.deleting) continue ;; esac
    [ -f "$c/state.safetensors" ] && [ -f "$c/model.safetensors" ] || { echo "$c: $(ls "$c" | tr '\n' ' ')"; return 1; }
  done
}
NB_TRAIN_FAULT=prune:0 train --steps 6 --save-dir "$work/p/save" --save-every 1 --keep 1 --out "$work/p/out" > /dev/null 2>&1
rc=$?
[ $rc -eq 137 ] && ls -d "$work/p/save"/step_*.deleting > /dev/null 2>&1 && ok \
  || fail "the fault hook kills the run inside a pruning (exit $rc; $(ls "$work/p/save" | tr '\n' ' '))"
bad=$(complete_checkpoints "$work/p/save") && ok || fail "a kill inside the pruning left a broken checkpoint under its name: $bad"
newest=$(ls -d "$work/p/save"/step_[0-9]* | grep -v '\.deleting$\|\.partial$' | sort | tail -1)
train --steps 6 --save-dir "$work/p/save" --save-every 1 --keep 1 --out "$work/p/out" --resume "$newest" > /dev/null 2>&1 \
  || fail "the resume after a kill inside the pruning"
ls -d "$work/p/save"/*.deleting > /dev/null 2>&1 && fail "the resumed run cleared the .deleting leftover: $(ls "$work/p/save")" || ok
# A checkpoint folder that cannot be emptied (a file of the user's in it) leaves its committed name all
# the same: a name that remains is a whole checkpoint.
train --steps 2 --save-dir "$work/q/save" --save-every 1 --out "$work/q/out" > /dev/null 2>&1 || fail "the run to prune"
echo "mine" > "$work/q/save/step_000001/notes.txt"
train --steps 4 --save-dir "$work/q/save" --save-every 1 --keep 1 --out "$work/q/out" --resume "$work/q/save/step_000002" \
  > /dev/null 2>&1 || fail "the run that prunes a folder with a file of the user's"
bad=$(complete_checkpoints "$work/q/save") && ok || fail "pruning a folder it cannot empty left a broken checkpoint: $bad"
[ -f "$work/q/save/step_000001.deleting/notes.txt" ] && ok || fail "the user's file is kept: $(ls -R "$work/q/save" | head)"

# ---- a divergence names a checkpoint that is good (Muon at lr 1e4 under 2BW: the newest checkpoints hold
# finite weights whose validation loss is not finite)
for mode in "--delay 2bw --stages 2" "--pipeline 2bw --stages 2 --microbatches 2"; do
  rm -rf "$work/dv"
  # shellcheck disable=SC2086
  train --steps 40 --lr 1e4 --optimizer muon --schedule constant --save-dir "$work/dv" --save-every 1 --keep 1 $mode \
    > "$work/dv.log" 2>&1 && fail "($mode) the run was to diverge"
  named=$(sed -n 's/.*resume from \([^,]*\), the newest checkpoint whose weights proved finite.*/\1/p' "$work/dv.log")
  [ -n "$named" ] && "$bin" eval --checkpoint "$named" --data "$work/data" --batch 2 --batches 2 > "$work/eval" 2>&1 \
    && grep -q "val loss [0-9]" "$work/eval" && ok \
    || fail "($mode) the checkpoint the divergence names evaluates finite: '$named': $(cat "$work/dv.log" "$work/eval" 2>/dev/null)"
  for c in "$work"/dv/step_[0-9]*; do
    [ "$c" = "$named" ] && continue
    "$bin" eval --checkpoint "$c" --data "$work/data" --batch 2 --batches 2 > /dev/null 2>&1 && continue
    grep -q "not .*$(basename "$c").*without a finite validation loss" "$work/dv.log" && ok \
      || fail "($mode) a kept checkpoint whose validation loss is not finite ($c) is named as not to resume from: $(cat "$work/dv.log")"
  done
done
finish
