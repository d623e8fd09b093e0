#!/usr/bin/env bash
# The memory check (issue 36): a model that cannot fit is refused before it is built, in milliseconds,
# with the estimate and the memory available; --no-memory-check gets past the check; the estimate is in
# the start lines and summary.json; a missing data folder fails before the model is built, naming it.
# The "does not fit" cases run under this test's own RLIMIT_AS (ulimit -v), so that nothing here can
# allocate much for real, whatever the machine has.
set -u
bin=${1:?usage: cli_memory.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
export OMP_WAIT_POLICY=passive

limit=1000000   # KiB of address space: the binary and its libraries take about 0.4 GiB of it
# AddressSanitizer reserves terabytes of address space for its shadow memory at start, so nothing can
# run under an RLIMIT_AS: skipped there (ctest's skip code); the normal build runs every case.
if (ulimit -v $limit; "$bin" version) 2>&1 | grep -q AddressSanitizer; then
  echo "skipped: $bin is an AddressSanitizer build, which cannot start under ulimit -v"
  exit 77
fi
small_corpus "$bin" "$work/data" && ok || fail "prepare"
# 4 blocks of d_model 1024: about 1.3 GiB for AdamW's training; 150 blocks: about 47 GiB (the issue's)
m4=(--set n_layers=4 --set d_model=1024 --set n_heads=8 --set n_kv_heads=8 --set d_ffn=4096)
m150=(--set n_layers=150 --set d_model=1024 --set n_heads=8 --set n_kv_heads=8 --set d_ffn=4096)
# limited SECONDS CMD...: CMD under the address-space limit and `timeout SECONDS`; output into $work/out, $work/err
limited() { local s=$1; shift; (ulimit -v $limit; exec timeout -k 5 "$s" "$@") > "$work/out" 2> "$work/err"; }
# refused WHAT: a non-zero exit whose message has the estimate, the available memory and the override
refused() {
  [ "$rc" -ne 0 ] && grep -q "needs about .* GiB (weights .*, gradients .*, optimizer state .*) and .* GiB is available (RLIMIT_AS" "$work/err" &&
    grep -q -- "use --no-memory-check to run anyway" "$work/err" && ok || fail "$1: rc $rc: $(head -c 600 "$work/err")"
}
# past_check WHAT: no refusal (the run may still fail later, allocating under the limit)
past_check() { ! grep -q "the model needs about" "$work/err" && ok || fail "$1: still refused: $(head -c 300 "$work/err")"; }

# ---- train: refused at once, under the limit; the issue's 150 blocks too
t0=$(date +%s%N)
limited 30 "$bin" train --data "$work/data" "${m4[@]}" --batch 1 --seq 16 --steps 1 --threads 1; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
refused "train, 4 blocks of 1024"
[ "$ms" -lt 5000 ] && ok || fail "the refusal took $ms ms (expected well under a second)"
limited 30 "$bin" train --data "$work/data" "${m150[@]}" --batch 1 --seq 16 --steps 1 --threads 1; rc=$?
refused "train, 150 blocks of 1024"
# a pipeline, per process
limited 30 "$bin" train --data "$work/data" "${m4[@]}" --batch 1 --seq 16 --steps 2 --pipeline 2bw --stages 2 \
  --microbatches 2 --threads-per-stage 1; rc=$?
refused "train, a 2BW pipeline"
# --no-memory-check: past the check (it then fails allocating under the limit, or runs)
limited 60 "$bin" train --data "$work/data" "${m4[@]}" --batch 1 --seq 16 --steps 1 --threads 1 --no-memory-check; rc=$?
past_check "train --no-memory-check"
# the override is the command line's: a run's own train_config.json never carries it
"$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 --steps 1 --threads 1 --no-memory-check \
  --out "$work/o1" > "$work/o1.log" 2>&1 || fail "a small run with --no-memory-check: $(tail -2 "$work/o1.log")"
! grep -q "memory" "$work/o1/train_config.json" && ok || fail "train_config.json carries the memory check: $(cat "$work/o1/train_config.json")"

# ---- the estimate in the start lines and summary.json, near the measured peak
"$bin" train --data "$work/data" --set n_layers=2 --set context=64 --batch 4 --steps 2 --threads 1 --out "$work/o2" \
  > "$work/o2.log" 2>&1 || fail "a small run: $(tail -2 "$work/o2.log")"
grep -q "^memory: about [0-9]* MiB (weights .*) estimated, .* GiB available (" "$work/o2.log" && ok ||
  fail "no memory line at the start: $(head -5 "$work/o2.log")"
for key in estimate_bytes weights gradients optimizer versions activations scratch available_bytes available_source peak_rss_bytes; do
  grep -q "\"memory\": {.*\"$key\": " "$work/o2/summary.json" && ok || fail "summary.json's memory lacks $key"
done
est=$(sed -n 's/.*"memory": {"estimate_bytes": \([0-9]*\),.*/\1/p' "$work/o2/summary.json")
peak=$(sed -n 's/.*"peak_rss_bytes": \([0-9]*\)}.*/\1/p' "$work/o2/summary.json")
[ -n "$est" ] && [ -n "$peak" ] && [ "$est" -ge "$peak" ] && ok || fail "the estimate $est is below the measured peak $peak"
"$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 --steps 1 --threads 1 --quiet > "$work/q.log" 2>&1
! grep -q "^memory:" "$work/q.log" && ok || fail "--quiet prints the memory line"

# ---- eval, sample, export, bench, verify: the same check before the model is built
"$bin" export --set n_layers=1 --out "$work/hf" > /dev/null 2>&1 || fail "export a small model"
cp "$work/data/tokenizer.json" "$work/hf/"
mkdir -p "$work/big"
sed -e 's/"num_hidden_layers": [0-9]*/"num_hidden_layers": 16/' -e 's/"hidden_size": [0-9]*/"hidden_size": 1024/' \
    -e 's/"intermediate_size": [0-9]*/"intermediate_size": 8192/' -e 's/"head_dim": [0-9]*/"head_dim": 256/' \
    -e 's/"vocab_size": [0-9]*/"vocab_size": 300/' -e 's/"bos_token_id": [0-9]*/"bos_token_id": 299/' \
    -e 's/"eos_token_id": [0-9]*/"eos_token_id": 299/' "$work/hf/config.json" > "$work/big/config.json"
cp "$work/data/tokenizer.json" "$work/big/"
limited 30 "$bin" eval --checkpoint "$work/big" --data "$work/data" --batch 1 --seq 16 --batches 1; rc=$?
refused "eval"
limited 30 "$bin" eval --checkpoint "$work/big" --data "$work/data" --batch 1 --seq 16 --batches 1 --no-memory-check; rc=$?
past_check "eval --no-memory-check"
limited 30 "$bin" sample --checkpoint "$work/big" --prompt "In the" --tokens 4; rc=$?
refused "sample"
limited 30 "$bin" sample --checkpoint "$work/big" --prompt "In the" --tokens 4 --no-memory-check; rc=$?
past_check "sample --no-memory-check"
limited 30 "$bin" export "${m4[@]}" --set n_layers=16 --set d_ffn=8192 --out "$work/ex"; rc=$?
refused "export"
limited 30 "$bin" bench --models medium --threads 1 --steps 1 --seq 256 --batch 16; rc=$?
refused "bench"
# verify: the files are read (the small model's, which pass), then the model config.json describes is not
# built where it cannot fit: a failure naming the estimate, the other lines still printed
cp "$work/hf/model.safetensors" "$work/big/"
limited 30 "$bin" verify "$work/big"; rc=$?
[ "$rc" -eq 1 ] && grep -q "^$work/big/model.safetensors: ok: " "$work/out" &&
  grep -q "^$work/big: FAILED: .*needs about .* GiB (weights .*) and .* GiB is available (RLIMIT_AS.*use --no-memory-check" \
    "$work/out" && ok || fail "verify: rc $rc: $(head -c 800 "$work/out" "$work/err")"
limited 30 "$bin" verify "$work/big" --no-memory-check; rc=$?
[ "$rc" -eq 1 ] && ! grep -q "needs about" "$work/out" && ok || fail "verify --no-memory-check: still refused: $(head -c 400 "$work/out")"

# ---- a missing data folder: named before the model is built (under the limit, where building it would
# fail for want of memory instead), the same through --config
limited 30 "$bin" train --data "$work/gone" "${m150[@]}" --batch 1 --seq 16 --steps 1 --threads 1; rc=$?
[ "$rc" -ne 0 ] && grep -q "no shard files match '$work/gone/.*' (no folder $work/gone)" "$work/err" && ok ||
  fail "--data of a missing folder: rc $rc: $(head -c 400 "$work/err")"
printf '{"train": "%s/gone/*_train_*.bin", "n_layers": 150, "d_model": 1024, "n_heads": 8, "n_kv_heads": 8, "d_ffn": 4096, "batch": 1, "seq": 16, "steps": 1}\n' \
  "$work" > "$work/gone.json"
limited 30 "$bin" train --config "$work/gone.json" --threads 1; rc=$?
[ "$rc" -ne 0 ] && grep -q "(no folder $work/gone)" "$work/err" && ok ||
  fail "--config naming a missing folder: rc $rc: $(head -c 400 "$work/err")"
limited 30 "$bin" eval --checkpoint "$work/hf" --data "$work/gone" --batch 1 --seq 16; rc=$?
[ "$rc" -ne 0 ] && grep -q "(no folder $work/gone)" "$work/err" && ok || fail "eval --data of a missing folder: $(head -c 400 "$work/err")"
finish
