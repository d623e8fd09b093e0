#!/usr/bin/env bash
# --data-parallel D in one process (docs/data-parallel.md): the step's M micro-batches in D contiguous groups,
# each group's gradient summed from zero and the D sums added in replica order, computed one group after
# another: the arithmetic of D replicas on MPI ranks (tests/cli_data_parallel_mpi.sh checks that the ranks
# end on these bits). Here: against the run without replicas (the same M micro-batches, one group), within
# float rounding; any split into stages the same bits; checkpoints resume bitwise with the same D and are
# refused with another D unless --override; bad input refused naming the flag.
set -u
bin=${1:?usage: cli_data_parallel.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
source "$(dirname "$0")/support/metrics_close.sh"
export OMP_NUM_THREADS=1
small_corpus "$bin" "$work/data" 30 && ok || fail "prepare"
small=(--data "$work/data" --model tiny --set context=32 --set d_model=64 --set d_ffn=128 --set n_heads=4
       --set n_kv_heads=2 --set n_layers=2 --batch 2 --eval-batches 2 --eval-every 2 --threads 1 --quiet)
hash_of() { sed -n 's/^done: .*weights \([0-9a-f]\{16\}\)$/\1/p' "$1"; }
run() {  # run NAME FLAGS...: $work/NAME/ and $work/NAME.log
  local name=$1; shift
  "$bin" train "${small[@]}" "$@" --out "$work/$name" > "$work/$name.log" 2>&1 || fail "$name: $(tail -3 "$work/$name.log")"
}

# The same 4 micro-batches per step in 1, 2 and 4 groups (AdamW, then Muon with clipping and error feedback
# under 2BW's delay). The groups' sums add the same gradients in another order, so the runs differ by float
# rounding only: every step's loss, gradient norm, update norm and validation loss to 1e-5 relative (measured:
# below 1e-7 after 6 steps). A replica that read the wrong micro-batches, weighted its micro-batches by 1 / (M /
# D) instead of 1 / M, or lost a group's gradient would be off by percents from the first step.
run d1 --microbatches 4 --steps 6
run d2 --microbatches 4 --steps 6 --data-parallel 2
run d4 --microbatches 4 --steps 6 --data-parallel 4
for d in d2 d4; do
  why=$(metrics_close "$work/d1/metrics.jsonl" "$work/$d/metrics.jsonl" 1e-5) && ok || fail "$d against d1: $why"
done
check "summary.json records data_parallel" grep -q '"data_parallel": 2' "$work/d2/summary.json"
run m1 --microbatches 4 --steps 6 --optimizer muon --clip 0.5 --delay 2bw --ef 1
run m2 --microbatches 4 --steps 6 --optimizer muon --clip 0.5 --delay 2bw --ef 1 --data-parallel 2
why=$(metrics_close "$work/m1/metrics.jsonl" "$work/m2/metrics.jsonl" 1e-5) && ok || fail "muon d2 against d1: $why"

# Any split computes the same weights with replicas too: a tied embedding split over stages sums the head's
# part at REDUCE on the last stage before it is sent, a whole one in the stage's own buffer.
run s1 --microbatches 4 --steps 4 --data-parallel 2 --delay 2bw
run s2 --microbatches 4 --steps 4 --data-parallel 2 --delay 2bw --stages 2
[ -n "$(hash_of "$work/s1.log")" ] && [ "$(hash_of "$work/s1.log")" = "$(hash_of "$work/s2.log")" ] && ok ||
  fail "--stages 2 with replicas: weights $(hash_of "$work/s2.log"), one stage $(hash_of "$work/s1.log")"

# Checkpoints: resumed with the same D, the uninterrupted run's weights; another D is refused without
# --override (its sum is grouped otherwise), and with it continues, saying so.
run full --microbatches 4 --steps 6 --data-parallel 2 --save-dir "$work/ck" --save-every 3
run res --microbatches 4 --steps 6 --data-parallel 2 --resume "$work/ck/step_000003"
[ -n "$(hash_of "$work/full.log")" ] && [ "$(hash_of "$work/full.log")" = "$(hash_of "$work/res.log")" ] && ok ||
  fail "resume with --data-parallel 2: weights $(hash_of "$work/res.log"), uninterrupted $(hash_of "$work/full.log")"
expect_error "a resume into another D" "differs from the checkpoint's: --data-parallel 1 (checkpoint: 2)" \
  "$bin" train "${small[@]}" --microbatches 4 --steps 6 --resume "$work/ck/step_000003"
"$bin" train "${small[@]}" --microbatches 4 --steps 6 --resume "$work/ck/step_000003" --override > "$work/ov.log" 2>&1 &&
  grep -q "continuing with --data-parallel 1 (checkpoint: 2)" "$work/ov.log" && ok || fail "--override: $(tail -3 "$work/ov.log")"

# Bad input, before any work.
expect_error "M not a multiple of D" "--microbatches 3 does not divide across --data-parallel 2 replicas" \
  "$bin" train "${small[@]}" --microbatches 3 --data-parallel 2
expect_error "replicas on a threads pipeline" "--data-parallel 2 with --transport threads: run the replicas as MPI ranks" \
  "$bin" train "${small[@]}" --microbatches 4 --data-parallel 2 --stages 2 --pipeline 2bw
expect_error "D out of range" "--data-parallel 0: out of range" "$bin" train "${small[@]}" --data-parallel 0
finish
