#!/usr/bin/env bash
# `--device guarded` (src/backend/guarded.h): training with every stage's weights, gradients, optimizer state,
# weight versions, EF buffer and activations in memory the host cannot touch (any access but the backend's
# faults) gives the CPU's run bit for bit: one process under 2BW + EF with clipping (weights, every metric),
# a 2-stage threads pipeline with a tied embedding (its messages go through the host), the element-wise
# optimizers, mixture-of-experts models; its checkpoints are the CPU's files byte for byte, and a run resumes across
# devices either way to the uninterrupted run's weights. What a device does not run yet is refused, naming it.
set -u
bin=${1:?usage: cli_device.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
export OMP_NUM_THREADS=1

small_corpus "$bin" "$work/data" 30 && ok || fail "prepare"
small=(--data "$work/data" --model tiny --set context=32 --set d_model=64 --set d_ffn=128 --set n_heads=4
       --set n_kv_heads=2 --set n_layers=2 --batch 2 --eval-batches 2 --eval-every 2)
metrics() { grep -o '"\(train_loss\|val_loss\|grad_norm\|update_norm\|version_distance\)": [^,}]*' "$1/metrics.jsonl"; }

# run NAME DEVICE ARGS...: a training run into $work/NAME
run() {
  local name=$1 dev=$2; shift 2
  "$bin" train "${small[@]}" --device "$dev" --out "$work/$name" "$@" > "$work/$name.log" 2>&1 \
    || fail "$name: $(tail -3 "$work/$name.log")"
}
# equal WHAT ARGS...: the guarded device's run ends where the CPU's does, every metric equal
equal() {
  local what=$1; shift
  run "cpu_$what" cpu "$@"; run "dev_$what" guarded "$@"
  same_run "$what" "$work/cpu_$what" "$work/dev_$what"
  [ -n "$(metrics "$work/cpu_$what")" ] && [ "$(metrics "$work/cpu_$what")" = "$(metrics "$work/dev_$what")" ] \
    && ok || fail "$what: the metrics differ between cpu and guarded"
}

equal "2bw+ef clipped" --steps 6 --delay 2bw --ef 1 --microbatches 2 --clip 0.5
equal "pipeline 2bw+ef tied" --steps 6 --stages 2 --pipeline 2bw --ef 1 --microbatches 2 --threads-per-stage 1
equal "pipeline 1f1b untied" --steps 4 --stages 2 --pipeline 1f1b --microbatches 2 --threads-per-stage 1 --set tied=0
equal "lion fixed:2" --steps 4 --optimizer lion --delay fixed:2
equal "mars" --steps 4 --optimizer mars --delay 2bw
equal "muon 2bw+ef" --steps 4 --optimizer muon --delay 2bw --ef 1
equal "taylor" --steps 5 --delay 2bw --taylor 0.5
equal "data parallel 2 in one process, tied" --steps 4 --data-parallel 2 --microbatches 4 --delay 2bw --ef 1
grep -q '"taylor_ratio": [0-9]' "$work/dev_taylor/metrics.jsonl" && ok || fail "taylor on guarded: no taylor_ratio in metrics.jsonl"
equal "soap (its rule on the host)" --steps 4 --optimizer soap --delay 2bw
equal "zbh1" --steps 4 --stages 2 --pipeline zbh1 --microbatches 2 --threads-per-stage 1
equal "zbh1 bf16" --steps 4 --stages 2 --pipeline zbh1 --microbatches 2 --threads-per-stage 1 --precision bf16
equal "bf16 2bw+ef" --steps 4 --precision bf16 --delay 2bw --ef 1 --microbatches 2
equal "bf16 muon pipeline" --steps 4 --precision bf16 --optimizer muon --stages 2 --pipeline 2bw --microbatches 2 \
  --threads-per-stage 1
equal "normuon pipeline" --steps 4 --optimizer normuon --stages 2 --pipeline 2bw --microbatches 2 --threads-per-stage 1
grep -q '"device": "guarded"' "$work/dev_mars/summary.json" && ok || fail "summary.json names the device"

# a pipeline over MPI on guarded (each rank's stage on its device, the others' given back): the one-process CPU
# run's weights, with a checkpoint written as parts that resumes on the CPU; and replicas over MPI
if has_mpi "$bin"; then
  base=("${small[@]}" --steps 4 --delay 2bw --ef 1 --microbatches 2)
  run mpi_ref cpu "${base[@]}" --stages 2 --threads 1
  base=("${small[@]}" --steps 4 --pipeline 2bw --ef 1 --microbatches 2 --stages 2 --threads-per-stage 1)
  mpi mpi_dev 2 --device guarded --save-dir "$work/mpi_ck" --save-every 2
  same_run "2bw+ef pipeline over MPI on guarded" "$work/mpi_ref" "$work/mpi_dev"
  run mpi_resumed cpu "${small[@]}" --steps 4 --delay 2bw --ef 1 --microbatches 2 --stages 2 --threads 1 \
    --resume "$work/mpi_ck/step_000002"
  [ "$(hash_of "$work/mpi_resumed")" = "$(hash_of "$work/mpi_ref")" ] && ok ||
    fail "the MPI guarded run's checkpoint resumed on the CPU: weights $(hash_of "$work/mpi_resumed")"
  # 2 replicas x 2 stages as 4 ranks: the gradient's sum over the replicas through each stage's host copy (no
  # buckets on a device) ends where one process's two groups do
  base=("${small[@]}" --steps 4 --delay 2bw --ef 1 --microbatches 4 --data-parallel 2)
  run dp_ref cpu "${base[@]}" --stages 2 --threads 1
  base=("${small[@]}" --steps 4 --pipeline 2bw --ef 1 --microbatches 4 --data-parallel 2 --stages 2 --threads-per-stage 1)
  mpi dp_dev 4 --device guarded
  same_run "2 replicas x 2 stages over MPI on guarded" "$work/dp_ref" "$work/dp_dev"
else
  echo "skipped: the MPI cases (no mpirun, or a build without MPI)"
fi

# `bench --device guarded`: the same steps as the CPU's (the final weights), and a device's peak only when given
bench_hash() { sed -n 's/.*"weights_hash": "\([0-9a-f]*\)".*/\1/p' "$1"; }
for dev in cpu guarded; do
  "$bin" bench --models tiny --threads 1 --steps 1 --seq 32 --batch 2 --device "$dev" --json > "$work/bench_$dev.json" \
    2> "$work/bench_$dev.err" || fail "bench --device $dev: $(cat "$work/bench_$dev.err")"
done
[ -n "$(bench_hash "$work/bench_cpu.json")" ] && [ "$(bench_hash "$work/bench_cpu.json")" = "$(bench_hash "$work/bench_guarded.json")" ] \
  && ok || fail "bench on guarded ends on other weights than on the CPU"
grep -q '"fraction_of_peak": null, "device": "guarded"' "$work/bench_guarded.json" && ok || fail "bench on a device claims a peak"
expect_error "bench --device tpu" "--device 'tpu': expected cpu" "$bin" bench --models tiny --device tpu

# checkpoints: the same files; a resume across devices ends on the uninterrupted run's weights
ck=(--optimizer soap --steps 6 --delay 2bw --ef 1 --microbatches 2 --save-every 3)
run ck_cpu cpu "${ck[@]}" --save-dir "$work/ck_cpu"
run ck_dev guarded "${ck[@]}" --save-dir "$work/ck_dev"
for f in state.safetensors model.safetensors; do
  cmp -s "$work/ck_cpu/step_000003/$f" "$work/ck_dev/step_000003/$f" && ok || fail "checkpoint $f differs from the CPU's"
done
run res_to_cpu cpu "${ck[@]:0:10}" --resume "$work/ck_dev/step_000003"
run res_to_dev guarded "${ck[@]:0:10}" --resume "$work/ck_cpu/step_000003"
# (a resumed run's metrics.jsonl starts at the checkpoint: the weights and the last steps' losses compared)
resumed() {
  [ -n "$(hash_of "$2")" ] && [ "$(hash_of "$2")" = "$(hash_of "$3")" ] &&
    [ "$(losses "$2" | tail -3)" = "$(losses "$3" | tail -3)" ] && ok || fail "$1: weights '$(hash_of "$3")', expected '$(hash_of "$2")'"
}
resumed "guarded checkpoint resumed on the CPU" "$work/ck_cpu" "$work/res_to_cpu"
resumed "CPU checkpoint resumed on guarded" "$work/ck_cpu" "$work/res_to_dev"

# `eval --device guarded`: the CPU's loss, the checkpoint read into the device's memory
# eval_equal NAME CHECKPOINT: eval on guarded prints what eval on the CPU does
eval_equal() {
  local dev
  for dev in cpu guarded; do
    "$bin" eval --checkpoint "$2" --data "$work/data" --batch 2 --seq 32 --batches 3 --device "$dev" \
      --json > "$work/eval_$1_$dev.json" 2>&1 || fail "$1: eval --device $dev: $(cat "$work/eval_$1_$dev.json")"
  done
  grep -q '"val_loss"' "$work/eval_$1_cpu.json" && cmp -s "$work/eval_$1_cpu.json" "$work/eval_$1_guarded.json" && ok ||
    fail "$1: eval on guarded: $(cat "$work/eval_$1_guarded.json"), on the CPU: $(cat "$work/eval_$1_cpu.json")"
}
eval_equal dense "$work/ck_dev/step_000003"

# A mixture of experts on the device: its routing, grouping and balance through the layer table, the counts read
# back to size each expert's products; every metric the CPU's (the aux loss, each block's expert loads, the router's
# staleness at the evaluations under the delay), one process and a pipeline, fp32 and bf16; eval too
moe=(--set n_experts=4 --set experts_per_token=2 --set moe_every=1 --set aux_coef=0.01)
untimed() { sed -e 's/"time_s": [^,]*, "tokens_per_s": [^,]*, //' "$1/metrics.jsonl"; }
equal_moe() {
  local what=$1; shift
  equal "$what" "${moe[@]}" "$@"
  grep -q '"router_staleness": [0-9]' "$work/dev_$what/metrics.jsonl" && grep -q '"expert_load_max' "$work/dev_$what/metrics.jsonl" \
    && [ "$(untimed "$work/cpu_$what")" = "$(untimed "$work/dev_$what")" ] && ok ||
    fail "$what: the MoE metrics are missing or differ: $(diff <(untimed "$work/cpu_$what") <(untimed "$work/dev_$what") | head -3)"
}
equal_moe "moe 2bw+ef" --steps 6 --delay 2bw --ef 1 --microbatches 2
equal_moe "moe bf16 muon" --steps 4 --precision bf16 --optimizer muon --delay 2bw
equal "moe every other block, pipeline" --steps 4 --set n_layers=4 --set n_experts=4 --set experts_per_token=2 \
  --set moe_every=2 --stages 2 --pipeline 2bw --microbatches 2 --threads-per-stage 1 --set tied=0
# (its metrics whole: the aux loss and each MoE block's loads; no router staleness, which one stage holding the
# whole model measures)
grep -q '"expert_load_max' "$work/dev_moe every other block, pipeline/metrics.jsonl" &&
  [ "$(untimed "$work/cpu_moe every other block, pipeline")" = "$(untimed "$work/dev_moe every other block, pipeline")" ] &&
  ok || fail "moe pipeline: the MoE metrics are missing or differ"
run moe_ck cpu "${moe[@]}" --steps 2 --save-dir "$work/moe_ck"
eval_equal moe "$work/moe_ck/step_000002"

# what a device does not run yet: refused before anything is made, naming it
# written for the GPU, checked here on guarded, not yet run on a GPU: refused on cuda unless NB_CUDA_KERNELS=next
for f in "--optimizer sgd" "--set n_experts=4 --set experts_per_token=2 --set moe_every=1" "--optimizer muon --precision bf16"; do
  expect_error "cuda $f" "is written but has not yet run on one (docs/gpu.md): NB_CUDA_KERNELS=next runs it" \
    env -u NB_CUDA_KERNELS "$bin" train "${small[@]}" --device cuda $f --steps 1 --out "$work/x11"
done
expect_error "eval --device cuda of a MoE model" "is a mixture of experts, which is written for the GPU but has not yet run" \
  env -u NB_CUDA_KERNELS "$bin" eval --checkpoint "$work/moe_ck/step_000002" --data "$work/data" --batch 2 --seq 32 \
  --batches 1 --device cuda
expect_error "unknown device" "device 'tpu': expected cpu" "$bin" train "${small[@]}" --device tpu --steps 1 --out "$work/x7"
# --device cuda where there is no GPU to run it (this suite runs on CPUs; tests/cli_cuda_device.sh runs it on one):
# a build without CUDA names -DNB_CUDA=ON, a CUDA build says that it found no usable GPU
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi > /dev/null 2>&1; then
  expect_error "cuda without a GPU" "NB_CUDA=ON\|no usable GPU\|no GPU" "$bin" train "${small[@]}" --device cuda --steps 1 \
    --out "$work/x8"
fi
for x in x7 x8 x11; do [ ! -e "$work/$x" ] && ok || fail "$x: a refused run left $work/$x"; done

# An unknown --device is named as such before what a device lacks (a MoE model said "not on a device yet").
moe=(--set n_experts=4 --set experts_per_token=2 --set moe_every=1)
expect_error "train --device nope on a MoE model" "device 'nope': expected cpu" \
  "$bin" train "${small[@]}" "${moe[@]}" --steps 2 --device nope
"$bin" train "${small[@]}" "${moe[@]}" --steps 2 --save-dir "$work/moeck" > "$work/moe.log" 2>&1 ||
  fail "MoE run: $(tail -3 "$work/moe.log")"
expect_error "eval --device nope on a MoE checkpoint" "device 'nope': expected cpu" \
  "$bin" eval --checkpoint "$work/moeck/step_000002" --data "$work/data" --batch 2 --seq 16 --batches 1 --device nope
finish
