#!/usr/bin/env bash
# Interleaved 1F1B trained: P workers, each holding v model chunks (virtual stages c P + s), run their
# chunks' forwards and backwards in the interleaved order on one thread each; every run ends with bitwise
# the weights and losses of the one-process run split into P x v stages (and of 1F1B's pipeline of P x v
# stages): 2 and 3 workers, 2 and 4 chunks, tied and untied, Muon with clipping, bf16, resumed; over MPI
# (a rank per worker, its chunks' endpoints on it), with 2 replicas (whole sums and buckets), from
# --init-from, and resumed there. What it does not do is refused: --split, --chunks 1, more parts than
# blocks, M (per replica) not a multiple of P.
set -u
bin=${1:?usage: cli_interleaved.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
small_corpus "$bin" "$work/data" 80 && ok || fail "prepare"
base=(--data "$work/data" --model tiny --steps 4 --batch 8 --seq 32 --microbatches 4 --eval-batches 1
      --threads-per-stage 1 --precision fp32 --quiet)
run() {  # run OUT ARGS...: trains into $work/OUT
  local out=$1; shift
  "$bin" train "${base[@]}" "$@" --out "$work/$out" > "$work/$out.log" 2>&1 || fail "$out: $(tail -3 "$work/$out.log")"
}

# 2 workers x 2 chunks of tiny's 4 blocks, tied, against 4 stages in one process and 1F1B's 4 workers.
run il2 --stages 2 --pipeline interleaved
run seq4 --stages 4
run ofb4 --stages 4 --pipeline 1f1b
same_run "interleaved 2 x 2 equals the one-process run of 4 stages" "$work/seq4" "$work/il2"
same_run "interleaved 2 x 2 equals 1F1B's 4-stage pipeline" "$work/ofb4" "$work/il2"
check "summary names interleaved" grep -q '"kind": "interleaved"' "$work/il2/summary.json"
# 3 workers x 2 chunks, untied, Muon with global clipping (the norms of all 6 parts).
more=(--set n_layers=6 --set tied=0 --optimizer muon --clip 1 --microbatches 6)
run il3 --stages 3 --pipeline interleaved "${more[@]}"
run seq6 --stages 6 "${more[@]}"
same_run "interleaved 3 x 2, untied, Muon, clipping, equals the one-process run of 6 stages" "$work/seq6" "$work/il3"
# 2 workers x 4 chunks of 8 blocks.
run il24 --stages 2 --chunks 4 --pipeline interleaved --set n_layers=8
run seq8 --stages 8 --set n_layers=8
same_run "interleaved 2 x 4 equals the one-process run of 8 stages" "$work/seq8" "$work/il24"
# bf16.
run ilbf --stages 2 --pipeline interleaved --precision bf16
run seqbf --stages 4 --precision bf16
same_run "interleaved in bf16 equals the one-process bf16 run" "$work/seqbf" "$work/ilbf"
# Resume: a checkpoint after 2 steps (its 4 parts), the rest resumed from it.
run half --stages 2 --pipeline interleaved --save-dir "$work/ck" --save-every 2
run resumed --stages 2 --pipeline interleaved --resume "$work/ck/step_000002"
[ -n "$(hash_of "$work/resumed")" ] && [ "$(hash_of "$work/il2")" = "$(hash_of "$work/resumed")" ] && ok \
  || fail "interleaved resumed: weights '$(hash_of "$work/resumed")', the whole run's '$(hash_of "$work/il2")'"

if has_mpi "$bin"; then
  # Endpoints 0 and 2 on rank 0 (with the coordinator), 1 and 3 on rank 1.
  mpi ilmpi 2 --stages 2 --pipeline interleaved
  same_run "interleaved 2 x 2 over MPI equals the one-process run of 4 stages" "$work/seq4" "$work/ilmpi"
  # 3 ranks x 2 chunks, untied, Muon, clipping (the norm's parts from 6 endpoints on 3 ranks).
  mpi ilmpi3 3 --stages 3 --pipeline interleaved "${more[@]}"
  same_run "interleaved 3 x 2 over MPI equals the one-process run of 6 stages" "$work/seq6" "$work/ilmpi3"
  # 2 replicas (4 ranks): each rank sums its 2 virtual stages' gradients apart, against one process
  # computing both replicas' groups.
  run seqdp --stages 4 --data-parallel 2
  mpi ildp 4 --stages 2 --pipeline interleaved --data-parallel 2
  same_run "interleaved with 2 replicas over MPI equals the one-process run with 2 groups" "$work/seqdp" "$work/ildp"
  # The same with the sum in small buckets started during each virtual stage's last backward (a rank's two
  # stages each with their own, under their own tag): the same bits, and a bucket per range started on every
  # stage every step (one block each; the first with the embedding and the last with the head have 2).
  mpi ildpb 4 --stages 2 --pipeline interleaved --data-parallel 2 --dp-bucket-mib 0.01
  same_run "interleaved with 2 replicas in buckets equals the one-process run with 2 groups" "$work/seqdp" "$work/ildpb"
  python3 -c 'import json, sys; st = json.load(open(sys.argv[1]))["pipeline"]["stages"]
assert [s["buckets"] for s in st] == [8, 4, 4, 8], st' "$work/ildpb/summary.json" && ok \
    || fail "buckets per virtual stage over 4 steps, expected 8, 4, 4, 8: $(grep -o '"buckets": [0-9]*' "$work/ildpb/summary.json")"
  expect_error "a replica's micro-batches not a multiple of P" "--microbatches 6 over --data-parallel 2 is 3 per replica" \
    mpirun --oversubscribe --bind-to none -np 4 "$bin" train "${base[@]}" --microbatches 6 --stages 2 \
    --pipeline interleaved --transport mpi --data-parallel 2 --out "$work/e0"
  # --init-from over MPI: each rank imports its own 2 parts of a Hugging Face folder (the model from its config).
  run exported --stages 2 --pipeline interleaved --export "$work/hf"
  with_model=("${base[@]}"); base=("${base[@]:0:2}" "${base[@]:4}")  # no --model tiny: the folder has it
  run seqinit --stages 4 --init-from "$work/hf"
  mpi ilinit 2 --stages 2 --pipeline interleaved --init-from "$work/hf"
  same_run "interleaved over MPI from --init-from equals the one-process run of 4 stages" "$work/seqinit" "$work/ilinit"
  base=("${with_model[@]}")
  # A checkpoint over MPI (each rank writes its 2 parts) resumed over MPI.
  mpi mhalf 2 --stages 2 --pipeline interleaved --save-dir "$work/mck" --save-every 2
  mpi mresumed 2 --stages 2 --pipeline interleaved --resume "$work/mck/step_000002"
  [ -n "$(hash_of "$work/mresumed")" ] && [ "$(hash_of "$work/il2")" = "$(hash_of "$work/mresumed")" ] && ok \
    || fail "interleaved over MPI resumed: weights '$(hash_of "$work/mresumed")', the whole run's '$(hash_of "$work/il2")'"
fi

# Every worker above computed in its interleaved order (the bits cannot tell: any order gives them).
! grep -l "outside the interleaved order" "$work"/*.log && ok || fail "a worker left its interleaved order (logs above)"

# Refused before any work.
expect_error "chunks without interleaved" "--chunks 2: only --pipeline interleaved" \
  "$bin" train "${base[@]}" --stages 2 --pipeline 1f1b --chunks 2 --out "$work/e2"
expect_error "one chunk" "--chunks 1" "$bin" train "${base[@]}" --stages 2 --pipeline interleaved --chunks 1 --out "$work/e3"
expect_error "split" "--split with --pipeline interleaved" \
  "$bin" train "${base[@]}" --stages 2 --pipeline interleaved --split 2,2 --out "$work/e4"
expect_error "more parts than blocks" "8 parts for 4 blocks" \
  "$bin" train "${base[@]}" --stages 2 --chunks 4 --pipeline interleaved --out "$work/e5"
expect_error "M not a multiple of P" "--microbatches 4 is not a multiple of --stages 3" \
  "$bin" train "${base[@]}" --stages 3 --pipeline interleaved --set n_layers=6 --out "$work/e6"
finish
