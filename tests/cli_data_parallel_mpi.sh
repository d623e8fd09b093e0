#!/usr/bin/env bash
# Data parallelism over MPI (docs/data-parallel.md): mpirun -np D x P ... --data-parallel D, D = 2 replicas of
# P = 1 and 2 stages (2 and 4 ranks, oversubscribed). Each ends bitwise on the weights, validation loss and
# metrics of the one-process run with the same M micro-batches and --data-parallel 2 (which computes the
# replicas' groups in turn and adds them in the same order), and within float rounding of the one-process run
# with M micro-batches in one group (the same gradients summed in another grouping: 1e-5 relative, see
# cli_data_parallel.sh). The sum in buckets started during the backward (--dp-bucket-mib: small, many buckets;
# 0, none) gives the same bits, also with D = 3, and the buckets are counted. Checkpoints (one part per stage, written by replica 0) resume bitwise on MPI and in
# one process; a stop on request ends every replica; a stalled or killed rank ends the job naming it; a
# world that is not D x P is refused before any work. Skipped (77) without mpirun or an MPI build.
set -u
bin=${1:?usage: cli_data_parallel_mpi.sh path/to/nobubble}
command -v mpirun >/dev/null || { echo "skipped: no mpirun (scripts/setup.sh installs openmpi-bin)"; exit 77; }
# (the libraries are the real binary's, beside the static launcher $bin: src/cli/launcher/)
ldd "$(dirname "$bin")/nobubble-core" | grep -q libmpi || { echo "skipped: nobubble was built without MPI"; exit 77; }
source "$(dirname "$0")/support/cli_harness.sh"
source "$(dirname "$0")/support/metrics_close.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# Open MPI's plugins leak at exit (see cli_pipeline.sh): no leak checks under AddressSanitizer.
mpi=(env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun --oversubscribe --bind-to none
     -x NB_PIPELINE_FAULT -x NB_PIPELINE_FAULT_REPLICA)
small_corpus "$bin" "$work/data" 30 && ok || fail "prepare"
small=(--data "$work/data" --model tiny --set context=32 --set d_model=64 --set d_ffn=128 --set n_heads=4
       --set n_kv_heads=2 --set n_layers=2 --batch 2 --eval-batches 2 --eval-every 2)
hash_of() { sed -n 's/^done: .*weights \([0-9a-f]\{16\}\)$/\1/p' "$1"; }
val_of() { sed -n 's/^done: .*val loss \([^,]*\),.*/\1/p' "$1"; }
untimed() { sed -e 's/"time_s": [^,]*, "tokens_per_s": [^,]*, //' "$1"; }
export NB_PIPELINE_FAULT= NB_PIPELINE_FAULT_REPLICA=

