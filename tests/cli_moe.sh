#!/usr/bin/env bash
# A mixture of experts trained like the dense model (docs/moe.md): moe-tiny shrunk to 2 blocks, 4
# experts of 2 per token, in every block and in every other block:
# - a real 2BW pipeline on threads (and on MPI where mpirun is) equals its one-process simulation bit for
#   bit, and the same run at --threads 1 and 2 gives the same bits, in fp32 and in bf16;
# - a resumed run ends with the uninterrupted run's weights (fp32 and bf16);
# - every optimizer (Muon and NorMuon orthogonalize each expert's matrices) and every delay mode and
#   mitigation trains a finite loss;
# - metrics.jsonl has the auxiliary loss and each MoE block's largest and smallest expert load, and the
#   router's staleness under a delay;
# - bad MoE fields and an export Mixtral cannot express are refused naming what is wrong;
# - `sample` generates from the exported Mixtral folder.
set -u
bin=${1:?usage: cli_moe.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
small_corpus "$bin" "$work/data" 30 || fail "prepare"
moe=(--data "$work/data" --model moe-tiny --set n_layers=2 --set n_experts=4 --set d_ffn=32 --set context=16
     --batch 2 --steps 3 --eval-batches 1 --quiet)
hash_of() { sed -n 's/.*"weights_hash": "\([0-9a-f]*\)".*/\1/p' "$1/summary.json"; }
losses() { grep -o '"train_loss": [^,]*' "$1/metrics.jsonl"; }
same_run() {  # same_run WHAT OUT_A OUT_B
  [ -n "$(hash_of "$2")" ] && [ "$(hash_of "$2")" = "$(hash_of "$3")" ] && [ "$(losses "$2")" = "$(losses "$3")" ] \
    && ok || fail "$1: weights '$(hash_of "$3")' and losses differ from '$(hash_of "$2")'"
}
run() {  # run OUT ARGS...: trains into $work/OUT
  local out=$1; shift
  "$bin" train "${moe[@]}" "$@" --out "$work/$out" > "$work/$out.log" 2>&1 || fail "$out: $(tail -3 "$work/$out.log")"
}

for prec in fp32 bf16; do
  p=(--precision $prec)
  for every in 1 2; do
    run ref$every$prec "${p[@]}" --set moe_every=$every --stages 2 --delay 2bw --microbatches 2 --threads 1
    run pipe$every$prec "${p[@]}" --set moe_every=$every --pipeline 2bw --stages 2 --microbatches 2 --threads-per-stage 1
    same_run "$prec, moe_every=$every: the threads pipeline equals its one-process simulation" "$work/ref$every$prec" \
      "$work/pipe$every$prec"
  done
  run t1$prec "${p[@]}" --threads 1 --microbatches 2
  run t2$prec "${p[@]}" --threads 2 --microbatches 2
  same_run "$prec: --threads 2 equals --threads 1" "$work/t1$prec" "$work/t2$prec"
done
grep -q '"precision": "bf16"' "$work/t1bf16/summary.json" && [ "$(hash_of "$work/t1bf16")" != "$(hash_of "$work/t1fp32")" ] \
  && ok || fail "bf16: the run did not record bf16, or its weights equal fp32's"

if command -v mpirun > /dev/null && ldd "$(dirname "$bin")/nobubble-core" 2>/dev/null | grep -q libmpi; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  timeout 120 env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun --oversubscribe --bind-to none \
    -np 2 "$bin" train "${moe[@]}" --set moe_every=1 --pipeline 2bw --microbatches 2 --threads-per-stage 1 \
    --out "$work/mpi" > "$work/mpi.log" 2>&1 || fail "MPI pipeline: $(tail -3 "$work/mpi.log")"
  same_run "the MPI pipeline equals its one-process simulation" "$work/ref1fp32" "$work/mpi"
fi

# Resume: 4 steps with a checkpoint after 2, the second half resumed from it.
run whole --steps 4 --delay 2bw --ef 1 --optimizer muon
run half --steps 4 --delay 2bw --ef 1 --optimizer muon --save-dir "$work/ck" --save-every 2
run resumed --steps 4 --delay 2bw --ef 1 --optimizer muon --resume "$work/ck/step_000002"
check "the checkpoint holds every expert's tensors" grep -q "block_sparse_moe.experts.3.w2.weight" \
  "$work/ck/step_000002/model.safetensors"
[ "$(hash_of "$work/whole")" = "$(hash_of "$work/resumed")" ] && ok \
  || fail "resume: weights '$(hash_of "$work/resumed")', the uninterrupted run's '$(hash_of "$work/whole")'"
run whole16 --precision bf16 --steps 4 --delay 2bw --optimizer muon
run half16 --precision bf16 --steps 4 --delay 2bw --optimizer muon --save-dir "$work/ck16" --save-every 2
run resumed16 --precision bf16 --steps 4 --delay 2bw --optimizer muon --resume "$work/ck16/step_000002"
[ "$(hash_of "$work/whole16")" = "$(hash_of "$work/resumed16")" ] && ok \
  || fail "bf16 resume: weights '$(hash_of "$work/resumed16")', the uninterrupted run's '$(hash_of "$work/whole16")'"

for opt in sgd adamw muon normuon lion adan mars soap; do
  run opt-$opt --optimizer "$opt" --delay 2bw
  grep -q '"train_loss": [0-9]' "$work/opt-$opt/metrics.jsonl" && ok || fail "$opt: no finite training loss"
done
for delay in "--delay pipedream --stages 2" "--delay fixed:2 --taylor 0.04" "--delay 2bw --sync-start 1 --sync-cooldown 1"; do
  # shellcheck disable=SC2086
  run delay --force $delay
  grep -q '"train_loss": [0-9]' "$work/delay/metrics.jsonl" && ok || fail "$delay: no finite training loss"
done

line=$(tail -1 "$work/ref2fp32/metrics.jsonl")
check "metrics: the auxiliary loss" grep -q '"aux_loss": [0-9]' <<< "$line"
# moe_every 2 on 2 blocks: one MoE block, so one load each, within [0, 1] (4 experts, 2 per token: the
# largest is at least 1/4 and the smallest at most 1/4)
echo "$line" | python3 -c '
import json, sys
m = json.loads(sys.stdin.read())
hi, lo = m["expert_load_max"], m["expert_load_min"]
sys.exit(0 if len(hi) == 1 and len(lo) == 1 and 0.25 <= hi[0] <= 0.5 and 0 <= lo[0] <= 0.25 else 1)' \
  && ok || fail "metrics: expected one MoE block's loads in range, got: $line"
"$bin" train --data "$work/data" --model tiny --set n_layers=1 --set context=16 --batch 2 --steps 1 --eval-batches 1 \
  --quiet --out "$work/dense" > /dev/null 2>&1 || fail "dense run"
check "a dense model's metrics have no MoE keys" bash -c "! grep -q 'aux_loss\|expert_load' '$work/dense/metrics.jsonl'"

# The router's staleness: with every evaluation under 2BW in one stage, a share in [0, 1] on each line but
# the last (no step follows it); exactly 0 when the updates are too small to move a float32 weight; none
# in a synchronous run.
run stale --delay 2bw --steps 3 --eval-every 1 --lr 1e-2 --warmup 0
run frozen --delay 2bw --steps 3 --eval-every 1 --lr 1e-12 --warmup 0
run unstale --steps 3 --eval-every 1
python3 - "$work" <<'PY' && ok || fail "router_staleness: $(cat "$work/stale/metrics.jsonl")"
import json, sys
lines = lambda run: [json.loads(l) for l in open("%s/%s/metrics.jsonl" % (sys.argv[1], run))]
stale, frozen, unstale = lines("stale"), lines("frozen"), lines("unstale")
s = [m.get("router_staleness") for m in stale]
assert all(0 <= x <= 1 for x in s[:-1]) and s[-1] is None and max(s[:-1]) > 0, s
assert [m.get("router_staleness") for m in frozen][:-1] == [0, 0], frozen
assert all("router_staleness" not in m for m in unstale), unstale
PY

expect_error "experts_per_token above n_experts" "experts_per_token = 5: expected 1 <= experts_per_token <= 4" \
  "$bin" train "${moe[@]}" --set experts_per_token=5
expect_error "zero experts per token" "experts_per_token = 0" "$bin" train "${moe[@]}" --set experts_per_token=0
expect_error "moe_every 0" "moe_every = 0: expected 1 <= moe_every <= n_layers (2)" \
  "$bin" train "${moe[@]}" --set moe_every=0
expect_error "aux_coef out of range" "aux_coef = 1.5: expected 0 <= aux_coef <= 1" "$bin" train "${moe[@]}" --set aux_coef=1.5
expect_error "MoE fields on a dense model" "n_experts = 0 (a dense model)" "$bin" train "${moe[@]}" --set n_experts=0
expect_error "export of moe_every 2" "moe_every = 2 has no Hugging Face architecture" \
  "$bin" train "${moe[@]}" --set moe_every=2 --export "$work/never"
check "the refused export wrote nothing" test ! -e "$work/never"

run exported --export "$work/hf"
check "the export is a Mixtral" grep -q '"MixtralForCausalLM"' "$work/hf/config.json"
"$bin" sample --checkpoint "$work/hf" --prompt "In the" --tokens 8 --temperature 0 > "$work/sample.txt" 2>&1 \
  && ok || fail "sample from the Mixtral folder: $(tail -3 "$work/sample.txt")"
"$bin" eval --checkpoint "$work/hf" --data "$work/data" --batch 2 --seq 16 --batches 1 > "$work/eval.txt" 2>&1 \
  && ok || fail "eval of the Mixtral folder: $(tail -3 "$work/eval.txt")"
finish
