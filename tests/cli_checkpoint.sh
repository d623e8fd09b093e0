#!/usr/bin/env bash
# Checkpoints from the command line: resuming with another split and another configuration, a full disk
# while saving (the previous checkpoint stays intact and is named), runs killed with SIGKILL at varied
# moments (the newest complete checkpoint always resumes to the uninterrupted run's weights), metrics.jsonl
# after a resume into a crashed run's folder (each step once), and corrupt model.safetensors /
# state.safetensors / config.json (a flipped byte of tensor data too) refused with messages naming the problem.
set -u
bin=${1:?usage: cli_checkpoint.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"

small_corpus "$bin" "$work/data" || fail "prepare"
# A small model: 2 layers so that it splits in two; one thread so that runs share the machine well.
small=(--data "$work/data" --set n_layers=2 --set context=16 --batch 2 --threads 1 --quiet)
train() { "$bin" train "${small[@]}" "$@"; }
hash_of() { sed -n 's/.*"weights_hash": "\([0-9a-f]*\)".*/\1/p' "$1/summary.json"; }
# patch FILE OLD NEW: overwrites the first OLD in FILE with NEW (the same length), in place.
patch() {
  local at
  at=$(grep -obUa -m1 -F -- "$2" "$1" | head -1 | cut -d: -f1)
  [ -n "$at" ] && printf '%s' "$3" | dd of="$1" bs=1 seek="$at" conv=notrunc status=none
}

# ---- another split, another configuration
train --steps 6 --stages 2 --save-dir "$work/s2" --save-every 3 --out "$work/whole" > /dev/null 2>&1 || fail "2-stage run"
train --steps 6 --stages 1 --resume "$work/s2/step_000003" --out "$work/resplit" > "$work/resplit.log" 2>&1 \
  || fail "resume with 1 stage: $(cat "$work/resplit.log")"
[ -n "$(hash_of "$work/whole")" ] && [ "$(hash_of "$work/whole")" = "$(hash_of "$work/resplit")" ] && ok \
  || fail "2 stages resumed with 1 equals the uninterrupted run bitwise"
# At the last step there is nothing to train: a fresh --out has no metrics to make a summary from
# (tests/cli_resume_end.sh has the run's own --out).
expect_error "a resume at the last step into a fresh --out refused" "nothing to train, and --out $work/atend holds neither" \
  train --steps 6 --stages 2 --resume "$work/s2/step_000006" --out "$work/atend"
[ ! -e "$work/atend/summary.json" ] && [ ! -e "$work/atend/metrics.jsonl" ] && ok \
  || fail "the refused resume at the last step wrote nothing: $(ls "$work/atend" 2>&1)"
expect_error "another --lr refused, naming both values" "--lr 0.002 (checkpoint: 0.001)" \
  train --steps 6 --lr 0.002 --resume "$work/s2/step_000003"
train --steps 6 --lr 0.002 --resume "$work/s2/step_000003" --override > /dev/null 2> "$work/override.err" \
  && grep -q "warning: --resume .* --override: continuing with --lr 0.002 (checkpoint: 0.001)" "$work/override.err" && ok \
  || fail "--override: $(cat "$work/override.err")"
expect_error "another model refused even with --override" "model n_layers 1 (checkpoint: 2)" \
  "$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 --steps 6 --resume "$work/s2/step_000003" --override
expect_error "--override without --resume" "--override needs --resume" train --steps 2 --override

# ---- metrics.jsonl after a crash: the run went on past its checkpoint at step 3 (its lines of steps 4..6
# are there, then a line cut by kill -9); resumed from step 3, each step has one line, equal to the
# uninterrupted run's but for the timings. Once for each trainer (one process, and a real pipeline).
steps_of() { sed -n 's/^{"step": \([0-9]*\),.*/\1/p' "$1/metrics.jsonl" | tr '\n' ' '; }
untimed() { sed 's/"time_s": [^,]*, "tokens_per_s": [^,]*, //' "$1/metrics.jsonl"; }
train --steps 6 --stages 2 --pipeline 2bw --microbatches 2 --save-dir "$work/p2" --save-every 3 --out "$work/pwhole" > /dev/null 2>&1 \
  || fail "2-stage pipeline run"
for kind in sim pipe; do
  if [ $kind = sim ]; then src=whole; save=s2; extra=(); else src=pwhole; save=p2; extra=(--pipeline 2bw --microbatches 2); fi
  rm -rf "$work/again"; cp -r "$work/$src" "$work/again"
  printf '{"step": 7, "train_lo' >> "$work/again/metrics.jsonl"
  train --steps 6 --stages 2 "${extra[@]}" --resume "$work/$save/step_000003" --out "$work/again" > "$work/again.log" 2>&1 \
    || fail "$kind: resume into the crashed run's folder: $(cat "$work/again.log")"
  [ "$(steps_of "$work/again")" = "1 2 3 4 5 6 " ] && ok \
    || fail "$kind: metrics.jsonl has each step once, in order: steps $(steps_of "$work/again")"
  check "$kind: metrics.jsonl equals the uninterrupted run's (timings aside)" \
    diff <(untimed "$work/$src") <(untimed "$work/again")
  check "$kind: no temporary left beside it" test -z "$(find "$work/again" -name '*.tmp.*')"
done

# ---- a full disk: a file-size limit (RLIMIT_FSIZE; nobubble ignores SIGXFSZ, so the write fails with
# EFBIG as on a full disk) that model.safetensors (1 MB) fits under and state.safetensors (3 MB) does not.
train --steps 4 --save-dir "$work/full" --save-every 2 > /dev/null 2>&1 || fail "run before the full disk"
cp -r "$work/full" "$work/full.before"
(ulimit -f 2048; exec "$bin" train "${small[@]}" --steps 6 --save-dir "$work/full" --save-every 2 --resume "$work/full/step_000002") > "$work/full.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] && ok || fail "a failed save exits non-zero (not killed by a signal): rc $rc"
check "the message names the folder and the intact previous checkpoint" grep -q \
  "checkpoint $work/full/step_000004 not saved; the previous checkpoint at $work/full/step_000002 is intact" "$work/full.log"
check "... and why: $(cat "$work/full.log")" grep -q "File too large" "$work/full.log"
check "every checkpoint is as it was (step 4 of the earlier run too)" diff -r "$work/full.before" "$work/full"
check "no partial folder or temporary left" test -z "$(find "$work/full" -name '*.partial' -o -name '*.tmp.*')"
(ulimit -f 2048; exec "$bin" train "${small[@]}" --steps 2 --save-dir "$work/full2") > "$work/full2.log" 2>&1
[ $? -ne 0 ] && grep -q "step_000002 not saved, and this run has no earlier checkpoint" "$work/full2.log" && ok \
  || fail "a first save that fails: $(cat "$work/full2.log")"
check "nothing left of it" test -z "$(ls -A "$work/full2")"

# The same for a pipeline: a stage's part that does not fit fails the save; the first stage names the
# intact previous checkpoint and clears the partial folder.
pipe2=(--stages 2 --pipeline 2bw --microbatches 2)
train --steps 2 "${pipe2[@]}" --save-dir "$work/pfull" > /dev/null 2>&1 || fail "pipeline run before the full disk"
(ulimit -f 1024; exec "$bin" train "${small[@]}" "${pipe2[@]}" --steps 4 --save-dir "$work/pfull" --save-every 2 \
  --resume "$work/pfull/step_000002") > "$work/pfull.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "checkpoint $work/pfull/step_000004 not saved; the previous checkpoint at $work/pfull/step_000002 is intact" "$work/pfull.log" &&
  grep -q "write failed" "$work/pfull.log" && ok || fail "a pipeline part that does not fit (rc $rc): $(tail -2 "$work/pfull.log")"
check "nothing left of the failed pipeline save" test "$(ls "$work/pfull")" = "step_000002"

# ---- SIGKILL at deterministic pseudo-random moments of a run saving every step: every step_N folder is
# complete, and the newest resumes to the uninterrupted run's weights. Once in one process, once as a
# 2-stage pipeline (each stage writes its part, the first completes the folder: a kill can fall between).
# complete DIR: a one-process checkpoint's files, or a pipeline's indexes and every part they name.
complete() {
  if [ -e "$1/state.safetensors.index.json" ]; then
    [ -s "$1/model.safetensors.index.json" ] && [ -s "$1/config.json" ] && [ -s "$1/state-00001-of-00002.safetensors" ] &&
      [ -s "$1/state-00002-of-00002.safetensors" ] && [ -s "$1/model-00001-of-00002.safetensors" ] &&
      [ -s "$1/model-00002-of-00002.safetensors" ]
  else
    [ -s "$1/state.safetensors" ] && [ -s "$1/model.safetensors" ] && [ -s "$1/config.json" ]
  fi
}
steps=16
kill_trials() {
  local mode=$1; shift
  local flags=("$@")
  train --steps $steps "${flags[@]}" --save-dir "$work/ref" --save-every 1 --out "$work/ref" > /dev/null 2>&1 || fail "$mode: uninterrupted run"
  local want; want=$(hash_of "$work/ref")
  # A kill after the final save leaves nothing to train: that checkpoint's model is compared instead.
  local last; last=$(printf 'step_%06d' $steps)
  rm -rf "$work/ref_model"; mkdir -p "$work/ref_model"
  cp "$work/ref/$last"/model*.safetensors "$work/ref_model/"; rm -rf "$work/ref"
  # The kill moments spread over the span of one such run (this machine's speed).
  TIMEFORMAT=%R
  local elapsed; elapsed=$( { time train --steps $steps "${flags[@]}" --save-dir "$work/timing" --save-every 1 > /dev/null 2>&1; } 2>&1 )
  rm -rf "$work/timing"
  local span_ms; span_ms=$(awk -v s="${elapsed:-1}" 'BEGIN { m = int(s * 1000); print (m < 200 ? 200 : m) }')
  local seed=2024 kills=0 mid_save=0 trial ms d pid incomplete newest c
  for trial in $(seq 1 10); do
    seed=$(( (seed * 1103515245 + 12345) % 2147483648 ))
    ms=$(( seed % span_ms ))
    d="$work/crash$trial"; mkdir -p "$d"
    "$bin" train "${small[@]}" --steps $steps "${flags[@]}" --save-dir "$d/save" --save-every 1 > /dev/null 2>&1 &
    pid=$!
    sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
    kill -9 $pid 2>/dev/null && kills=$((kills + 1))
    wait $pid 2>/dev/null
    [ -n "$(find "$d/save" -name '*.partial' 2>/dev/null)" ] && mid_save=$((mid_save + 1))
    incomplete=""
    for c in "$d"/save/step_[0-9]*; do
      case "$c" in *.partial) continue ;; esac
      [ -e "$c" ] || continue
      complete "$c" || incomplete="$incomplete $c"
    done
    [ -z "$incomplete" ] && ok || fail "$mode trial $trial (killed after ${ms} ms): incomplete checkpoint folders:$incomplete"
    newest=$(ls -d "$d"/save/step_[0-9]* 2>/dev/null | grep -v '\.partial$' | sort | tail -1)
    if [ "$(basename "${newest:-none}")" = "$last" ]; then
      diff -r <(cd "$newest" && cat model*.safetensors | cksum) <(cd "$work/ref_model" && cat model*.safetensors | cksum) > /dev/null && ok \
        || fail "$mode trial $trial (killed after its final save): the final checkpoint's model is the uninterrupted run's"
      rm -rf "$d"; continue
    fi
    resume=(); [ -n "$newest" ] && resume=(--resume "$newest")
    train --steps $steps "${flags[@]}" --save-dir "$d/save" --save-every 1 --out "$d/out" "${resume[@]}" > "$d/log" 2>&1 \
      || fail "$mode trial $trial: resuming from '${newest:-nothing}' failed: $(cat "$d/log")"
    [ "$(hash_of "$d/out")" = "$want" ] && ok \
      || fail "$mode trial $trial (killed after ${ms} ms, resumed from '${newest:-nothing}'): weights $(hash_of "$d/out"), uninterrupted $want"
    check "$mode trial $trial: the resumed run cleared what the killed save left" \
      test -z "$(find "$d/save" -name '*.partial' -o -name '*.tmp.*')"
    rm -rf "$d"
  done
  echo "SIGKILL ($mode): $kills of 10 runs killed ($mid_save while saving); run span ${span_ms} ms"
}
kill_trials "one process"
kill_trials "pipeline" --stages 2 --pipeline 2bw --microbatches 2