# equal NAME NP "one-process flags" "MPI flags": mpirun -np NP with --data-parallel 2 against one process.
equal() {
  local name=$1 np=$2 ref=$3 pipe=$4 a b
  "$bin" train "${small[@]}" $ref --data-parallel 2 --threads 1 --out "$work/ref" --force > "$work/ref.log" 2>&1 ||
    { fail "$name: one-process run: $(tail -3 "$work/ref.log")"; return; }
  "$bin" train "${small[@]}" $ref --threads 1 --out "$work/one" --force > "$work/one.log" 2>&1 ||
    { fail "$name: one-process run without replicas: $(tail -3 "$work/one.log")"; return; }
  timeout 120 "${mpi[@]}" -np "$np" "$bin" train "${small[@]}" $pipe --data-parallel 2 --threads-per-stage 1 \
    --out "$work/mpi" --force > "$work/mpi.log" 2>&1 || { fail "$name: mpirun: $(tail -5 "$work/mpi.log")"; return; }
  a=$(hash_of "$work/ref.log"); b=$(hash_of "$work/mpi.log")
  [ -n "$a" ] && [ "$a" = "$b" ] && ok || fail "$name: MPI weights $b, one process $a"
  a=$(val_of "$work/ref.log"); b=$(val_of "$work/mpi.log")
  [ -n "$a" ] && [ "$a" = "$b" ] && ok || fail "$name: MPI val loss $b, one process $a"
  [ "$(untimed "$work/ref/metrics.jsonl")" = "$(untimed "$work/mpi/metrics.jsonl")" ] && ok ||
    fail "$name: metrics differ: $(diff <(untimed "$work/ref/metrics.jsonl") <(untimed "$work/mpi/metrics.jsonl") | head -4)"
  [ "$(grep -c '^done:' "$work/mpi.log")" -eq 1 ] && ok || fail "$name: one rank reports the run"
  b=$(metrics_close "$work/one/metrics.jsonl" "$work/mpi/metrics.jsonl" 1e-5) && ok || fail "$name: against one group: $b"
}
# stage_buckets FILE: each stage's buckets started in backwards, from summary.json ("3 2" for two stages).
stage_buckets() { grep -o '"buckets": [0-9]*' "$1" | sed 's/.*: //' | tr '\n' ' ' | sed 's/ $//'; }
# bucketed NAME NP STEPS "MPI flags", after equal with the same flags (its one-process run in $work/ref): the sum
# over the replicas in buckets of 0.01 MiB (here a bucket per block, the head's range and the embedding: at least
# 2 per stage and step, started in the backward), and in none (0: one sum at REDUCE), end on the same weights,
# validation loss and metrics: a bucket's size never changes the bits. summary.json counts the buckets each
# stage started in backwards (none with 0), so that a sum that went back to REDUCE alone fails.
bucketed() {
  local name=$1 np=$2 steps=$3 pipe=$4 size a b n
  for size in 0.01 0; do
    timeout 120 "${mpi[@]}" -np "$np" "$bin" train "${small[@]}" $pipe --data-parallel 2 --threads-per-stage 1 \
      --dp-bucket-mib $size --out "$work/mpi" --force > "$work/mpi.log" 2>&1 ||
      { fail "$name, --dp-bucket-mib $size: mpirun: $(tail -5 "$work/mpi.log")"; continue; }
    a=$(hash_of "$work/ref.log"); b=$(hash_of "$work/mpi.log")
    [ -n "$a" ] && [ "$a" = "$b" ] && ok || fail "$name, --dp-bucket-mib $size: MPI weights $b, one process $a"
    a=$(val_of "$work/ref.log"); b=$(val_of "$work/mpi.log")
    [ -n "$a" ] && [ "$a" = "$b" ] && ok || fail "$name, --dp-bucket-mib $size: MPI val loss $b, one process $a"
    [ "$(untimed "$work/ref/metrics.jsonl")" = "$(untimed "$work/mpi/metrics.jsonl")" ] && ok ||
      fail "$name, --dp-bucket-mib $size: metrics differ"
    b=$(stage_buckets "$work/mpi/summary.json")
    n=$(echo "$b" | wc -w)
    if [ "$size" = 0 ]; then
      [ "$n" -eq $((np / 2)) ] && [ -z "$(echo "$b" | tr -d ' 0')" ] && ok ||
        fail "$name, --dp-bucket-mib 0: no bucket in a backward (buckets per stage: '$b')"
    else
      [ "$n" -eq $((np / 2)) ] && ! echo "$b" | tr ' ' '\n' | awk -v least=$((2 * steps)) '$1 < least {bad = 1} END {exit !bad}' &&
        ok || fail "$name, --dp-bucket-mib $size: every stage starts at least 2 buckets a step in its backwards (buckets per stage: '$b')"
    fi
  done
}
equal "P=1 1f1b adamw" 2 "--microbatches 4 --steps 4" "--pipeline 1f1b --stages 1 --microbatches 4 --steps 4"
bucketed "P=1 1f1b adamw" 2 4 "--pipeline 1f1b --stages 1 --microbatches 4 --steps 4"
equal "P=2 2bw muon +EF +clip, tied" 4 "--stages 2 --delay 2bw --optimizer muon --ef 1 --clip 0.5 --microbatches 4 --steps 4" \
  "--pipeline 2bw --optimizer muon --ef 1 --clip 0.5 --microbatches 4 --steps 4"
bucketed "P=2 2bw muon +EF +clip, tied" 4 4 "--pipeline 2bw --optimizer muon --ef 1 --clip 0.5 --microbatches 4 --steps 4"
equal "P=2 pipedream untied" 4 "--stages 2 --delay pipedream --set tied=0 --microbatches 2 --steps 6" \
  "--pipeline pipedream --set tied=0 --microbatches 2 --steps 6"
equal "P=1 gpipe bf16" 2 "--precision bf16 --microbatches 2 --steps 3" "--pipeline gpipe --precision bf16 --microbatches 2 --steps 3"
check "summary.json: 2 replicas" grep -q '"data_parallel": 2' "$work/mpi/summary.json"

# D = 3 replicas (a rank's own values between two others' in the sum), buckets of 0.01 MiB: the bits of one
# process computing the 3 groups in turn.
"$bin" train "${small[@]}" --microbatches 3 --steps 3 --data-parallel 3 --threads 1 --out "$work/ref3" --force \
  > "$work/ref3.log" 2>&1 || fail "D=3: one-process run: $(tail -3 "$work/ref3.log")"
