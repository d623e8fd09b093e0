#!/usr/bin/env bash
# ZB-H1 trained (the backward split into its input gradient B and its weight gradient W): on threads and
# over MPI, tied and untied, 2 and 3 stages, fp32 and bf16, dense and MoE, with replicas over MPI, and resumed, every run ends with
# bitwise the weights and losses of the one-process run with the same steps (and of 1F1B's pipeline),
# which computes whole backwards; the delays' options, which do not apply to it, are refused.
set -u
bin=${1:?usage: cli_zbh1.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
small_corpus "$bin" "$work/data" 80 && ok || fail "prepare"
base=(--data "$work/data" --model tiny --steps 4 --batch 12 --seq 32 --microbatches 6 --eval-batches 1
      --threads-per-stage 1 --precision fp32 --quiet)
run() {  # run OUT ARGS...: trains into $work/OUT
  local out=$1; shift
  "$bin" train "${base[@]}" "$@" --out "$work/$out" > "$work/$out.log" 2>&1 || fail "$out: $(tail -3 "$work/$out.log")"
}

# 2 stages, tied: the split pipeline, 1F1B's and the one-process run.
run seq2 --stages 2
run zb2 --stages 2 --pipeline zbh1
run ofb2 --stages 2 --pipeline 1f1b
same_run "zbh1, 2 stages, equals the one-process run" "$work/seq2" "$work/zb2"
same_run "zbh1 equals 1f1b's pipeline" "$work/ofb2" "$work/zb2"
check "summary names zbh1" grep -q '"kind": "zbh1"' "$work/zb2/summary.json"
# bf16: the recorded output gradients are the products' bf16 operands.
run seqbf --stages 2 --precision bf16
run zbbf --stages 2 --pipeline zbh1 --precision bf16
same_run "zbh1 in bf16 equals the one-process bf16 run" "$work/seqbf" "$work/zbbf"
check "bf16 recorded" grep -q '"precision": "bf16"' "$work/zbbf/summary.json"
# A mixture of experts (every other block), fp32 and bf16: the router's and experts' products split too.
for prec in fp32 bf16; do
  run seqmoe$prec --stages 2 --model moe-tiny --precision $prec
  run zbmoe$prec --stages 2 --model moe-tiny --pipeline zbh1 --precision $prec
  same_run "zbh1 on moe-tiny ($prec) equals the one-process run" "$work/seqmoe$prec" "$work/zbmoe$prec"
done
# 3 stages of 2 blocks, untied, with Muon and clipping (the update's global norm across stages).
more=(--set n_layers=6 --set tied=0 --optimizer muon --clip 1)
run seq3 --stages 3 "${more[@]}"
run zb3 --stages 3 --pipeline zbh1 "${more[@]}"
same_run "zbh1, 3 stages, untied, Muon, clipping, equals the one-process run" "$work/seq3" "$work/zb3"
# Resume: a checkpoint after 2 steps, the rest resumed from it.
run half --stages 2 --pipeline zbh1 --save-dir "$work/ck" --save-every 2
run resumed --stages 2 --pipeline zbh1 --resume "$work/ck/step_000002"
[ -n "$(hash_of "$work/resumed")" ] && [ "$(hash_of "$work/zb2")" = "$(hash_of "$work/resumed")" ] && ok \
  || fail "zbh1 resumed: weights '$(hash_of "$work/resumed")', the whole run's '$(hash_of "$work/zb2")'"

if has_mpi "$bin"; then
  mpi zbmpi 2 --stages 2 --pipeline zbh1
  same_run "zbh1 over MPI equals the one-process run" "$work/seq2" "$work/zbmpi"
  # 2 replicas of the 2-stage pipeline (4 ranks) against one process computing both replicas' groups.
  run seqdp --stages 2 --data-parallel 2
  mpi zbdp 4 --stages 2 --pipeline zbh1 --data-parallel 2
  same_run "zbh1 with 2 replicas over MPI equals the one-process run with 2 groups" "$work/seqdp" "$work/zbdp"
fi

# Refused before any work: the delays' options, and too few micro-batches.
expect_error "error feedback" "--pipeline zbh1 is synchronous" \
  "$bin" train "${base[@]}" --stages 2 --pipeline zbh1 --ef 1 --out "$work/e3"
expect_error "M < P" "zbh1" "$bin" train "${base[@]}" --stages 2 --pipeline zbh1 --microbatches 1 --batch 2 --out "$work/e4"
finish