# ---- corrupt files: each refused naming the file and the problem
ck="$work/s2/step_000006"
corrupt() { rm -rf "$work/bad"; cp -r "$ck" "$work/bad"; }
resume_bad() { train --steps 8 --stages 2 --resume "$work/bad"; }
eval_bad() { "$bin" eval --checkpoint "$work/bad" --data "$work/data" --batch 2 --batches 1; }
corrupt; truncate -s -100 "$work/bad/state.safetensors"
expect_error "truncated state" "state.safetensors: tensor .* run past the end of the file" resume_bad
corrupt; printf 'X' | dd of="$work/bad/state.safetensors" bs=1 seek=8 conv=notrunc status=none
expect_error "a flipped byte in the state's header" "state.safetensors: header: invalid JSON" resume_bad
corrupt; printf '\177' | dd of="$work/bad/state.safetensors" bs=1 seek=6 conv=notrunc status=none
expect_error "a flipped byte in the state's header length" "state.safetensors: header length .* over the 100 MB limit" resume_bad
corrupt; patch "$work/bad/state.safetensors" '"dtype":"F32"' '"dtype":"I32"'
expect_error "a wrong dtype in the state" "state.safetensors: tensor .*: unsupported dtype 'I32'" resume_bad
corrupt; patch "$work/bad/state.safetensors" '"param:model.norm.weight"' '"param:model.norm.weighX"'
expect_error "a tensor missing from the state" "state.safetensors: metadata 'nobubble.checksum:param:model.norm.weight' is the checksum of a tensor 'param:model.norm.weight' the file does not hold" resume_bad
# A metadata value or an entry changed so that the header still parses: the header's checksum refuses it. The
# checks of meaning behind it (for files without one: written before it, or by other tools) are then tested
# on the same file with the checksum's key renamed (unsum), which makes it such a file.
unsum() { patch "$1" '"nobubble.header_checksum"' '"nobubble.header_checksuX"'; }
corrupt; patch "$work/bad/state.safetensors" '"run.d_ffn":"384"' '"run.d_ffn":"192"'
expect_error "a run setting changed in the state" "state.safetensors: header checksum mismatch (.*): the file is corrupt" \
  train --set d_ffn=192 --steps 8 --stages 2 --resume "$work/bad"