timeout 120 "${mpi[@]}" -np 3 "$bin" train "${small[@]}" --pipeline 1f1b --stages 1 --microbatches 3 --steps 3 \
  --data-parallel 3 --threads-per-stage 1 --dp-bucket-mib 0.01 --out "$work/mpi3" --force > "$work/mpi3.log" 2>&1 &&
  [ -n "$(hash_of "$work/ref3.log")" ] && [ "$(hash_of "$work/ref3.log")" = "$(hash_of "$work/mpi3.log")" ] &&
  [ "$(untimed "$work/ref3/metrics.jsonl")" = "$(untimed "$work/mpi3/metrics.jsonl")" ] && ok ||
  fail "D=3 in buckets: MPI $(hash_of "$work/mpi3.log"), one process $(hash_of "$work/ref3.log"): $(tail -3 "$work/mpi3.log")"
[ "$(stage_buckets "$work/mpi3/summary.json")" -ge 6 ] 2>/dev/null && ok ||
  fail "D=3: buckets started in backwards: '$(stage_buckets "$work/mpi3/summary.json")'"
expect_error "a bad --dp-bucket-mib" "--dp-bucket-mib -1: out of range, expected a number from 0 to 65536" \
  "$bin" train "${small[@]}" --microbatches 2 --data-parallel 2 --dp-bucket-mib -1
expect_error "a --dp-bucket-mib that is no number" "--dp-bucket-mib 'x': expected a decimal number" \
  "$bin" train "${small[@]}" --microbatches 2 --data-parallel 2 --dp-bucket-mib x

# Checkpoints: one part per stage (replica 0 writes them); resumed on MPI and in one process, the
# uninterrupted run's weights.
ckp=(--pipeline 2bw --microbatches 4 --steps 6 --data-parallel 2 --optimizer muon --ef 1 --threads-per-stage 1)
timeout 120 "${mpi[@]}" -np 4 "$bin" train "${small[@]}" "${ckp[@]}" --save-dir "$work/ck" --save-every 3 > "$work/full.log" 2>&1 ||
  fail "checkpointed run: $(tail -3 "$work/full.log")"
full=$(hash_of "$work/full.log")
[ "$(ls "$work/ck/step_000003" | grep -c '^state-0000[12]-of-00002.safetensors$')" -eq 2 ] && ok ||
  fail "the checkpoint's parts: $(ls "$work/ck/step_000003")"
timeout 120 "${mpi[@]}" -np 4 "$bin" train "${small[@]}" "${ckp[@]}" --resume "$work/ck/step_000003" > "$work/res.log" 2>&1 &&
  [ -n "$full" ] && [ "$(hash_of "$work/res.log")" = "$full" ] && ok || fail "MPI resume: $(tail -3 "$work/res.log")"
"$bin" train "${small[@]}" --stages 2 --delay 2bw --microbatches 4 --steps 6 --data-parallel 2 --optimizer muon --ef 1 \
  --threads 1 --resume "$work/ck/step_000003" > "$work/ores.log" 2>&1 && [ "$(hash_of "$work/ores.log")" = "$full" ] && ok ||
  fail "one-process resume of the replicas' checkpoint: $(tail -3 "$work/ores.log")"

# A stop on request (SIGUSR1 to mpirun, which forwards it): every replica follows the coordinator's end, the
# checkpoint resumes to the uninterrupted run's weights.
stop=(--pipeline 2bw --microbatches 4 --data-parallel 2 --threads-per-stage 1 --steps 100 --quiet)
timeout 120 "${mpi[@]}" -np 4 "$bin" train "${small[@]}" "${stop[@]}" > "$work/s_full.log" 2>&1 || fail "uninterrupted: $(tail -3 "$work/s_full.log")"
# (no timeout(1) here: it would take the signal itself; ctest's timeout guards against a hang)
"${mpi[@]}" -np 4 "$bin" train "${small[@]}" "${stop[@]}" --save-dir "$work/sck" --save-every 5 > "$work/s_int.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do [ -f "$work/sck/step_000005/state.safetensors.index.json" ] && break; sleep 0.1; done
kill -USR1 $pid; wait_stopped $pid "$work/s_int.log"  # (bounded: mpirun may hang after the ranks' abort)
at=$(sed -n 's/.*stopped on request after step \([0-9]*\); resume with --resume .*/\1/p' "$work/s_int.log")
if [ -n "$at" ]; then
  ok
  timeout 120 "${mpi[@]}" -np 4 "$bin" train "${small[@]}" "${stop[@]}" --resume "$work/sck/step_$(printf %06d "$at")" \
    > "$work/s_res.log" 2>&1 && [ "$(hash_of "$work/s_res.log")" = "$(hash_of "$work/s_full.log")" ] && ok ||
    fail "stopped at step $at and resumed: $(tail -3 "$work/s_res.log")"
