#!/usr/bin/env bash
# The files a run writes, against a hostile folder: symbolic links where checkpoint folders are expected
# (pruned by --keep, or a step_N.partial a failed save clears) never lead to deleting the files they point
# to; prepare's --name cannot leave --out; a second run on a --save-dir or --out in use is refused naming
# the first's pid; a metrics.jsonl that cannot be written stops the run at once, naming it; a kill -9 just
# after a checkpoint is committed loses no metrics line (both trainers); --save-dir errors name --save-dir.
set -u
bin=${1:?usage: cli_files.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"

small_corpus "$bin" "$work/data" || fail "prepare"
small=(--data "$work/data" --set n_layers=2 --set context=16 --batch 2 --threads 1 --quiet)
pipe2=(--stages 2 --pipeline 2bw --microbatches 2)
train() { "$bin" train "${small[@]}" "$@"; }
# victim DIR: a folder of someone else's, holding files named like a checkpoint's.
victim() {
  mkdir -p "$1"
  for f in config.json model.safetensors state.safetensors model-00001-of-00002.safetensors notes.txt; do
    echo "not nobubble's $f" > "$1/$f"
  done
  cp -r "$1" "$1.before"
}

# ---- links: --keep pruning a step folder that is a link
train --steps 2 --save-dir "$work/k1" --save-every 1 > /dev/null 2>&1 || fail "run before pruning"
victim "$work/v1"
rm -rf "$work/k1/step_000001" && ln -s "$work/v1" "$work/k1/step_000001"
train --steps 4 --save-dir "$work/k1" --save-every 1 --keep 2 --resume "$work/k1/step_000002" > "$work/k1.log" 2>&1 \
  || fail "--keep beside a linked step folder: $(cat "$work/k1.log")"
check "--keep: the link's target keeps every file" diff -r "$work/v1.before" "$work/v1"
check "--keep: the link is named: $(cat "$work/k1.log")" \
  grep -q "$work/k1/step_000001 is a symbolic link" "$work/k1.log"
check "--keep: the link itself is left" test -L "$work/k1/step_000001"

# ---- links: a step_N.partial that is a link (one process: cleared before the save; a pipeline with a full
# disk: its parts fail and the partial folder is cleared)
train --steps 2 --save-dir "$work/k2" > /dev/null 2>&1 || fail "run before the linked partial"
victim "$work/v2"
ln -s "$work/v2" "$work/k2/step_000004.partial"
train --steps 4 --save-dir "$work/k2" --save-every 2 --resume "$work/k2/step_000002" > "$work/k2.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "$work/k2/step_000004.partial is a symbolic link" "$work/k2.log" && ok \
  || fail "a linked step_N.partial is refused, naming it (rc $rc): $(cat "$work/k2.log")"
check "one process: the partial link's target keeps every file" diff -r "$work/v2.before" "$work/v2"
train --steps 2 "${pipe2[@]}" --save-dir "$work/k3" > /dev/null 2>&1 || fail "pipeline run before the linked partial"
victim "$work/v3"
ln -s "$work/v3" "$work/k3/step_000004.partial"
(ulimit -f 1024; exec "$bin" train "${small[@]}" "${pipe2[@]}" --steps 4 --save-dir "$work/k3" --save-every 2 \
  --resume "$work/k3/step_000002") > "$work/k3.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "$work/k3/step_000004.partial is a symbolic link" "$work/k3.log" && ok \
  || fail "pipeline: a linked step_N.partial is refused, naming it (rc $rc): $(cat "$work/k3.log")"
check "pipeline, full disk: the partial link's target keeps every file, and gains none" diff -r "$work/v3.before" "$work/v3"

# ---- prepare --name: a name, not a path
for name in ../../escaped a/b .. ""; do
  expect_error "prepare --name '$name' refused" "--name '$name'" \
    "$bin" prepare --input "$work/text.txt" --vocab 300 --out "$work/n/a/data" --name "$name"
done
check "no shard escaped --out: $(find "$work" -name '*escaped*')" test -z "$(find "$work" -name '*escaped*')"
check "nothing written for a refused name" test ! -e "$work/n/a/data"
"$bin" prepare --input "$work/text.txt" --vocab 300 --out "$work/n/ok" --name my-data > /dev/null 2>&1 \
  && test -e "$work/n/ok/my-data_train_000000.bin" && ok || fail "prepare --name my-data"

# ---- a part name read from a checkpoint's index is a file name in its folder, not a path
cp -r "$work/k3/step_000002" "$work/idx"
sed -i 's|"model-00001-of-00002.safetensors"|"../model-00001-of-00002.safetensors"|' "$work/idx/model.safetensors.index.json"
expect_error "an index naming a part outside its folder is refused" "part '../model-00001-of-00002.safetensors'" \
  "$bin" eval --checkpoint "$work/idx" --data "$work/data" --batches 1

# ---- locks: a second run on a --save-dir, --out or --export in use is refused, naming the first's pid (--export
# is written only at the end: without its lock a second run's model there would be replaced unseen)
"$bin" train "${small[@]}" --steps 1000000 --save-dir "$work/L" --save-every 100000 --out "$work/O" --export "$work/E" \
  > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1 600); do [ -s "$work/O/metrics.jsonl" ] && break; sleep 0.1; done
