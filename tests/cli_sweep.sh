#!/usr/bin/env bash
# nobubble sweep and nobubble report: a small grid end to end; re-running runs nothing twice; a
# sweep killed (SIGKILL) or interrupted (SIGINT) mid-run continues where it stopped, each point
# run exactly once to completion; with --save-every an interrupted point resumes from its newest
# usable checkpoint (bitwise the uninterrupted run), passes over corrupt or incomplete ones, and
# starts from scratch without one; results.csv and the report carry exactly the runs' numbers; a
# failed point is recorded and the sweep exits non-zero; malformed grids are refused naming the
# line; the report renders in headless chromium with the expected charts.
set -u
bin=${1:?usage: cli_sweep.sh path/to/nobubble}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
source "$(dirname "$0")/support/cli_harness.sh"

for cmd in sweep report; do
  if "$bin" $cmd --help | grep -q "usage: nobubble $cmd"; then ok; else fail "$cmd --help"; fi
done

# A small prepared corpus (as in cli_train.sh): real text, byte-level BPE vocab 300.
small_corpus "$bin" "$work/data" && ok || fail "prepare small text"
small="--data $work/data --set n_layers=1 --set context=16 --batch 2 --eval-batches 1"

# A field of a JSON file written by the trainer (one line per key in summary.json).
json_field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1" | head -1; }
# A field of results.csv, by column name, for the row of a point.
csv_field() {
  awk -F, -v p="$2" -v c="$3" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next } $1 == p { print $col[c] }' "$1"
}
starts() { grep -c " start $2\$" "$1/sweep.log"; }
dones() { grep -c " done $2 " "$1/sweep.log"; }

# ---------------------------------------------------------------- two points end to end
cat > "$work/two.grid" <<EOF
# two points: synchronous, and the one-step delay with error feedback
fixed: $small --steps 4 --eval-every 2
axis delay: sync "2bw --ef 1"
EOF
"$bin" sweep "$work/two.grid" --out "$work/two" --jobs 2 > "$work/two.log" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "\[2/2\] .*: done in" "$work/two.log" && ok || fail "two-point sweep: rc $rc: $(cat "$work/two.log")"
check "header of results.csv" test "$(head -1 "$work/two/results.csv")" = \
  "point,delay,final_train_loss,final_val_loss,best_val_loss,tokens,seconds,status,exit_status"
check "one row per point" test "$(wc -l < "$work/two/results.csv")" -eq 3
check "the axis value carries several flags" grep -q -- "--delay 2bw --ef 1$" "$work/two/runs/2bw-ef-1/command.txt"
check "the delayed point ran with error feedback" grep -q '"ef": true' "$work/two/runs/2bw-ef-1/summary.json"
for p in sync 2bw-ef-1; do
  s=$work/two/runs/$p/summary.json m=$work/two/runs/$p/metrics.jsonl
  for col in final_train_loss final_val_loss seconds; do
    [ "$(csv_field "$work/two/results.csv" $p $col)" = "$(json_field "$s" $col)" ] && ok ||
      fail "$p $col: results.csv $(csv_field "$work/two/results.csv" $p $col), summary.json $(json_field "$s" $col)"
  done
  best=$(sed -n 's/.*"val_loss": \([^,}]*\).*/\1/p' "$m" | sort -g | head -1)
  [ -n "$best" ] && [ "$(csv_field "$work/two/results.csv" $p best_val_loss)" = "$best" ] && ok || fail "$p best_val_loss: want $best"
  tokens=$(tail -1 "$m" | sed -n 's/.*"tokens": \([0-9]*\).*/\1/p')
  [ "$(csv_field "$work/two/results.csv" $p tokens)" = "$tokens" ] && ok || fail "$p tokens: want $tokens"
  check "$p status" test "$(csv_field "$work/two/results.csv" $p status)" = done
done

# A grid that lacks a point the folder's earlier sweep ran (a study's next phase): that point's row stays in
# results.csv, after this grid's; a grid under other columns is refused before anything is written.
cat > "$work/one.grid" <<EOF
fixed: $small --steps 4 --eval-every 2
axis delay: sync
EOF
row_before=$(grep '^2bw-ef-1,' "$work/two/results.csv")
"$bin" sweep "$work/one.grid" --out "$work/two" > "$work/one.log" 2>&1 || fail "a one-point grid into the folder: $(cat "$work/one.log")"
check "the earlier point's row stays in results.csv" test "$(grep '^2bw-ef-1,' "$work/two/results.csv")" = "$row_before" \
  -a "$(wc -l < "$work/two/results.csv")" -eq 3 -a "$(sed -n 2p "$work/two/results.csv" | cut -d, -f1)" = sync
