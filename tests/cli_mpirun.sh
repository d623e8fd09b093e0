#!/usr/bin/env bash
# train under mpirun without --transport (issue 17): one stage per process (--transport mpi, --stages =
# the world size), bitwise the one-process run of the same delay; flags that contradict the world are
# refused naming both; a world of one runs as before. Skipped (77) without mpirun or an MPI build.
set -u
bin=${1:?usage: cli_mpirun.sh path/to/nobubble}
command -v mpirun >/dev/null || { echo "skipped: no mpirun (scripts/setup.sh installs openmpi-bin)"; exit 77; }
# (the libraries are the real binary's, beside the static launcher $bin: src/cli/launcher/)
ldd "$(dirname "$bin")/nobubble-core" | grep -q libmpi || { echo "skipped: nobubble was built without MPI"; exit 77; }
source "$(dirname "$0")/support/cli_harness.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's plugins leak at exit (see cli_pipeline.sh): no leak checks under AddressSanitizer.
mpi=(timeout 120 env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun --oversubscribe --bind-to none)
small_corpus "$bin" "$work/data" 30 && ok || fail "prepare"
small=(--data "$work/data" --set n_layers=2 --set context=16 --batch 2 --microbatches 2 --steps 3 --eval-batches 1
       --threads-per-stage 1)
hash_of() { sed -n 's/^done: .*weights \([0-9a-f]\{16\}\)$/\1/p' "$1"; }

# The reference: the one-process run with 2BW's delay on two stages, one GEMM thread.
OMP_NUM_THREADS=1 "$bin" train "${small[@]}" --stages 2 --delay 2bw --threads 1 > "$work/ref.log" 2>&1 \
  || fail "reference run: $(tail -3 "$work/ref.log")"
want=$(hash_of "$work/ref.log")
"${mpi[@]}" -np 2 "$bin" train "${small[@]}" --pipeline 2bw --out "$work/m" > "$work/m.log" 2>&1 \
  || fail "mpirun -np 2 without --transport and --stages: $(tail -5 "$work/m.log")"
got=$(hash_of "$work/m.log")
[ -n "$want" ] && [ "$want" = "$got" ] && ok || fail "mpirun -np 2: weights '$got', the one-process run's '$want'"
check "one rank reports the run" test "$(grep -c '^done:' "$work/m.log")" -eq 1
check "summary.json: transport mpi" grep -q '"pipeline": {"kind": "2bw", "transport": "mpi"' "$work/m/summary.json"
check "summary.json: 2 stages" grep -q '"stages": 2' "$work/m/summary.json"
"${mpi[@]}" -np 2 "$bin" train "${small[@]}" --pipeline 2bw --stages 2 > "$work/m2.log" 2>&1 \
  && [ "$(hash_of "$work/m2.log")" = "$want" ] && ok || fail "mpirun -np 2 --stages 2: $(tail -3 "$work/m2.log")"

# Contradictions, each refused naming both sides.
expect_error "--transport threads under mpirun" "--transport threads under mpirun (2 processes)" \
  "${mpi[@]}" -np 2 "$bin" train "${small[@]}" --pipeline 2bw --transport threads
expect_error "--stages against the world size" "--stages 3, but mpirun started 2 processes" \
  "${mpi[@]}" -np 2 "$bin" train "${small[@]}" --set n_layers=3 --pipeline 2bw --stages 3
expect_error "mpirun without --pipeline" "mpirun started 2 processes, one per pipeline stage: expected --pipeline" \
  "${mpi[@]}" -np 2 "$bin" train "${small[@]}"
expect_error "an --out holding a run, under mpirun" "--out $work/m already holds a run" \
  "${mpi[@]}" -np 2 "$bin" train "${small[@]}" --pipeline 2bw --out "$work/m"
# ... and with --force replaced, once every rank has loaded (the ranks meet at a barrier first)
"${mpi[@]}" -np 2 "$bin" train "${small[@]}" --pipeline 2bw --out "$work/m" --force --seed 7 > "$work/mf.log" 2>&1 \
  && grep -q '"seed": 7' "$work/m/train_config.json" && ok || fail "--force under mpirun: $(tail -3 "$work/mf.log")"
# ... but not when a later rank fails to load: rank 0 reads only its own stages' tensors, so a flipped byte in the last
# stage's part fails on rank 1 alone, after rank 0 has loaded. Without the barrier rank 0 went on and removed the
# earlier run's files before rank 1's failure ended the run (seen: every time, with stage 1 holding 5 of 6 blocks).
late=(--data "$work/data" --set n_layers=6 --set d_model=128 --set n_heads=4 --set n_kv_heads=4 --set d_ffn=512
      --set context=16 --batch 2 --microbatches 2 --eval-batches 1 --threads-per-stage 1 --pipeline 2bw --split 1,5)
"${mpi[@]}" -np 2 "$bin" train "${late[@]}" --steps 2 --save-dir "$work/lck" --save-every 2 > "$work/lck.log" 2>&1 \
  || fail "a 2-stage checkpoint under mpirun: $(tail -3 "$work/lck.log")"
at=$(( $(stat -c %s "$work/lck/step_000002/state-00002-of-00002.safetensors") - 5 ))
b=$(od -An -tu1 -j "$at" -N1 "$work/lck/step_000002/state-00002-of-00002.safetensors" | tr -d ' ')
printf "\\$(printf '%03o' $(( b ^ 16 )))" |
  dd of="$work/lck/step_000002/state-00002-of-00002.safetensors" bs=1 seek="$at" conv=notrunc status=none
expect_error "--force under mpirun, rank 1's part corrupt" \
  "stage 1 failed: $work/lck/step_000002/state-00002-of-00002.safetensors: tensor '.*': data checksum mismatch" \
  "${mpi[@]}" -np 2 "$bin" train "${late[@]}" --steps 4 --resume "$work/lck/step_000002" --out "$work/m" --force
check "... and the earlier run in --out is whole" test -f "$work/m/summary.json"
check "... its configuration unchanged" grep -q '"seed": 7' "$work/m/train_config.json"
# A refused run under mpirun gives back its locks and removes the folders it made, as a one-process run does (the
# failure ends every rank: rank 0 unlocks first). Here its --export is held by another run.
"$bin" train "${small[@]}" --steps 1000000 --export "$work/HE" > /dev/null 2>&1 &
held=$!
for _ in $(seq 1 600); do [ -e "$work/HE/.nobubble.lock" ] && break; sleep 0.1; done
expect_error "an --export in use, under mpirun" "--export $work/HE is in use by another nobubble run (pid $held)" \
  "${mpi[@]}" -np 2 "$bin" train "${small[@]}" --pipeline 2bw --out "$work/MO2" --save-dir "$work/MS2" --export "$work/HE"
check "... the refused run left none of the folders it made" test ! -e "$work/MO2" -a ! -e "$work/MS2"
kill $held 2>/dev/null; wait $held 2>/dev/null

# A world of one: as before (here the threads pipeline of --stages 2), the same weights.
"${mpi[@]}" -np 1 "$bin" train "${small[@]}" --pipeline 2bw --stages 2 --out "$work/one" > "$work/one.log" 2>&1 \
  && [ "$(hash_of "$work/one.log")" = "$want" ] && ok || fail "mpirun -np 1: $(tail -3 "$work/one.log")"
check "a world of one keeps --transport threads" grep -q '"transport": "threads"' "$work/one/summary.json"
finish