expect_error "a second run on the same --save-dir" "--save-dir $work/L is in use by another nobubble run (pid $pid)" \
  train --steps 2 --save-dir "$work/L"
expect_error "a second run on the same --out" "--out $work/O is in use by another nobubble run (pid $pid)" \
  train --steps 2 --out "$work/O"
expect_error "a second pipeline run on the same --out" "--out $work/O is in use by another nobubble run (pid $pid)" \
  train --steps 2 "${pipe2[@]}" --out "$work/O"
expect_error "a second run on the same --export" "--export $work/E is in use by another nobubble run (pid $pid)" \
  train --steps 2 --export "$work/E"
check "the refused run wrote no model into the first's --export" test ! -e "$work/E/model.safetensors"
expect_error "nobubble export into a running train's --export" "--out $work/E is in use by another nobubble run (pid $pid)" \
  "$bin" export --set n_layers=1 --out "$work/E"
check "... wrote no model there" test ! -e "$work/E/model.safetensors"
kill -0 $pid 2>/dev/null && ok || fail "the first run went on meanwhile"
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
# (its metrics.jsonl stays: a new run there needs --force, or --resume)
train --steps 2 --save-dir "$work/L" --out "$work/O" --export "$work/E" --force > "$work/L.log" 2>&1 && ok \
  || fail "a run after one killed by kill -9 (its lock file left): $(cat "$work/L.log")"
check "a run that ended leaves no lock file" test ! -e "$work/L/.nobubble.lock" -a ! -e "$work/O/.nobubble.lock" \
  -a ! -e "$work/E/.nobubble.lock"
check "... and its export" test -s "$work/E/model.safetensors"
train --steps 2 "${pipe2[@]}" --save-dir "$work/same" --out "$work/same" > "$work/same.log" 2>&1 && ok \
  || fail "--out and --save-dir one folder: $(cat "$work/same.log")"

# ---- metrics.jsonl that cannot be written (a file-size limit; nobubble ignores SIGXFSZ): the run stops at once
for kind in sim pipe; do
  extra=(); [ $kind = pipe ] && extra=("${pipe2[@]}")
  # 4 KiB: room for train_config.json (written first, about 1.5 KiB), not for 40 metrics lines
  (ulimit -f 4; exec "$bin" train "${small[@]}" "${extra[@]}" --steps 40 --out "$work/m$kind") > "$work/m$kind.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "$work/m$kind/metrics.jsonl: cannot write the line of step [0-9]" "$work/m$kind.log" \
    && ok || fail "$kind: a metrics write failure stops the run naming metrics.jsonl (rc $rc): $(cat "$work/m$kind.log")"
  check "$kind: ... at once (no summary.json)" test ! -e "$work/m$kind/summary.json"
done