cp "$work/two/results.csv" "$work/two.csv"; cp "$work/two/grid.txt" "$work/two.grid.txt"
cat > "$work/other.grid" <<EOF
fixed: $small --steps 4 --eval-every 2
axis seed: 1
EOF
expect_error "a grid under other columns into the folder" "its results.csv holds points of another grid (sync, ...) under other columns" \
  "$bin" sweep "$work/other.grid" --out "$work/two"
check "... leaves results.csv and grid.txt as they were" cmp -s "$work/two.csv" "$work/two/results.csv"
check "... (grid.txt)" cmp -s "$work/two.grid.txt" "$work/two/grid.txt"
"$bin" sweep "$work/two.grid" --out "$work/two" > /dev/null 2>&1 && check "the whole grid again: its rows in grid order" \
  test "$(cut -d, -f1 "$work/two/results.csv" | tr '\n' ' ')" = "point sync 2bw-ef-1 "

# A one-job sweep into $work/live over the steps given (a 2-step point and a 100000-step one that runs
# until stopped), in the background: its pid in $live.
live_sweep() {
  printf 'fixed: %s --eval-every 0\naxis steps: %s\n' "$small" "$2" > "$work/$1.grid"
  "$bin" sweep "$work/$1.grid" --out "$work/live" --jobs 1 --quiet > "$work/$1.log" 2>&1 &
  live=$!
}

# results.csv is written after every point: while the second point runs, the first reads done.
live_sweep live "2 100000"
for _ in $(seq 1 600); do grep -q " start 100000" "$work/live/sweep.log" 2>/dev/null && break; sleep 0.1; done
check "live: point 2 done, point 100000 running" grep -q " start 100000" "$work/live/sweep.log"
check "live: results.csv has point 2 done while the sweep runs" test "$(csv_field "$work/live/results.csv" 2 status)" = done
check "live: the running point reads not_run" test "$(csv_field "$work/live/results.csv" 100000 status)" = not_run
check "live: point 2's loss is its summary's" test "$(csv_field "$work/live/results.csv" 2 final_train_loss)" = \
  "$(json_field "$work/live/runs/2/summary.json" final_train_loss)"
kill -TERM $live; wait $live
check "live: stopped, the running point reads interrupted" test "$(csv_field "$work/live/results.csv" 100000 status)" = interrupted

# A resumed sweep that has not reached an earlier sweep's complete point yet (here the long point comes
# first) lists it as done once stopped (results.csv is rewritten then), not as interrupted.
live_sweep live2 "100000 2"
for _ in $(seq 1 600); do [ "$(starts "$work/live" 100000)" -ge 2 ] && break; sleep 0.1; done
check "resumed live: the long point runs again" test "$(starts "$work/live" 100000)" -ge 2
kill -TERM $live; wait $live
check "resumed live, stopped: the earlier sweep's point reads done" test "$(csv_field "$work/live/results.csv" 2 status)" = done
check "resumed live, stopped: with its summary's loss" test "$(csv_field "$work/live/results.csv" 2 final_train_loss)" = \
  "$(json_field "$work/live/runs/2/summary.json" final_train_loss)"
check "resumed live, stopped: the running point reads interrupted" test "$(csv_field "$work/live/results.csv" 100000 status)" = interrupted

# Re-running runs no point again: nothing started, command.txt untouched.
before=$(stat -c %Y.%i "$work/two/runs/sync/command.txt" "$work/two/runs/sync/summary.json")
"$bin" sweep "$work/two.grid" --out "$work/two" > "$work/again.log" 2>&1 && ok || fail "re-run: $(cat "$work/again.log")"
check "re-run skips both points" test "$(grep -c "already complete, skipped" "$work/again.log")" -eq 2
check "re-run starts nothing" test "$(starts "$work/two" sync)" -eq 1 -a "$(starts "$work/two" 2bw-ef-1)" -eq 1
check "re-run leaves the runs alone" test "$before" = "$(stat -c %Y.%i "$work/two/runs/sync/command.txt" "$work/two/runs/sync/summary.json")"
# A changed command (here one more fixed flag) runs the points afresh.
sed -i 's/--steps 4/--steps 3/' "$work/two.grid"
"$bin" sweep "$work/two.grid" --out "$work/two" > /dev/null 2>&1 && ok || fail "sweep after a grid change"
check "a changed command re-runs the point" test "$(starts "$work/two" sync)" -eq 2 -a "$(wc -l < "$work/two/runs/sync/metrics.jsonl")" -eq 3

