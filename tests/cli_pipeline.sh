#!/usr/bin/env bash
# The pipeline on MPI processes (mpirun, one rank per stage) and from the command line: final
# weights bitwise equal to the one-process run with the schedule's delay; a failing or killed
# rank ends the whole job promptly with the failed stage named; bad input refused before any work.
set -u
bin=${1:?usage: cli_pipeline.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (scripts/setup.sh installs openmpi-bin)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# More ranks than cores, no binding (this machine may have 2 cores). Under AddressSanitizer, leak
# checking is off for MPI ranks: Open MPI's plugins leak at exit and are unloaded before the report,
# so their leaks cannot be told apart (nobubble's own leaks are checked by the threads runs).
mpi=(env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun --oversubscribe --bind-to none -x NB_PIPELINE_FAULT)

small_corpus "$bin" "$work/data" 30 && ok || fail "prepare"
small=(--data "$work/data" --model tiny --set context=32 --set d_model=64 --set d_ffn=128 --set n_heads=4
       --set n_kv_heads=2 --batch 2 --eval-batches 2 --eval-every 2)

hash_of() { sed -n 's/^done: .*weights \([0-9a-f]\{16\}\)$/\1/p' "$1"; }
val_of() { sed -n 's/^done: .*val loss \([^,]*\),.*/\1/p' "$1"; }

# equal NAME P "one-process flags" "pipeline flags": the MPI run of P ranks ends with the
# one-process run's weights and validation loss (one GEMM thread each, as the workers have).
equal() {
  local name=$1 P=$2 ref=$3 pipe=$4
  OMP_NUM_THREADS=1 "$bin" train "${small[@]}" --set n_layers="$P" --stages "$P" $ref --threads 1 \
    > "$work/ref.log" 2>&1 || { fail "$name: one-process run: $(tail -3 "$work/ref.log")"; return; }
  NB_PIPELINE_FAULT= timeout 120 "${mpi[@]}" -np "$P" "$bin" train "${small[@]}" --set n_layers="$P" --stages "$P" \
    $pipe --transport mpi --threads-per-stage 1 > "$work/mpi.log" 2>&1 || { fail "$name: mpirun: $(tail -5 "$work/mpi.log")"; return; }
  local a b
  a=$(hash_of "$work/ref.log"); b=$(hash_of "$work/mpi.log")
  [ -n "$a" ] && [ "$a" = "$b" ] && ok || fail "$name: MPI weights $b, one process $a"
  a=$(val_of "$work/ref.log"); b=$(val_of "$work/mpi.log")
  [ -n "$a" ] && [ "$a" = "$b" ] && ok || fail "$name: MPI val loss $b, one process $a"
  [ "$(grep -c '^done:' "$work/mpi.log")" -eq 1 ] && ok || fail "$name: one rank reports the run"
}
equal "2bw P=2 adamw" 2 "--delay 2bw --microbatches 2 --steps 4" "--pipeline 2bw --microbatches 2 --steps 4"
equal "2bw P=3 muon +EF" 3 "--delay 2bw --ef 1 --optimizer muon --microbatches 3 --steps 4" \
  "--pipeline 2bw --ef 1 --optimizer muon --microbatches 3 --steps 4"
equal "1f1b P=3 muon" 3 "--optimizer muon --microbatches 3 --steps 3" "--pipeline 1f1b --optimizer muon --microbatches 3 --steps 3"
equal "gpipe P=2 adamw" 2 "--microbatches 2 --steps 3" "--pipeline gpipe --microbatches 2 --steps 3"
equal "pipedream P=3 adamw +EF" 3 "--delay pipedream --ef 1 --steps 6" "--pipeline pipedream --ef 1 --steps 6"
equal "2bw P=2 sync start, clip, untied" 2 "--delay 2bw --sync-start 2 --clip 0.5 --set tied=0 --microbatches 2 --steps 4" \
  "--pipeline 2bw --sync-start 2 --clip 0.5 --set tied=0 --microbatches 2 --steps 4"

# Threads from the command line: the run's report and summary.json's per-stage measures.
"$bin" train "${small[@]}" --set n_layers=2 --stages 2 --pipeline 2bw --microbatches 2 --steps 4 --out "$work/thr" \
  > "$work/thr.log" 2>&1 && ok || fail "threads pipeline: $(tail -3 "$work/thr.log")"
check "report per stage" grep -q "stage 1: busy .* idle .*%.*MiB" "$work/thr.log"
check "summary.json has the pipeline's stages" grep -q '"pipeline": {"kind": "2bw", "transport": "threads".*"steady_idle_fraction"' "$work/thr/summary.json"
[ "$(wc -l < "$work/thr/metrics.jsonl")" -eq 4 ] && ok || fail "metrics.jsonl: one line per step"
# Every measure but the times equals the one-process run's (losses, update norms, version
# distances, delays, gradient norms, validation losses): the stages' parts are summed in order.
OMP_NUM_THREADS=1 "$bin" train "${small[@]}" --set n_layers=3 --stages 3 --delay 2bw --clip 0.3 --microbatches 3 --steps 4 \
  --threads 1 --quiet --out "$work/m1" > /dev/null 2>&1 || fail "one-process run for metrics"
"$bin" train "${small[@]}" --set n_layers=3 --stages 3 --pipeline 2bw --clip 0.3 --microbatches 3 --steps 4 \
  --threads-per-stage 1 --quiet --out "$work/m2" > /dev/null 2>&1 || fail "pipeline run for metrics"
untimed() { sed -e 's/"time_s": [^,]*, "tokens_per_s": [^,]*, //' "$1"; }
[ -s "$work/m1/metrics.jsonl" ] && grep -q grad_norm "$work/m1/metrics.jsonl" && [ "$(untimed "$work/m1/metrics.jsonl")" = "$(untimed "$work/m2/metrics.jsonl")" ] && ok ||
  fail "pipeline metrics equal the one-process run's: $(diff <(untimed "$work/m1/metrics.jsonl") <(untimed "$work/m2/metrics.jsonl") | head -4)"

# Faults: a rank that fails, and one that is killed, end the job (timeout: no hang).
NB_PIPELINE_FAULT=1:2 timeout 120 "${mpi[@]}" -np 3 "$bin" train "${small[@]}" --set n_layers=3 --stages 3 \
  --pipeline 2bw --microbatches 3 --steps 4 --transport mpi > "$work/fault.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "stage 1 failed: injected fault" "$work/fault.log" && ok ||
  fail "a failing rank ends the job (rc $rc): $(tail -5 "$work/fault.log")"
NB_PIPELINE_FAULT=2:1:kill timeout 120 "${mpi[@]}" -np 3 "$bin" train "${small[@]}" --set n_layers=3 --stages 3 \
  --pipeline 2bw --microbatches 3 --steps 4 --transport mpi > "$work/kill.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qi "rank 2 .*signal 9\|rank 2 .*killed" "$work/kill.log" && ok ||
  fail "a killed rank ends the job, naming it (rc $rc): $(tail -8 "$work/kill.log")"
# A rank that stalls (SIGSTOP: alive to MPI, but silent) is detected by the others within --peer-timeout:
# the job ends naming the stage that was waited for, instead of hanging.
NB_PIPELINE_FAULT=1:2:stall timeout 120 "${mpi[@]}" -np 3 "$bin" train "${small[@]}" --set n_layers=3 --stages 3 \
  --pipeline 2bw --microbatches 3 --steps 6 --transport mpi --peer-timeout 2 > "$work/stall.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "no message from stage 1 .* for 2 s: that stage has stalled or died" "$work/stall.log" && ok ||
  fail "a stalled rank ends the job, naming it (rc $rc): $(tail -5 "$work/stall.log")"
expect_error "bad --peer-timeout" "--peer-timeout -1: out of range" "$bin" train "${small[@]}" --stages 2 --pipeline 2bw \
  --microbatches 2 --peer-timeout -1
NB_PIPELINE_FAULT=0:1 timeout 60 "$bin" train "${small[@]}" --set n_layers=2 --stages 2 --pipeline 1f1b \
  --microbatches 2 --steps 3 > "$work/tfault.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "stage 0 failed: injected fault" "$work/tfault.log" && ok ||
  fail "a failing worker thread ends the run (rc $rc): $(tail -3 "$work/tfault.log")"

# Bad input, before any work.
expect_error "world size differs from --stages" "with 2 MPI processes: expected one process per stage" \
  "${mpi[@]}" -np 2 "$bin" train "${small[@]}" --set n_layers=3 --stages 3 --pipeline 2bw --microbatches 3 --steps 2 --transport mpi
expect_error "unknown schedule" "--pipeline 'zigzag': expected one of gpipe, 1f1b, pipedream, 2bw" \
  "$bin" train "${small[@]}" --stages 2 --pipeline zigzag
expect_error "unknown transport" "--transport 'tcp': expected one of threads, mpi" \
  "$bin" train "${small[@]}" --stages 2 --pipeline 2bw --microbatches 2 --transport tcp
expect_error "M < P" "needs M >= P" "$bin" train "${small[@]}" --set n_layers=2 --stages 2 --pipeline 1f1b --microbatches 1
expect_error "P > blocks" "stages = 3: expected 1 <= stages <= n_layers (2)" \
  "$bin" train "${small[@]}" --set n_layers=2 --stages 3 --pipeline gpipe --microbatches 3
expect_error "a conflicting --delay" "not --delay sync" "$bin" train "${small[@]}" --stages 2 --pipeline 2bw --delay sync --microbatches 2
expect_error "pipedream with M > 1" "expected --microbatches 1" "$bin" train "${small[@]}" --stages 2 --pipeline pipedream --microbatches 2
expect_error "--transport without --pipeline" "need --pipeline" "$bin" train "${small[@]}" --stages 2 --transport mpi

# Checkpoints of an MPI pipeline run: every rank writes its own part, the first completes the folder
# (Hugging Face's sharded layout plus the state's index). Resuming from the middle, on MPI, on
# threads or in one process, ends bitwise where the uninterrupted run ends; eval reads the parts.
ckp=(--set n_layers=3 --stages 3 --pipeline 2bw --ef 1 --optimizer muon --microbatches 3 --steps 6)
timeout 120 "${mpi[@]}" -np 3 "$bin" train "${small[@]}" "${ckp[@]}" --transport mpi --threads-per-stage 1 \
  --save-dir "$work/mck" --save-every 3 --out "$work/mrun" > "$work/mck.log" 2>&1 || fail "MPI run with checkpoints: $(tail -5 "$work/mck.log")"
full=$(hash_of "$work/mck.log")
c3=$work/mck/step_000003
for f in state.safetensors.index.json model.safetensors.index.json config.json state-00001-of-00003.safetensors \
         state-00003-of-00003.safetensors model-00002-of-00003.safetensors; do
  [ -f "$c3/$f" ] || fail "MPI checkpoint lacks $f: $(ls "$c3" 2>&1 | tr '\n' ' ')"
done
[ ! -e "$c3/state.safetensors" ] && [ ! -e "$work/mck/step_000003.partial" ] && ok || fail "MPI checkpoint: parts only, installed"
timeout 120 "${mpi[@]}" -np 3 "$bin" train "${small[@]}" "${ckp[@]}" --transport mpi --threads-per-stage 1 \
  --resume "$c3" > "$work/mres.log" 2>&1 || fail "MPI resume: $(tail -5 "$work/mres.log")"
[ -n "$full" ] && [ "$(hash_of "$work/mres.log")" = "$full" ] && ok ||
  fail "MPI resume from step 3 equals the uninterrupted run: $(hash_of "$work/mres.log") vs $full"
"$bin" train "${small[@]}" "${ckp[@]}" --resume "$c3" > "$work/tres.log" 2>&1 || fail "threads resume of MPI parts: $(tail -3 "$work/tres.log")"
[ "$(hash_of "$work/tres.log")" = "$full" ] && ok || fail "threads resume of MPI parts equals the uninterrupted run"
OMP_NUM_THREADS=1 "$bin" train "${small[@]}" --set n_layers=3 --stages 3 --delay 2bw --ef 1 --optimizer muon --microbatches 3 \
  --steps 6 --threads 1 --resume "$c3" > "$work/ores.log" 2>&1 || fail "one-process resume of MPI parts: $(tail -3 "$work/ores.log")"
[ "$(hash_of "$work/ores.log")" = "$full" ] && ok || fail "one-process resume of MPI parts equals the uninterrupted run"
got=$("$bin" eval --checkpoint "$work/mck/step_000006" --data "$work/data" --batch 2 --batches 2 --json |
  sed -n 's/.*"val_loss": \([^,]*\),.*/\1/p')
want=$(sed -n 's/.*"final_val_loss": \([^,]*\),/\1/p' "$work/mrun/summary.json")
[ -n "$got" ] && [ "$got" = "$want" ] && ok || fail "eval of MPI parts: $got, the run's final validation loss: $want"
# A part that is missing, or from another save, is named.
cp -r "$c3" "$work/bad3"; rm "$work/bad3/state-00002-of-00003.safetensors"
expect_error "a missing part" "part $work/bad3/state-00002-of-00003.safetensors is missing" \
  "$bin" train "${small[@]}" "${ckp[@]}" --resume "$work/bad3"
rm -rf "$work/bad3"; cp -r "$c3" "$work/bad3"
cp "$work/mck/step_000006/state-00002-of-00003.safetensors" "$work/bad3/"
expect_error "parts of two saves" "state-00002-of-00003.safetensors is of step 6, .* of step 3: parts of two checkpoints" \
  "$bin" train "${small[@]}" "${ckp[@]}" --resume "$work/bad3"
# A pipeline run on threads saves checkpoints; Ctrl-C (SIGINT) ends it cleanly, naming the newest.
"$bin" train "${small[@]}" --set n_layers=2 --stages 2 --pipeline 2bw --microbatches 2 --steps 4 --save-dir "$work/ck" \
  --save-every 2 > "$work/ck.log" 2>&1 && [ -f "$work/ck/step_000002/state.safetensors.index.json" ] && [ -f "$work/ck/step_000004/model.safetensors.index.json" ] &&
  grep -q "checkpoint saved $work/ck/step_000004" "$work/ck.log" && ok || fail "pipeline checkpoints: $(tail -3 "$work/ck.log")"
rm -rf "$work/ck"
# Ctrl-C (SIGINT) stops a pipeline run a few steps later (every stage switches to the schedule cut
# there), saves a checkpoint and names it; resuming from it ends bitwise where the uninterrupted run
# ends. On MPI through mpirun, SIGUSR1 (mpirun forwards it; it kills the job on SIGINT).
# stop_and_resume NAME SIGNAL LAUNCHER... -- FLAGS...
stop_and_resume() {
  local name=$1 sig=$2; shift 2
  local launch=() flags
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done; shift
  flags=("$@")
  rm -rf "$work/sck"
  timeout 300 "${launch[@]}" "$bin" train "${small[@]}" "${flags[@]}" --steps 200 > "$work/s_full.log" 2>&1 ||
    { fail "$name: uninterrupted run: $(tail -3 "$work/s_full.log")"; return; }
  # (no timeout(1) here: it would take the signal itself; ctest's timeout guards against a hang)
  "${launch[@]}" "$bin" train "${small[@]}" "${flags[@]}" --steps 200 --save-dir "$work/sck" --save-every 5 \
    > "$work/s_int.log" 2>&1 &
  local pid=$! rc at
  for _ in $(seq 1 600); do [ -f "$work/sck/step_000005/state.safetensors.index.json" ] && break; sleep 0.1; done
  kill -"$sig" $pid; wait_stopped $pid "$work/s_int.log"; rc=$?  # (bounded: mpirun may hang after the ranks' abort)
  at=$(sed -n 's/.*stopped on request after step \([0-9]*\); resume with --resume .*/\1/p' "$work/s_int.log")
  [ $rc -ne 0 ] && [ -n "$at" ] && [ "$at" -lt 200 ] && grep -q "resume with --resume $work/sck/step_$(printf %06d "$at")$" "$work/s_int.log" &&
    ok || { fail "$name: $sig stops the run naming its checkpoint (rc $rc): $(tail -3 "$work/s_int.log")"; return; }
  timeout 300 "${launch[@]}" "$bin" train "${small[@]}" "${flags[@]}" --steps 200 --resume "$work/sck/step_$(printf %06d "$at")" \
    > "$work/s_res.log" 2>&1 || { fail "$name: resume: $(tail -3 "$work/s_res.log")"; return; }
  local a b
  a=$(hash_of "$work/s_full.log"); b=$(hash_of "$work/s_res.log")
  [ -n "$a" ] && [ "$a" = "$b" ] && ok || fail "$name: stopped at step $at and resumed: weights $b, uninterrupted $a"
}
# One process drives every stage and the coordinator in one loop, whatever their number (65 stages: more
# endpoints than an interleaved worker's 64 chunks).
"$bin" train "${small[@]}" --set n_layers=65 --stages 65 --steps 1 --out "$work/many" > "$work/many.log" 2>&1 \
  && ok || fail "one process of 65 stages: $(tail -2 "$work/many.log")"
stop_and_resume "threads 1f1b P=2" INT env -- --set n_layers=2 --stages 2 --pipeline 1f1b --microbatches 2
stop_and_resume "threads interleaved 2 x 2" INT env -- --set n_layers=4 --stages 2 --pipeline interleaved --microbatches 2
NB_PIPELINE_FAULT= stop_and_resume "MPI 2bw+EF P=3" USR1 "${mpi[@]}" -np 3 -- --set n_layers=3 --stages 3 --pipeline 2bw \
  --ef 1 --microbatches 3 --transport mpi --threads-per-stage 1
finish