# ---- kill -9 just after a checkpoint is committed (a preloaded shim kills the process as the rename of
# step_000003 returns): resumed from it, every step has one metrics line, equal to an uninterrupted run's.
steps_of() { sed -n 's/^{"step": \([0-9]*\),.*/\1/p' "$1/metrics.jsonl" | tr '\n' ' '; }
untimed() { sed 's/"time_s": [^,]*, "tokens_per_s": [^,]*, //' "$1/metrics.jsonl"; }
if cc -shared -fPIC -o "$work/shim.so" tests/shim/kill_after_rename.c -ldl 2> "$work/cc.log"; then
  for kind in sim pipe; do
    extra=(); [ $kind = pipe ] && extra=("${pipe2[@]}")
    train --steps 6 "${extra[@]}" --out "$work/c$kind.ref" > /dev/null 2>&1 || fail "$kind: uninterrupted run"
    d="$work/c$kind"
    { (export NB_KILL_AFTER_RENAME_TO="$d/save/step_000003" LD_PRELOAD="$work/shim.so" \
         ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
       exec "$bin" train "${small[@]}" "${extra[@]}" --steps 6 --save-dir "$d/save" --save-every 3 --out "$d/out") \
       > /dev/null 2>&1; rc=$?; } 2> /dev/null
    [ $rc -eq 137 ] && ok || fail "$kind: the shim kills the run after committing step 3 (rc $rc)"
    train --steps 6 "${extra[@]}" --save-dir "$d/save" --save-every 3 --out "$d/out" --resume "$d/save/step_000003" \
      > "$d.log" 2>&1 || fail "$kind: resume after the kill: $(cat "$d.log")"
    [ "$(steps_of "$d/out")" = "1 2 3 4 5 6 " ] && ok || fail "$kind: each step once after the kill: $(steps_of "$d/out")"
    check "$kind: metrics.jsonl equals the uninterrupted run's (timings aside)" \
      diff <(untimed "$work/c$kind.ref") <(untimed "$d/out")
  done
else
  echo "skipped the kill-after-commit checks: no C compiler for the shim ($(head -1 "$work/cc.log"))"
fi

# ---- --save-dir errors name --save-dir
expect_error "--save-dir that cannot be created names --save-dir" "--save-dir /proc/nobubble-x/y: cannot create" \
  train --steps 1 --save-dir /proc/nobubble-x/y