unsum "$work/bad/state.safetensors"
expect_error "a state tensor of the wrong size" "tensor 'param:model.layers.0.mlp.gate_proj.weight' has 49152 values, this run needs 24576" \
  train --set d_ffn=192 --steps 8 --stages 2 --resume "$work/bad"
corrupt; patch "$work/bad/state.safetensors" '"next_step":"6"' '"next_step":"7"'
expect_error "the state's next step changed (it still parses)" "state.safetensors: header checksum mismatch" resume_bad
corrupt; patch "$work/bad/state.safetensors" '"next_step":"6"' '"next_step":"x"'; unsum "$work/bad/state.safetensors"
expect_error "bad metadata in the state" "metadata 'next_step' = 'x' is not an integer" resume_bad
corrupt; patch "$work/bad/state.safetensors" '"state_format":"2"' '"state_format":"1"'; unsum "$work/bad/state.safetensors"
expect_error "another state format" "state format 1, this nobubble reads format 2" resume_bad
# flip BYTE_FROM_END FILE: flips a bit of a byte of the tensor data, counted from the end of the file
flip() { local at b; at=$(( $(stat -c %s "$2") - $1 )); b=$(od -An -tu1 -j "$at" -N1 "$2" | tr -d ' ')
         printf "\\$(printf '%03o' $(( b ^ 16 )))" | dd of="$2" bs=1 seek="$at" conv=notrunc status=none; }