else
  fail "SIGUSR1 stops the replicas naming a checkpoint: $(tail -3 "$work/s_int.log")"
fi

# A rank that stalls (SIGSTOP: alive to MPI, silent) is found within --peer-timeout by the replica waiting for
# its gradient (or, its values sent in buckets before it stalled, for it to take the other's), which names it; a
# rank killed outright is named by mpirun.
NB_PIPELINE_FAULT=0:2:stall NB_PIPELINE_FAULT_REPLICA=1 timeout 120 "${mpi[@]}" -np 2 "$bin" train "${small[@]}" \
  --pipeline 1f1b --microbatches 2 --data-parallel 2 --steps 6 --peer-timeout 2 > "$work/stall.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] &&
  grep -qE "(no values from|its values not taken by) replica 1 \(rank 1\) for 2 s" "$work/stall.log" && ok ||
  fail "a stalled replica ends the job, naming it (rc $rc): $(tail -5 "$work/stall.log")"
NB_PIPELINE_FAULT=1:2:kill NB_PIPELINE_FAULT_REPLICA=1 timeout 120 "${mpi[@]}" -np 4 "$bin" train "${small[@]}" \
  --pipeline 2bw --microbatches 4 --data-parallel 2 --steps 6 > "$work/kill.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qi "rank 3 .*signal 9\|rank 3 .*killed" "$work/kill.log" && ok ||
  fail "a killed rank ends the job, naming it (rc $rc): $(tail -8 "$work/kill.log")"

# --dp-bucket-mib is said to do nothing where the replicas sum without buckets (zbh1), and not where they use them
timeout 120 "${mpi[@]}" -np 2 "$bin" train "${small[@]}" --pipeline zbh1 --microbatches 2 --data-parallel 2 --steps 2 \
  --dp-bucket-mib 1 --out "$work/zb" --force > "$work/zb.log" 2>&1 || fail "zbh1 with replicas: $(tail -3 "$work/zb.log")"
grep -q "warning: --dp-bucket-mib does nothing here" "$work/zb.log" && ok || fail "zbh1: no warning: $(head -3 "$work/zb.log")"
timeout 120 "${mpi[@]}" -np 2 "$bin" train "${small[@]}" --pipeline 1f1b --microbatches 2 --data-parallel 2 --steps 2 \
  --dp-bucket-mib 1 --out "$work/fb" --force > "$work/fb.log" 2>&1 || fail "1f1b with replicas: $(tail -3 "$work/fb.log")"
! grep -q "warning: --dp-bucket-mib" "$work/fb.log" && ok || fail "1f1b's buckets said unused: $(head -3 "$work/fb.log")"

# Worlds that are not D x P, refused before any work, naming both numbers.
expect_error "a world not a multiple of D" "--data-parallel 2, but mpirun started 3 processes: expected a multiple of 2" \
  "${mpi[@]}" -np 3 "$bin" train "${small[@]}" --pipeline 2bw --microbatches 4 --data-parallel 2
expect_error "--stages x D against the world" "--stages 1 x --data-parallel 2 = 2 processes, but mpirun started 4" \
  "${mpi[@]}" -np 4 "$bin" train "${small[@]}" --pipeline 1f1b --stages 1 --microbatches 4 --data-parallel 2
expect_error "--transport mpi against the world" "--stages 2 x --data-parallel 2 = 4 processes, but mpirun started 2" \
  "${mpi[@]}" -np 2 "$bin" train "${small[@]}" --pipeline 2bw --stages 2 --transport mpi --microbatches 4 --data-parallel 2
expect_error "--transport mpi without mpirun" "but this process was not started by an MPI launcher (mpirun -np 4)" \
  "$bin" train "${small[@]}" --pipeline 2bw --stages 2 --transport mpi --microbatches 4 --data-parallel 2
expect_error "too few micro-batches per replica" "--microbatches 2 over --data-parallel 2 replicas is 1 per replica" \
  "${mpi[@]}" -np 4 "$bin" train "${small[@]}" --pipeline 2bw --microbatches 2 --data-parallel 2
finish