# ---- what a run leaves in folders that hold another run, or in none, when it is refused
# --force removes the earlier run only once the new one has loaded everything: bad data leaves it whole.
train --steps 2 --out "$work/F" --save-dir "$work/FS" --save-every 2 > /dev/null 2>&1 || fail "the run --force replaces"
( cd "$work" && md5sum F/* FS/step_000002/* > "$work/F.md5" )
printf 'not a shard at all' > "$work/bad.bin"
expect_error "--force with bad data: refused" "shard $work/bad.bin: truncated" \
  "$bin" train --train "$work/bad.bin" --set n_layers=2 --set context=16 --batch 2 --quiet --steps 2 --out "$work/F" \
  --save-dir "$work/FS" --force
check "--force with bad data: the earlier run's files all stay" bash -c "cd '$work' && md5sum --quiet -c F.md5"
# a refused run leaves no folder it made (nor their parents it made), and none of an existing folder's files go
expect_error "a refused run (bad data) with new folders" "truncated" \
  "$bin" train --train "$work/bad.bin" --set n_layers=2 --set context=16 --batch 2 --quiet --steps 2 \
  --out "$work/new/a/b" --save-dir "$work/newsave" --export "$work/newexport/hf"
check "the refused run left none of the folders it made" test ! -e "$work/new" -a ! -e "$work/newsave" \
  -a ! -e "$work/newexport"
expect_error "a refused run (a vocabulary smaller than the data's)" "vocabulary size 10" \
  train --steps 2 --set vocab_size=10 --out "$work/F/inner"
check "... removed its --out inside an existing folder, and nothing else" \
  bash -c "test ! -e '$work/F/inner' && cd '$work' && md5sum --quiet -c F.md5"
# --resume into an --out that holds another run: refused (it would mix the two runs' metrics), --force replaces
train --steps 3 --seed 5 --out "$work/R" > /dev/null 2>&1 || fail "the other run"
( cd "$work" && md5sum R/* > "$work/R.md5" )
expect_error "--resume into another run's --out" "--out $work/R holds another run .*--seed 5 (this run: 1)" \
  train --steps 3 --resume "$work/FS/step_000002" --out "$work/R"
check "... leaves that run's files as they were" bash -c "cd '$work' && md5sum --quiet -c R.md5"
train --steps 3 --resume "$work/FS/step_000002" --out "$work/R" --force > "$work/R.log" 2>&1 \
  && grep -q "removed another run's files from $work/R" "$work/R.log" \
  && [ "$(sed -n 's/^{"step": \([0-9]*\),.*/\1/p' "$work/R/metrics.jsonl" | tr '\n' ' ')" = "3 " ] && ok \
  || fail "--resume --force into another run's --out: $(cat "$work/R.log") $(cat "$work/R/metrics.jsonl")"
# its own --out (the run it continues), also with --override of what it computes: accepted
train --steps 3 --resume "$work/FS/step_000002" --out "$work/F" > "$work/F.log" 2>&1 && ok \
  || fail "--resume into its own --out: $(cat "$work/F.log")"
# a run folder written before a setting existed (its train_config.json lacks the key) is still its own run
grep -v '^  "seed": ' "$work/F/train_config.json" > "$work/F/tc" && mv "$work/F/tc" "$work/F/train_config.json"
train --steps 4 --resume "$work/FS/step_000002" --out "$work/F" > "$work/F.log" 2>&1 && ok \
  || fail "--resume into its own --out whose train_config.json lacks a key: $(cat "$work/F.log")"
train --steps 4 --lr 0.002 --override --resume "$work/FS/step_000002" --out "$work/F" > "$work/F.log" 2>&1 && ok \
  || fail "--resume --override into its own --out: $(cat "$work/F.log")"
# resumed again from before the override without it: told apart from another run by the hint
expect_error "--resume from before an --override, without it" "or --override if it is this run continued with other settings" \
  train --steps 4 --resume "$work/FS/step_000002" --out "$work/F"

# --export: a path that is not a folder is refused before the run (not after it); a folder holding a model
# is refused unless --force, which removes the old export's files (its tokenizer too) and nothing else
touch "$work/xfile"
expect_error "--export a file, before training" "--export $work/xfile: exists and is not a folder" \
  train --steps 2 --export "$work/xfile" --out "$work/X1"
check "... nothing trained" test ! -e "$work/X1"
train --steps 1 --export "$work/X" > /dev/null 2>&1 || fail "a first export"
echo mine > "$work/X/notes.txt"; echo '{"model": "old"}' > "$work/X/tokenizer.json"
( cd "$work" && md5sum X/* > X.md5 )
expect_error "--export into a folder holding a model" "--export $work/X already holds a model" train --steps 1 --export "$work/X"
check "... leaves it as it was" bash -c "cd '$work' && md5sum --quiet -c X.md5"
train --steps 1 --seed 7 --export "$work/X" --force > "$work/X.log" 2>&1 \
  && ! grep -q old "$work/X/tokenizer.json" && [ "$(cat "$work/X/notes.txt")" = mine ] \
  && ! md5sum --quiet -c <(cd "$work" && grep model.safetensors X.md5 | sed "s|X/|$work/X/|") > /dev/null 2>&1 && ok \
  || fail "--export --force: $(cat "$work/X.log")"

# folders other commands own: a run's --out is not a sweep's or prepared data's folder, nor a sweep's a run's
mkdir -p "$work/swp" && echo "fixed: --steps 1" > "$work/swp/grid.txt"
expect_error "train --out a sweep's folder" "--out $work/swp holds a sweep (grid.txt)" train --steps 1 --out "$work/swp"
expect_error "train --out prepared data" "--out $work/data holds prepared data (manifest.json)" train --steps 1 --out "$work/data"
check "... wrote nothing there" test ! -e "$work/data/metrics.jsonl" -a ! -e "$work/swp/metrics.jsonl"
echo "fixed: --steps 1" > "$work/g1.grid"
expect_error "sweep --out a run's folder" "--out $work/F holds a training run (summary.json)" "$bin" sweep "$work/g1.grid" --out "$work/F"
check "... wrote nothing there" test ! -e "$work/F/grid.txt" -a ! -e "$work/F/runs"

# a resume at the run's last step into an --out that holds another run: refused, not "already complete"
train --steps 2 --save-dir "$work/E2" --save-every 2 --out "$work/E2out" > /dev/null 2>&1 || fail "a 2-step run"
train --steps 2 --seed 5 --out "$work/R5" > /dev/null 2>&1 || fail "another 2-step run"
expect_error "--resume at the last step into another run's --out" "--out $work/R5 holds another run" \
  train --steps 2 --resume "$work/E2/step_000002" --out "$work/R5"
# a refused run whose --out climbs out with "..": the existing empty folder it names stays
mkdir -p "$work/keepme"
expect_error "a refused run with .. in --out" "truncated" "$bin" train --train "$work/bad.bin" --set n_layers=2 \
  --set context=16 --batch 2 --quiet --steps 2 --out "$work/nox/../keepme/new"
check "... left the folder it did not make" test -d "$work/keepme"
# a link to a folder is a folder for --export
mkdir -p "$work/realx" && ln -sfn "$work/realx" "$work/linkx"
train --steps 1 --export "$work/linkx" > "$work/lx.log" 2>&1 && test -s "$work/realx/model.safetensors" && ok \
  || fail "--export through a link to a folder: $(cat "$work/lx.log")"
# --force on a run whose hf/ export has the tokenizer's files: all of them go with it
train --steps 1 --out "$work/H" --export "$work/H/hf" > /dev/null 2>&1 || fail "a run with its export in --out/hf"
echo '{"old": 1}' > "$work/H/hf/tokenizer_config.json"
"$bin" train --train "$work/data/*_train_*.bin" --set n_layers=2 --set context=16 --set vocab_size=300 --batch 2 --quiet \
  --steps 1 --out "$work/H" --export "$work/H/hf" --force > /dev/null 2>&1 && [ ! -e "$work/H/hf/tokenizer_config.json" ] && ok \
  || fail "--force removed the earlier export's tokenizer_config.json: $(ls "$work/H/hf")"
# a run's own train_config.json given back with --config: no flag of it is said to be unused
train --steps 1 --config "$work/H/train_config.json" --out "$work/H2" --export "$work/H2/hf" > /dev/null 2> "$work/H2.err" \
  && ! grep -q "does nothing" "$work/H2.err" && ok || fail "--config of a run's own file warns: $(cat "$work/H2.err")"


# ---- an export into a folder that is not an export's: refused even with --force (it removed prepared data's
# tokenizer.json, or a checkpoint's model.safetensors beside its state)
cp "$work/data/tokenizer.json" "$work/tokenizer.saved"
expect_error "train --export into prepared data, --force" "--export $work/data holds prepared data (manifest.json)" \
  train --steps 2 --export "$work/data" --force
expect_error "export --out prepared data, --force" "--out $work/data holds prepared data (manifest.json)" \
  "$bin" export --set n_layers=1 --set vocab_size=300 --out "$work/data" --force
cmp -s "$work/data/tokenizer.json" "$work/tokenizer.saved" && test ! -e "$work/data/model.safetensors" && ok ||
  fail "the data folder changed: $(ls "$work/data")"
train --steps 2 --save-dir "$work/eck" > "$work/eck.log" 2>&1 || fail "checkpoint run: $(tail -3 "$work/eck.log")"
cp "$work/eck/step_000002/model.safetensors" "$work/model.saved"
expect_error "train --export into a checkpoint, --force" "--export $work/eck/step_000002 holds a checkpoint" \
  train --steps 2 --export "$work/eck/step_000002" --force
expect_error "export --out a checkpoint, --force" "holds a checkpoint (state.safetensors)" \
  "$bin" export --set n_layers=1 --out "$work/eck/step_000002" --force
cmp -s "$work/eck/step_000002/model.safetensors" "$work/model.saved" && ok || fail "the checkpoint's model changed"
finish