corrupt; flip 5 "$work/bad/state.safetensors"
expect_error "a flipped byte in the state's tensor data" \
  "state.safetensors: tensor '.*': data checksum mismatch (.*): the file is corrupt" resume_bad
corrupt; flip 5 "$work/bad/model.safetensors"
expect_error "a flipped byte in the model's tensor data" \
  "model.safetensors: tensor '.*': data checksum mismatch (.*): the file is corrupt" eval_bad
corrupt; truncate -s -100 "$work/bad/model.safetensors"
expect_error "truncated model" "model.safetensors: tensor .* run past the end of the file" eval_bad
corrupt; printf 'X' | dd of="$work/bad/model.safetensors" bs=1 seek=8 conv=notrunc status=none
expect_error "a flipped byte in the model's header" "model.safetensors: header: invalid JSON" eval_bad
corrupt; patch "$work/bad/model.safetensors" '"dtype":"F32"' '"dtype":"I32"'
expect_error "a wrong dtype in the model" "model.safetensors: tensor .*: unsupported dtype 'I32'" eval_bad
corrupt; patch "$work/bad/model.safetensors" '"model.norm.weight"' '"model.norm.weighX"'
expect_error "a tensor missing from the model" "model.safetensors: metadata 'nobubble.checksum:model.norm.weight' is the checksum of a tensor 'model.norm.weight' the file does not hold" eval_bad
corrupt; patch "$work/bad/model.safetensors" '"shape":[300,128]' '"shape":[128,300]'
expect_error "a model tensor's shape transposed" "model.safetensors: header checksum mismatch" eval_bad
unsum "$work/bad/model.safetensors"
expect_error "a model tensor of the wrong shape" "has shape \[128, 300\], the model expects \[300, 128\]" eval_bad
corrupt; patch "$work/bad/config.json" '"hidden_size": 128' '"hidden_size": "x"'
expect_error "a bad config.json" 'config.json: "hidden_size" is "x": expected an integer' eval_bad
finish
