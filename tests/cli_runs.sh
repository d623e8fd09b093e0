#!/usr/bin/env bash
# Guard rails on runs (issue 17): a --out or --save-dir that holds an earlier run is refused (exit 2)
# unless --force (which removes that run's files and nothing else) or --resume; --resume SAVE_DIR picks
# the newest complete checkpoint, saying which it skipped and why; sample refuses a tokenizer whose
# vocabulary differs from the model's; --data finds llm.c's shard names.
set -u
bin=${1:?usage: cli_runs.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
small_corpus "$bin" "$work/data" && ok || fail "prepare small text"
small=(--data "$work/data" --set n_layers=2 --set context=16 --batch 2 --threads 1 --quiet --eval-batches 1)
train() { "$bin" train "${small[@]}" "$@" > /dev/null; }
# expect_usage "what" "pattern" command...: exit status 2 and the pattern in stderr
expect_usage() {
  local what=$1 pattern=$2; shift 2
  "$@" >"$work/out" 2>"$work/err"; local rc=$?
  if [ $rc -ne 2 ]; then fail "$what: exit $rc, expected 2: $(cat "$work/err")"; return; fi
  if grep -q -- "$pattern" "$work/err"; then ok; else fail "$what: stderr lacks '$pattern': $(cat "$work/err")"; fi
}
hash_of() { sed -n 's/.*"weights_hash": "\([0-9a-f]*\)".*/\1/p' "$1/summary.json"; }

# ---- --out: an earlier run is refused, an empty folder is fine, --force starts afresh
check "a first run" train --steps 2 --out "$work/R"
expect_usage "a second run on the same --out" \
  "--out $work/R already holds a run (summary.json, metrics.jsonl, train_config.json): give --force to start afresh" \
  train --steps 2 --out "$work/R"
check "the refused run left the first run's summary" test -s "$work/R/summary.json"
mkdir "$work/E"
check "an existing empty --out" train --steps 2 --out "$work/E"
# The earlier run with an export in R/hf, and files of the user's beside and inside it.
check "a run with an export" train --steps 2 --seed 7 --out "$work/R" --force --export "$work/R/hf"
echo mine > "$work/R/notes.txt"
echo mine > "$work/R/hf/mine.txt"
expect_usage "an --out holding an export" "hf/" train --steps 2 --out "$work/R"
check "--force" train --steps 3 --out "$work/R" --force
check "--force: the new run's metrics only" test "$(wc -l < "$work/R/metrics.jsonl")" -eq 3
check "--force: the old export's files removed" test ! -e "$work/R/hf/model.safetensors" -a ! -e "$work/R/hf/config.json"
check "--force: a file of the user's in hf/ kept" test -s "$work/R/hf/mine.txt"
check "--force: a file of the user's in --out kept" test -s "$work/R/notes.txt"
check "--resume into an --out that holds a run" train --steps 2 --out "$work/E2" --save-dir "$work/E2s"
check "... continues it" train --steps 4 --out "$work/E2" --resume "$work/E2s/step_000002"

# ---- --save-dir holding checkpoints: refused without --resume or --force; --force removes them
expect_usage "a --save-dir holding checkpoints" "--save-dir $work/E2s already holds a run (1 step_NNNNNN" \
  train --steps 2 --save-dir "$work/E2s"
echo mine > "$work/E2s/step_000002/mine.txt"
check "--force on a --save-dir" train --steps 1 --save-dir "$work/E2s" --force
check "--force: the old checkpoint's files removed, the user's kept" \
  test ! -e "$work/E2s/step_000002/state.safetensors" -a -s "$work/E2s/step_000002/mine.txt" -a -e "$work/E2s/step_000001/state.safetensors"

# ---- --resume SAVE_DIR: the newest complete checkpoint
# The reference: one uninterrupted run of 6 steps (the same weights as any resume, bitwise).
check "an uninterrupted run" train --steps 6 --out "$work/full"
check "a run saving steps 2, 4, 6" train --steps 6 --save-every 2 --save-dir "$work/S"
rm "$work/S/step_000006/state.safetensors"                             # incomplete: its marker gone
mkdir "$work/S/step_000008.partial" && cp "$work/S/step_000004/"* "$work/S/step_000008.partial/"  # a killed save
mkdir "$work/S/step_000010" && cp "$work/S/step_000004/"* "$work/S/step_000010/"
printf 'garbage' > "$work/S/step_000010/state.safetensors"            # corrupt
"$bin" train "${small[@]}" --steps 6 --resume "$work/S" --out "$work/res" > "$work/res.log" 2>&1
grep_log() { grep -q -- "$1" "$work/res.log" && ok || fail "resume from a save folder: log lacks '$1': $(cat "$work/res.log")"; }
grep_log "skipping $work/S/step_000010: unreadable"
grep_log "skipping $work/S/step_000006: incomplete"
grep_log "its newest complete checkpoint is $work/S/step_000004"
check "no .partial folder taken" test "$(grep -c partial "$work/res.log")" -eq 0
want=$(hash_of "$work/full"); got=$(hash_of "$work/res")
[ -n "$want" ] && [ "$want" = "$got" ] && ok || fail "resumed from the save folder: weights $got, the uninterrupted run's $want"
check "the resumed run has the metrics of steps 5 and 6" test "$(wc -l < "$work/res/metrics.jsonl")" -eq 2
mkdir -p "$work/B/step_000003"
expect_usage "a save folder without a complete checkpoint" \
  "--resume $work/B: none of its 1 step_NNNNNN folders is a complete checkpoint" train --steps 4 --resume "$work/B"

# ---- sample: the tokenizer's vocabulary must be the model's
check "an export" train --steps 1 --out "$work/X" --export "$work/X/hf"
"$bin" prepare --input "$work/text.txt" --vocab 280 --val-fraction 0.1 --out "$work/d280" > /dev/null 2>&1 && ok || fail "prepare vocab 280"
expect_usage "sample with a smaller tokenizer" \
  "the tokenizer $work/d280/tokenizer.json has 280 tokens but the model $work/X/hf/config.json has vocab_size 300" \
  "$bin" sample --checkpoint "$work/X/hf" --tokenizer "$work/d280/tokenizer.json" --prompt "In the" --tokens 2
check "sample with the model's own tokenizer" "$bin" sample --checkpoint "$work/X/hf" --prompt "In the" --tokens 2 > /dev/null
# ---- --data finds llm.c's shard names: the same bytes under its names give the same run, bitwise
check "a reference run on prepare's names" train --steps 3 --eval-every 3 --out "$work/names/ref"
mkdir -p "$work/ts" "$work/fw" "$work/both"
for d in ts fw both; do cp "$work/data/tokenizer.json" "$work/$d/"; done
cp "$work/data/"*_train_000000.bin "$work/ts/tiny_shakespeare_train.bin"
cp "$work/data/"*_val_000000.bin "$work/ts/tiny_shakespeare_val.bin"
cp "$work/data/"*_train_000000.bin "$work/fw/fineweb_train_000001.bin"
cp "$work/data/"*_val_000000.bin "$work/fw/fineweb_val_000000.bin"
cp "$work/data/"*_train_000000.bin "$work/data/"*_val_000000.bin "$work/both/"
printf 'not a shard' > "$work/both/tiny_shakespeare_train.bin"   # the numbered names win, as before
for d in ts fw both; do
  "$bin" train "${small[@]}" --data "$work/$d" --steps 3 --eval-every 3 --out "$work/names/$d" > "$work/names.log" 2>&1 \
    || fail "--data with $d's names: $(cat "$work/names.log")"
  want=$(hash_of "$work/names/ref"); got=$(hash_of "$work/names/$d")
  [ -n "$want" ] && [ "$want" = "$got" ] && ok || fail "--data $d: weights '$got', prepare's names gave $want"
  check "--data $d: validation shards found" grep -q '"final_val_loss": [0-9]' "$work/names/$d/summary.json"
done
expect_error "--data with no shard of either form" "no shard files match '$work/E/\*_train_\*.bin'" \
  "$bin" train "${small[@]}" --data "$work/E" --steps 1
# ---- an MPI launcher that does not give its world size (mpirun itself: tests/cli_mpirun.sh)
expect_usage "a launcher without a world size" "does not give the number of processes" \
  env PMIX_RANK=0 "$bin" train "${small[@]}" --pipeline 2bw --steps 1
expect_usage "a world size that is not a count" "does not give the number of processes" \
  env OMPI_COMM_WORLD_SIZE=two "$bin" train "${small[@]}" --pipeline 2bw --steps 1
finish