# --dry-run prints each command as command.txt holds it: quoted for a shell (a pasted line runs that command)
printf '%s\n' "fixed: --steps 1 --data 'a;b' --val '' --train \"it's\"" "axis seed: 1" > "$work/quote.grid"
"$bin" sweep "$work/quote.grid" --dry-run > "$work/quote.out" 2>&1 || fail "dry run of the quoting grid"
line=$(sed -n 's/^1: nobubble //p' "$work/quote.out")
eval "set -- $line"
[ "$1" = train ] && [ "$5" = "a;b" ] && [ "$7" = "" ] && [ "$9" = "it's" ] && [ $# -eq 11 ] && ok \
  || fail "dry-run quoting: $(cat "$work/quote.out")"
# a point name longer than a folder name may be is refused when the grid is read (not when its run starts)
L=$(printf 'x%.0s' $(seq 1 60))
printf '%s\n' "fixed: --steps 1" "axis a: $L" "axis b: $L" "axis c: $L" "axis d: $L" > "$work/long.grid"
expect_error "a point name past 200 bytes" "is 243 bytes, the most a folder name takes here is 200" \
  "$bin" sweep "$work/long.grid" --dry-run

# ---------------------------------------------------------------- interrupted sweeps continue
cat > "$work/seeds.grid" <<EOF
fixed: $small --steps 120 --eval-every 40
axis seed: 1 2 3
EOF
# The pid of the trainer running point $2 of the sweep into $1 (empty if none).
point_pid() { pgrep -f -- "--out $1/runs/$2( |\$)" | head -1; }
# Whether that trainer is stopped (SIGSTOP: state T).
point_stalled() {
  local p
  p=$(point_pid "$1" "$2")
  [ -n "$p" ] && [ "$(ps -o stat= -p "$p" | cut -c1)" = T ]
}
# Waits (up to 60 s) until point $2 of the sweep into $1 stalls, continuing any other point that does.
# The points run with NB_PIPELINE_FAULT=0:STEP:stall (the trainer's test hook: the process stops itself
# by SIGSTOP at that step), so that a signal reaches a point at a known step, whatever the machine's
# speed: a 120-step point can otherwise finish between two polls on a fast or loaded machine.
await_stall() {
  local dir=$1 point=$2 i p
  for i in $(seq 1 6000); do
    point_stalled "$dir" "$point" && return 0
    for p in $(ls "$dir/runs" 2>/dev/null); do
      [ "$p" != "$point" ] && point_stalled "$dir" "$p" && kill -CONT "$(point_pid "$dir" "$p")"
    done
    sleep 0.01
  done
  return 1
}
# Continues the stalled trainer $1 once the signal the sweep passes on is pending for it (SigPnd or
# ShdPnd in /proc), or once it is gone (a killed sweep's child dies with it): continued earlier, it could
# finish its point before the sweep's signal arrives.
continue_after_signal() {
  local child=$1 i
  [ -n "$child" ] || return 0
  for i in $(seq 1 6000); do
    [ -d "/proc/$child" ] || return 0
    grep -qE '^(SigPnd|ShdPnd):[[:space:]]*0*[1-9a-f]' "/proc/$child/status" 2> /dev/null && break
    sleep 0.01
  done
  kill -CONT "$child" 2> /dev/null
}
# Starts a sweep whose points stall at step 60; once point 1 is complete and point 2 has stalled, sends
# the signal to the sweep, then continues point 2 (which meets the signal the sweep passed on, if any).
interrupt() {
  local sig=$1 dir=$2
  NB_PIPELINE_FAULT=0:60:stall "$bin" sweep "$work/seeds.grid" --out "$dir" > "$dir.log" 2>&1 &
  local pid=$!
  await_stall "$dir" 2 || fail "$sig: point 2 never stalled at step 60: $(cat "$dir.log")"
  # One sweep per --out: a second one is refused while this one runs (its lock; a killed sweep's is free).
  expect_error "$sig: a second sweep into the same --out" "--out $dir is in use by another nobubble run (pid $pid)" \
    "$bin" sweep "$work/seeds.grid" --out "$dir"
  local child
  child=$(point_pid "$dir" 2)
  kill -$sig $pid
  continue_after_signal "$child"
  wait $pid
}
for sig in KILL INT; do
  dir=$work/seeds_$sig
  interrupt $sig "$dir"; rc=$?
  if [ $sig = INT ]; then
    [ $rc -eq 130 ] && grep -q "run the same command again" "$dir.log" && ok || fail "SIGINT: rc $rc: $(cat "$dir.log")"
    check "SIGINT: results.csv marks the rest interrupted" test "$(csv_field "$dir/results.csv" 2 status)" = interrupted
  fi
  check "$sig: point 2 was stopped mid-run" test ! -e "$dir/runs/2/summary.json"
  # The sweep's children die with it (they would otherwise write into folders the next sweep replaces).
  for i in $(seq 1 10); do pgrep -f -- "--out $dir/runs/" > /dev/null || break; sleep 0.05; done
  check "$sig: no child outlives the sweep" test -z "$(pgrep -f -- "--out $dir/runs/")"
  "$bin" sweep "$work/seeds.grid" --out "$dir" > "$dir.rerun.log" 2>&1 && ok || fail "$sig: re-run: $(cat "$dir.rerun.log")"
  for p in 1 2 3; do
    [ "$(dones "$dir" $p)" -eq 1 ] && [ "$(wc -l < "$dir/runs/$p/metrics.jsonl")" -eq 120 ] &&
      [ "$(csv_field "$dir/results.csv" $p status)" = done ] && ok ||
      fail "$sig: point $p completed $(dones "$dir" $p) times, $(wc -l < "$dir/runs/$p/metrics.jsonl") metrics lines"
  done
  check "$sig: point 1 was not run again" test "$(starts "$dir" 1)" -eq 1
done

# ---------------------------------------------------------------- --save-every: interrupted points resume
# Points sweeps made without --save-every keep their identity (command.txt): none is run again.
"$bin" sweep "$work/seeds.grid" --out "$work/seeds_INT" --save-every 40 > "$work/ids.log" 2>&1 && ok || fail "--save-every over an old sweep: $(cat "$work/ids.log")"
check "--save-every over an old sweep: every point skipped" test "$(grep -c "already complete, skipped" "$work/ids.log")" -eq 3
cat > "$work/resume.grid" <<EOF
fixed: $small --steps 120 --eval-every 20
axis seed: 1
EOF
untimed() { sed 's/"time_s": [^,]*, "tokens_per_s": [^,]*, //' "$1"; }
hash_of() { json_field "$1/runs/1/summary.json" weights_hash; }
ckpts() { ls "$1/runs/1/checkpoints" 2>/dev/null | tr '\n' ' '; }
# The same point without interruption: the reference.
"$bin" sweep "$work/resume.grid" --out "$work/ref" --save-every 10 > "$work/ref.log" 2>&1 && ok || fail "--save-every sweep: $(cat "$work/ref.log")"
check "--save-every: the point's command is the grid's alone" \
  test "$(cat "$work/ref/runs/1/command.txt")" = "train $small --steps 120 --eval-every 20 --seed 1"
check "--save-every: a completed point's checkpoints are removed" test ! -e "$work/ref/runs/1/checkpoints"
ref_hash=$(hash_of "$work/ref")
# Starts a --save-every sweep (10, or $4) of resume.grid into $1 whose point stalls at step $2 (the hook
# above), sends it signal $3 once stalled, continues the point, and waits for the sweep. At step $2 the
# point has saved every checkpoint up to it (a checkpoint folder appears whole, by a rename).
stop_at() {
  local dir=$1 step=$2 sig=$3 every=${4:-10} keep=${5:-2}
  NB_PIPELINE_FAULT=0:$step:stall "$bin" sweep "$work/resume.grid" --out "$dir" --save-every $every --keep $keep \
    > "$dir.log" 2>&1 &
  local pid=$! child
  await_stall "$dir" 1 || fail "stop_at $dir: the point never stalled at step $step: $(cat "$dir.log")"
  child=$(point_pid "$dir" 1)
  kill -$sig $pid
  continue_after_signal "$child"
  wait $pid
}
# Flips the last byte of a file (a tensor's data: its checksum no longer matches).
flip_last_byte() {
  local size b
  size=$(stat -c %s "$1") b=$(tail -c1 "$1" | od -An -tu1 | tr -d ' ')
  printf "$(printf '\\%03o' $(( (b + 1) % 256 )))" | dd of="$1" bs=1 seek=$((size - 1)) conv=notrunc 2> /dev/null
}

# SIGTERM to the sweep after the first checkpoint: the trainer saves one more where it stops.
stop_at "$work/res" 15 TERM
check "stopped after a checkpoint: not complete" test ! -e "$work/res/runs/1/summary.json"
cp "$work/res/runs/1/metrics.jsonl" "$work/res.metrics"
newest=$(ls "$work/res/runs/1/checkpoints" | tail -1)
"$bin" sweep "$work/resume.grid" --out "$work/res" --save-every 10 > "$work/res.rerun.log" 2>&1 && ok || fail "resume: $(cat "$work/res.rerun.log")"
from=$(sed -n 's/^[0-9]* resume 1 from step \([0-9]*\)$/\1/p' "$work/res/sweep.log")
[ -n "$from" ] && [ "step_$(printf %06d "$from")" = "$newest" ] && [ "$from" -ge 10 ] && [ "$from" -lt 120 ] && ok ||
  fail "resume: sweep.log should say 'resume 1 from step $(echo "$newest" | sed 's/^step_0*//')': $(cat "$work/res/sweep.log")"
check "resume: said on stdout" grep -q "^1: resuming from step $from\$" "$work/res.rerun.log"
check "resume: started once" test "$(starts "$work/res" 1)" -eq 1
# Steps 1..from were not run again: their lines are the interrupted run's, timings included.
same_head() { [ -n "$1" ] && [ "$1" -gt 0 ] && cmp -s <(head -n "$1" "$2") <(head -n "$1" "$3"); }
check "resume: the steps before the checkpoint are not run again" \
  same_head "$from" "$work/res.metrics" "$work/res/runs/1/metrics.jsonl"
check "resume: metrics.jsonl equals the uninterrupted run's (timings aside)" \
  cmp -s <(untimed "$work/res/runs/1/metrics.jsonl") <(untimed "$work/ref/runs/1/metrics.jsonl")
check "resume: the weights equal the uninterrupted run's" test -n "$ref_hash" -a "$(hash_of "$work/res")" = "$ref_hash"
check "resume: the train log keeps the interrupted part" grep -q "stopped on request after step $from" "$work/res/runs/1/train.log"
check "resume: checkpoints removed once complete" test ! -e "$work/res/runs/1/checkpoints"
check "resume: results.csv says done" test "$(csv_field "$work/res/results.csv" 1 status)" = done

# The newest checkpoint corrupt (a flipped byte) and the one before it incomplete: the one before those.
# (Stopped after step 35 with --keep 3: steps 20, 30 and the stop's own are left; any --keep above 0
# validates at each save as the reference's --keep 2 does, so the metrics stay comparable.)
stop_at "$work/bad1" 35 TERM 10 3
set -- $(ckpts "$work/bad1")
if [ $# -ge 3 ]; then
  n=$#; corrupt=${!n}; k=$((n - 1)); incomplete=${!k}; k=$((n - 2)); good=${!k}
  flip_last_byte "$work/bad1/runs/1/checkpoints/$corrupt/state.safetensors"
  rm "$work/bad1/runs/1/checkpoints/$incomplete/state.safetensors"
  "$bin" sweep "$work/resume.grid" --out "$work/bad1" --save-every 10 > "$work/bad1.rerun.log" 2>&1 && ok ||
    fail "fallback: $(cat "$work/bad1.rerun.log")"
  line=$(grep " resume 1 " "$work/bad1/sweep.log")
  [[ "$line" == *"resume 1 from step $((10#${good#step_})) (passed over "*"$corrupt: corrupt: "*"checksum mismatch"*"$incomplete: incomplete"* ]] &&
    ok || fail "fallback: sweep.log should resume from $good passing over $corrupt and $incomplete: $line"
  check "fallback: metrics.jsonl equals the uninterrupted run's (timings aside)" \
    cmp -s <(untimed "$work/bad1/runs/1/metrics.jsonl") <(untimed "$work/ref/runs/1/metrics.jsonl")
  check "fallback: the weights equal the uninterrupted run's" test "$(hash_of "$work/bad1")" = "$ref_hash"
else
  fail "fallback: expected at least 3 checkpoints after the stop, found: $(ckpts "$work/bad1")"
fi

# Every checkpoint unusable: from scratch, saying why.
stop_at "$work/bad2" 15 TERM
check "no usable checkpoint: stopped before the end" test ! -e "$work/bad2/runs/1/summary.json"
for c in "$work/bad2/runs/1/checkpoints"/step_*; do flip_last_byte "$c/state.safetensors"; done
"$bin" sweep "$work/resume.grid" --out "$work/bad2" --save-every 10 > "$work/bad2.rerun.log" 2>&1 && ok ||
  fail "no usable checkpoint: $(cat "$work/bad2.rerun.log")"
# (stopped after step 15 with --keep 2: step 10 and the stop's own checkpoint are left, both corrupt)
check "no usable checkpoint: from scratch, saying so" \
  grep -q " start 1 (from scratch: no usable checkpoint: .*step_0000[0-9]*: corrupt: " "$work/bad2/sweep.log"
check "no usable checkpoint: no resume" test -z "$(grep " resume 1 " "$work/bad2/sweep.log")"
check "no usable checkpoint: the weights equal the uninterrupted run's" test "$(hash_of "$work/bad2")" = "$ref_hash"

# Interrupted before its first checkpoint (SIGKILL: the trainer dies with the sweep, saving nothing).
stop_at "$work/none" 5 KILL 1000
check "killed before a checkpoint: none saved" test -z "$(ckpts "$work/none")" -a ! -e "$work/none/runs/1/summary.json"
"$bin" sweep "$work/resume.grid" --out "$work/none" --save-every 1000 > "$work/none.rerun.log" 2>&1 && ok ||
  fail "no checkpoint: $(cat "$work/none.rerun.log")"
check "no checkpoint: started again from scratch" test "$(starts "$work/none" 1)" -eq 2 -a -z "$(grep " resume 1 " "$work/none/sweep.log")"
check "no checkpoint: 120 steps, each once" \
  test "$(sed -n 's/^{"step": \([0-9]*\),.*/\1/p' "$work/none/runs/1/metrics.jsonl" | tr '\n' ' ')" = "$(seq -s ' ' 1 120) "
check "no checkpoint: the weights equal the uninterrupted run's" test "$(hash_of "$work/none")" = "$ref_hash"

# The sweep owns the points' checkpoint flags under --save-every.
printf 'fixed: --steps 2 --save-dir x\n' > "$work/own.grid"
expect_error "--save-dir in a --save-every grid" "point run: --save-dir: with sweep --save-every the sweep gives each point" \
  "$bin" sweep "$work/own.grid" --out "$work/own" --save-every 5
check "refused before anything is made" test ! -e "$work/own"
expect_error "--keep without --save-every" "--keep needs --save-every" "$bin" sweep "$work/own.grid" --out "$work/own" --keep 3

# ---------------------------------------------------------------- a failing point
cat > "$work/fail.grid" <<EOF
fixed: $small --steps 2
axis lr: 1e-3 -1
EOF
"$bin" sweep "$work/fail.grid" --out "$work/fail" > "$work/fail.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "FAILED (exit status 2): .*--lr -1" "$work/fail.log" && ok || fail "failed point: rc $rc: $(cat "$work/fail.log")"
check "the other point completes" test "$(csv_field "$work/fail/results.csv" 1e-3 status)" = done
check "the failure and its exit status are recorded" test "$(csv_field "$work/fail/results.csv" neg1 status),$(csv_field "$work/fail/results.csv" neg1 exit_status)" = "failed,2"

# ---------------------------------------------------------------- grid expansion (--dry-run)
cat > "$work/expand.grid" <<'EOF'
fixed: --steps 2   # comment
axis optimizer
  adamw: --optimizer adamw --lr 2e-3
  muon:  --optimizer muon --lr 0.02
axis momentum
  0.9:
  0.95:
when optimizer=adamw: --beta1 {momentum}
when optimizer=muon momentum=0.9: --momentum {momentum} --set "tied=0"
axis seed: 1 2
fixed: --data-seed {seed}
EOF
"$bin" sweep "$work/expand.grid" --dry-run > "$work/expand.out" 2>&1 && ok || fail "dry run: $(cat "$work/expand.out")"
check "dry run: 8 points" test "$(wc -l < "$work/expand.out")" -eq 8
check "dry run: order, placeholders and when lines" grep -qx "muon_0.9_2: nobubble train --steps 2 --data-seed 2 --optimizer muon --lr 0.02 --seed 2 --momentum 0.9 --set tied=0" "$work/expand.out"
check "dry run: a when line applies only where it matches" grep -qx "muon_0.95_1: nobubble train --steps 2 --data-seed 1 --optimizer muon --lr 0.02 --seed 1" "$work/expand.out"
check "dry run: adamw takes --beta1" grep -qx "adamw_0.95_1: nobubble train --steps 2 --data-seed 1 --optimizer adamw --lr 2e-3 --seed 1 --beta1 0.95" "$work/expand.out"
# skip lines leave out the points that match every condition (and only those).
cat > "$work/skip.grid" <<'EOF2'
fixed: --steps 2
axis steps: 300 1000 3000
axis optimizer: adamw muon normuon
skip optimizer=normuon steps=1000,3000   # NorMuon only at the shortest length
skip optimizer=adamw steps=3000
EOF2
"$bin" sweep "$work/skip.grid" --dry-run > "$work/skip.out" 2>&1 && ok || fail "skip dry run: $(cat "$work/skip.out")"
check "skip: 9 - 3 points" test "$(wc -l < "$work/skip.out")" -eq 6
check "skip: the points left out" test -z "$(grep -E '^(1000_normuon|3000_normuon|3000_adamw):' "$work/skip.out")"
check "skip: the others kept, in order" test "$(cut -d: -f1 "$work/skip.out" | tr '\n' ' ')" = "300_adamw 300_muon 300_normuon 1000_adamw 1000_muon 3000_muon "
# The shipped presets parse, with the documented number of points.
root=$(cd "$(dirname "$0")/.." && pwd)
for preset in lr:42 optimizers_quick:63 optimizers_small:63 momentum:198 depth:63 mitigations:48 pipeline:24 \
              equal_time:36 cooldown:108 quickstart:6 scaling:246 scaling_small:39 taylor:60 optimizers:162; do
  n=$("$bin" sweep "$root/experiments/${preset%%:*}/grid.txt" --dry-run 2>&1 | grep -c ": nobubble train ")
  [ "$n" = "${preset#*:}" ] && ok || fail "preset ${preset%%:*}: $n points, expected ${preset#*:}"
done

# ---------------------------------------------------------------- malformed grids
bad() { printf "$2" > "$work/bad.grid"; expect_error "$1" "$3" "$bin" sweep "$work/bad.grid" --out "$work/bad"; }
bad "unknown line" 'fixed: --steps 2\n\nsteps 3\n' "bad.grid:3: expected \`fixed: FLAGS\`"
bad "unbalanced quote" 'axis delay: sync "2bw --ef 1\n' "bad.grid:1: unbalanced \" quote"
bad "block value without a colon" 'axis delay\n  sync --delay sync\n' "bad.grid:2: expected \`LABEL: FLAGS\`"
bad "indented line outside a block" '# c\n  x: --lr 1\n' "bad.grid:2: an indented line outside an axis block"
bad "axis without values" 'axis delay\naxis seed: 1\n' "bad.grid:1: axis delay has no values"
bad "duplicate label" 'axis seed: 1 2 1\n' "bad.grid:1: axis seed: label '1' given twice"
bad "condition on an unknown axis" 'axis seed: 1\nwhen opt=adamw: --lr 1\n' "bad.grid:2: when opt=...: there is no axis named 'opt'"
bad "condition on an unknown label" 'axis seed: 1\nwhen seed=7: --lr 1\n' "bad.grid:2: when seed=7: axis seed has no value labelled '7'"
bad "skip of an unknown label" 'axis seed: 1 2\nskip seed=3\n' "bad.grid:2: skip seed=3: axis seed has no value labelled '3'"
bad "skip with flags" 'axis seed: 1 2\nskip seed=1: --lr 1\n' "conditions only, no ':' and no flags"
bad "skip of every point" 'axis seed: 1 2\nskip seed=1,2\n' "every point is left out by a \`skip\` line"
bad "placeholder of no axis" 'axis seed: 1\nfixed: --lr {lr}\n' "bad.grid:2: '{lr}': {lr} names no axis"
bad "--out in the grid" 'fixed: --out x\n' "bad.grid:1: --out: the sweep gives each point its own --out"
bad "two points with one name" 'axis a: x_y x\naxis b: z y_z\n' "two points are both named 'x_y_z'"
expect_error "missing grid file" "nowhere.grid" "$bin" sweep "$work/nowhere.grid" --out "$work/bad"
expect_error "sweep without --out" "--out DIR is required" "$bin" sweep "$work/two.grid"
expect_error "--jobs 0" "--jobs 0: out of range, expected an integer from 1 to 256" "$bin" sweep "$work/two.grid" --out "$work/bad" --jobs 0
check "a refused grid creates nothing" test ! -e "$work/bad"
# A folder the sweep did not make is never removed.
mkdir -p "$work/foreign/runs/sync" && touch "$work/foreign/runs/sync/precious"
expect_error "foreign folder" "has no command.txt" "$bin" sweep "$work/two.grid" --out "$work/foreign"
check "the foreign folder is kept" test -e "$work/foreign/runs/sync/precious"

# ---------------------------------------------------------------- the report
"$bin" report "$work/seeds_INT" > "$work/report.log" 2>&1 && ok || fail "report: $(cat "$work/report.log")"
html=$work/seeds_INT/report.html
check "report written" test -s "$html"
for p in 1 2 3; do
  s=$work/seeds_INT/runs/$p/summary.json m=$work/seeds_INT/runs/$p/metrics.jsonl
  best=$(sed -n 's/.*"val_loss": \([^,}]*\).*/\1/p' "$m" | sort -g | head -1)
  tokens=$(tail -1 "$m" | sed -n 's/.*"tokens": \([0-9]*\).*/\1/p')
  want=$(printf '<tr><td>%s</td><td>%s</td><td>done</td><td>%.4f</td><td>%.4f</td><td>%.4f</td><td>%s</td><td>%.3f</td></tr>' $p $p \
    "$(json_field "$s" final_train_loss)" "$(json_field "$s" final_val_loss)" "$best" "$tokens" "$(json_field "$s" seconds)")
  row=$(grep "<tr><td>$p</td>" "$html")
  [ "$row" = "$want" ] && ok || fail "report row of $p: $row, want $want"
done
# Mean and sample standard deviation over the three seeds, as in the gap table.
want=$(for p in 1 2 3; do json_field "$work/seeds_INT/runs/$p/summary.json" final_val_loss; done |
  awk '{ x[NR] = $1; s += $1 } END { m = s / NR; for (i = 1; i <= NR; i++) q += (x[i] - m) ^ 2; printf "%.4f &plusmn; %.4f", m, sqrt(q / (NR - 1)) }')
grep -q "<td>3</td><td>$want</td>" "$html" && ok || fail "gap table mean +- sd: want $want"
# A run folder's pipeline timeline is inlined.
"$bin" schedule --kind 2bw --stages 2 --microbatches 2 --svg "$work/two/runs/sync/schedule.svg" > /dev/null 2>&1 && ok || fail "schedule --svg"
"$bin" report "$work/two" --out "$work/two.html" > /dev/null 2>&1 && ok || fail "report --out"
check "the schedule is in the report" test "$(grep -c '<h2 id="schedules">' "$work/two.html")" -eq 1 -a "$(grep -c '<figure class="schedule"><svg' "$work/two.html")" -eq 1
gap=$(awk -F, '$1 == "sync" { s = $4 } $1 == "2bw-ef-1" { a = $4 } END { printf "%+.4f", a - s }' "$work/two/results.csv")
grep -q "<td>2bw-ef-1</td><td>1</td>.*<td>$gap</td>" "$work/two.html" && ok || fail "gap to sync: want $gap"
expect_error "report of a folder without results" "results.csv" "$bin" report "$work/nowhere"
printf 'point,seed\n' > "$work/badcsv.csv"; mkdir -p "$work/badcsv" && mv "$work/badcsv.csv" "$work/badcsv/results.csv"
expect_error "report of a malformed results table" "results.csv:1: expected the header" "$bin" report "$work/badcsv"
# --out: a page of its own, never over the tables it reads nor in place of a link, FIFO or device
cp "$work/two/results.csv" "$work/two.csv.before"
expect_error "report --out over its own results.csv" "--out $work/two/results.csv: expected a file name ending in .html" \
  "$bin" report "$work/two" --out "$work/two/results.csv"
check "... left results.csv as it was" cmp -s "$work/two.csv.before" "$work/two/results.csv"
mkfifo "$work/page.fifo.html" && expect_error "report --out a FIFO" "exists and is not a regular file" \
  "$bin" report "$work/two" --out "$work/page.fifo.html"
ln -sfn "$work/two.csv.before" "$work/link.html"
expect_error "report --out a link" "exists and is not a regular file" "$bin" report "$work/two" --out "$work/link.html"
# a point listed twice would count its run twice: refused, naming it
mkdir -p "$work/dup" && cp -r "$work/two/runs" "$work/dup/" && cp "$work/two/results.csv" "$work/dup/" \
  && tail -1 "$work/two/results.csv" >> "$work/dup/results.csv"
expect_error "report of a table with a point twice" "is listed twice" "$bin" report "$work/dup"
# an axis name is text in the page, never markup
mkdir -p "$work/xss" && cp -r "$work/two/runs" "$work/xss/" \
  && sed '1s/,delay,/,<b>delay<\/b>,/' "$work/two/results.csv" > "$work/xss/results.csv"
"$bin" report "$work/xss" --out "$work/xss.html" > /dev/null 2>&1 && ! grep -q '<b>delay' "$work/xss.html" \
  && grep -q '&lt;b&gt;delay' "$work/xss.html" && ok || fail "an axis name is escaped in the page"

# Rendered by a browser: the page parses and has the charts and tables.
if ! render_dom "$work/two.html"; then
  fail "$no_chromium"
else
  dom_has_ids val-all time-all gap-table runs-table grid schedules
  check "the validation chart has one line per delay" test "$(grep -o '<path class="series"' "$work/dom.html" | wc -l)" -eq 4
fi
finish
