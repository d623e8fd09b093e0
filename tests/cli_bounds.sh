#!/usr/bin/env bash
# Bad input, one case at a time: every numeric flag's range, the numbers of a training state's
# metadata, a schedule's costs, lists, grids, checkpoint parts of two saves and checksum keys. Each
# must end with a non-zero exit and a message naming the flag or file, the value and what was
# expected (never a crash, a hang or a run that goes on with defaults). Commands that once ran without
# end run under `timeout`, so that a regression fails here instead of hanging.
set -u
bin=${1:?usage: cli_bounds.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
# (-k: train stops at the end of a step on SIGTERM, which a run of 2e9 micro-batches never reaches)
nb() { timeout -k 5 "${NB_BOUNDS_TIMEOUT:-120}" "$bin" "$@"; }

small_corpus "$bin" "$work/data" || fail "prepare"
small=(--data "$work/data" --set n_layers=2 --set context=16 --batch 2 --threads 1 --quiet)
train() { nb train "${small[@]}" "$@"; }

# ---- the environment: an unknown GEMM backend is refused by every command, not replaced by the default
expect_error "NB_GEMM=cublas" "NB_GEMM: backend 'cublas': expected tiles, hybrid, onednn or openblas" env NB_GEMM=cublas "$bin" train "${small[@]}" --steps 1
expect_error "NB_GEMM=OneDNN (eval)" "NB_GEMM: backend 'OneDNN'" env NB_GEMM=OneDNN "$bin" eval --checkpoint "$work/none"
expect_error "NB_GEMM=matmul (gone)" "NB_GEMM: backend 'matmul'" env NB_GEMM=matmul "$bin" train "${small[@]}" --steps 1
expect_error "--gemm cublas" "--gemm: backend 'cublas'" "$bin" train "${small[@]}" --steps 1 --gemm cublas
NB_GEMM=openblas "$bin" train "${small[@]}" --steps 1 >/dev/null 2>&1 && ok || fail "NB_GEMM=openblas: a valid backend runs"

# ---- train: every number in range (the parser's [MIN..MAX], shown by --help)
expect_error "--threads 100000" "train: --threads 100000: out of range, expected an integer from 0 to 1024" train --threads 100000 --steps 1
cores=$(getconf _NPROCESSORS_ONLN)
if [ $((4 * cores + 1)) -le 1024 ]; then
  expect_error "--threads past 4 x cores" "train: --threads $((4 * cores + 1)): expected 1 to $((4 * cores)) threads" \
    train --threads $((4 * cores + 1)) --steps 1
fi
expect_error "--threads -1" "out of range" train --threads -1 --steps 1
expect_error "--threads-per-stage 100000" "--threads-per-stage 100000: out of range" train --threads-per-stage 100000
expect_error "--microbatches 2000000000" "--microbatches 2000000000: out of range, expected an integer from 1 to 4096" \
  train --microbatches 2000000000 --steps 1
expect_error "--eval-batches 100000000" "--eval-batches 100000000: out of range, expected an integer from 1 to 4096" \
  train --eval-batches 100000000 --steps 1
expect_error "--steps 0" "--steps 0: out of range" train --steps 0
expect_error "--steps 10^9" "--steps 1000000000: out of range, expected an integer from 1 to 100000000" train --steps 1000000000
expect_error "--steps past long" "--steps 99999999999999999999: out of range" train --steps 99999999999999999999
expect_error "--batch 65537" "--batch 65537: out of range" train --batch 65537
expect_error "a micro-batch too large for memory" "--batch 65536 x --seq 1024 x .* too large" \
  train --batch 65536 --set context=1024 --steps 1
expect_error "--warmup -1" "--warmup -1: out of range" train --warmup -1
expect_error "--cooldown 2" "--cooldown 2: out of range, expected a number from 0 to 1" train --cooldown 2
expect_error "--log-every 0" "--log-every 0: out of range" train --log-every 0
expect_error "--lr-min above --lr" "--lr-min 0.01: above --lr 0.001" train --lr 1e-3 --lr-min 1e-2 --steps 1
expect_error "--set n_layers=100000" "n_layers = 100000: expected at most 4096" train --set n_layers=100000 --steps 1
expect_error "--set context=2000000" "context = 2000000: expected at most 1048576" train --set context=2000000 --steps 1
expect_error "--seq past the context" "--seq 17: expected 1 <= seq <= the model's context (16)" train --seq 17 --steps 1
check "--help shows ranges" eval '"$bin" train --help | grep -q -- "--microbatches.*\[1\.\.4096\]"'

# ---- prepare --val-fraction 0: the data trains, without a validation loss, and says so
"$bin" prepare --input "$work/text.txt" --vocab 300 --val-fraction 0 --out "$work/data0" --quiet >/dev/null 2>&1 || fail "prepare --val-fraction 0"
nb train --data "$work/data0" --set n_layers=1 --set context=16 --batch 2 --threads 1 --steps 2 --quiet \
  >"$work/v0.out" 2>"$work/v0.err"
check "train on --val-fraction 0 data runs (exit 0): $(cat "$work/v0.err")" test $? -eq 0
check "... says it has no validation shards" grep -q "has no validation shards" "$work/v0.err"
check "... and reports no val loss" grep -q "val loss none (no validation data)" "$work/v0.out"

# ---- a training state's numbers (bash rewrites the safetensors header; its length may change)
# st_edit FILE SED_EXPRESSION: the header through sed, padded to 8 bytes, its new length in front. The edit
# also drops the header's checksum (with it, every edit is refused as a corrupt header, tested below), so
# that the file is one written before it: the checks of meaning here are what reads such a file.
# st_edit_keep: the same, the header's checksum kept.
st_edit() { st_edit_keep "$1" "$2; s/,\"nobubble.header_checksum\":\"xxh3:[0-9a-f]*\"//"; }
st_edit_keep() {
  local f=$1 n m
  n=$(od -An -tu8 -N8 "$f" | tr -d ' ')
  head -c $((8 + n)) "$f" | tail -c "$n" | sed -e "$2" | tr -d '\n' > "$work/h.json"   # the header has no newline
  m=$(stat -c %s "$work/h.json")
  while [ $((m % 8)) -ne 0 ]; do printf ' ' >> "$work/h.json"; m=$((m + 1)); done
  { printf "$(printf '\\%03o\\%03o\\%03o\\%03o\\000\\000\\000\\000' $((m & 255)) $(((m >> 8) & 255)) \
      $(((m >> 16) & 255)) $(((m >> 24) & 255)))"; cat "$work/h.json"; tail -c +$((9 + n)) "$f"; } > "$f.new"
  mv "$f.new" "$f"
}
train --steps 4 --save-dir "$work/ck" >/dev/null 2>&1 || fail "a checkpoint to edit"
ck="$work/ck/step_000004"
corrupt() { rm -rf "$work/bad"; cp -r "$ck" "$work/bad"; }
resume_bad() { train --steps 8 --resume "$work/bad"; }
corrupt; st_edit "$work/bad/state.safetensors" 's/"count:model.norm.weight":"[0-9]*"/"count:model.norm.weight":"9223372036854775807"/'
expect_error "count 2^63-1" "metadata 'count:model.norm.weight' = '9223372036854775807' is not an integer from 0 to 4" resume_bad
corrupt; st_edit "$work/bad/state.safetensors" 's/"count:model.norm.weight":"[0-9]*"/"count:model.norm.weight":"5"/'
expect_error "count past the optimizer's steps" "'count:model.norm.weight' = '5' is not an integer from 0 to 4" resume_bad
corrupt; st_edit "$work/bad/state.safetensors" 's/"optimizer_steps":"[0-9]*"/"optimizer_steps":"99"/'
expect_error "optimizer_steps past next_step" "'optimizer_steps' = '99' is not an integer from 0 to 4" resume_bad
corrupt; st_edit "$work/bad/state.safetensors" 's/"next_step":"[0-9]*"/"next_step":"18446744073709551615"/'
expect_error "next_step past long long" "'next_step' = '18446744073709551615' is not an integer from 0 to 100000000" resume_bad
corrupt; st_edit "$work/bad/state.safetensors" 's/"loader_position":"[0-9]*"/"loader_position":"9223372036854775807"/'
expect_error "loader_position 2^63-1" "'loader_position' = '9223372036854775807' is not an integer" resume_bad
corrupt; st_edit "$work/bad/state.safetensors" 's/"run.seq":"[0-9]*"/"run.seq":"1048576"/; s/"loader_position":"[0-9]*"/"loader_position":"281474976710656"/'
expect_error "a loader position rescaled past its bound" "loader_position 281474976710656 of 2 x 1048576 tokens .* past" \
  train --steps 8 --resume "$work/bad" --override --set context=16
corrupt; st_edit "$work/bad/state.safetensors" 's/"count:model.norm.weight":"[0-9]*"/"count:model.norm.weight":"3"/'
check "an in-range edit still resumes (the editor works)" eval 'resume_bad >/dev/null 2>&1'
corrupt; st_edit_keep "$work/bad/state.safetensors" 's/"count:model.norm.weight":"[0-9]*"/"count:model.norm.weight":"3"/'
expect_error "the same edit with the header's checksum kept" "state.safetensors: header checksum mismatch" resume_bad

# ---- checksums: a damaged key name must not drop a tensor's check
corrupt; st_edit "$work/bad/model.safetensors" 's/"nobubble.checksum:model.norm.weight"/"nobubble.checksum:model.norm.weighX"/'
expect_error "a checksum key naming no tensor" "'nobubble.checksum:model.norm.weighX' is the checksum of a tensor 'model.norm.weighX' the file does not hold" \
  nb eval --checkpoint "$work/bad" --data "$work/data" --batch 2 --batches 1
corrupt; st_edit "$work/bad/model.safetensors" 's/"nobubble.checksum:model.norm.weight"/"nobubble.checksuX:model.norm.weight"/'
expect_error "a tensor without its checksum" "tensor 'model.norm.weight' has no checksum while" \
  nb eval --checkpoint "$work/bad" --data "$work/data" --batch 2 --batches 1

# ---- config.json: the message names the file once (nb_fail formats safely from nb_last_error())
corrupt; sed -i 's/"num_attention_heads": [0-9]*/"num_attention_heads": 0/' "$work/bad/config.json"
expect_error "config.json with 0 heads" "config.json: model field n_heads = 0: expected a positive integer" \
  nb eval --checkpoint "$work/bad" --data "$work/data" --batch 2 --batches 1
check "... named once" test "$(grep -o 'config.json' "$work/err" | wc -l)" -eq 1

# ---- values past a type's range are called out of range, naming the value given (not "not an integer")
expect_error "--set n_layers past int" "model field n_layers: 99999999999 is out of range" train --set n_layers=99999999999 --steps 1
expect_error "--delay fixed: past its range" "fixed:99999999999: expected fixed:TAU with an integer TAU from 0 to 1000000" \
  train --delay fixed:99999999999 --steps 1
expect_error "prepare --vocab past its range" "--vocab 99999999999 is too large (at most 16777216)" \
  nb prepare --vocab 99999999999 --input "$work/none.txt" --out "$work/pv"
expect_error "prepare: an unknown option last on the line" "unknown option '--bogus'" nb prepare --bogus
expect_error "prepare: a known option without its value" "--vocab needs a value" nb prepare --vocab

expect_error "--split with a count past its range" "--split '1,99999999999': block count 99999999999 is out of range" \
  train --stages 2 --split 1,99999999999 --steps 1
expect_error "bench --threads past its range" "--threads '1025': expected a comma-separated list of integers from 1 to 1024" \
  nb bench --threads 1025
expect_error "schedule --kind unknown lists every kind" "expected one of gpipe, 1f1b, pipedream, 2bw, interleaved, zbh1 or sequential" \
  nb schedule --kind foo
expect_error "schedule --kind and --pipeline disagreeing" "--kind 1f1b and --pipeline gpipe: one name for the same setting" \
  nb schedule --kind 1f1b --pipeline gpipe
expect_error "prepare --gcide-file without the gcide corpus" "--gcide-file $work/none goes with --corpus gcide" \
  nb prepare --gcide-file "$work/none" --input "$work/none.txt" --out "$work/pg"
expect_error "version with an argument" "version: takes no arguments (got '--bogus')" nb version --bogus

# ---- eval: ranges, and model parts of two saves
expect_error "eval --batches 100000000" "eval: --batches 100000000: out of range" \
  nb eval --checkpoint "$ck" --data "$work/data" --batches 100000000
expect_error "eval --batch 0" "eval: --batch 0: out of range" nb eval --checkpoint "$ck" --data "$work/data" --batch 0
# more batches than the validation split holds: each window is read once (the split's batches, said), never
# counted twice; the loss is the whole split's and the tokens reported are the distinct ones
nb eval --checkpoint "$ck" --data "$work/data" --batch 2 --batches 4096 --json > "$work/all.json" 2> "$work/all.err" \
  || fail "eval --batches past the split: $(cat "$work/all.err")"
held=$(sed -n 's/.*note: --batches 4096: .* hold \([0-9]*\) batches of 2 x 16 tokens: evaluating those.*/\1/p' "$work/all.err")
if [ -n "$held" ] && [ "$held" -lt 4096 ]; then
  ok
  nb eval --checkpoint "$ck" --data "$work/data" --batch 2 --batches "$held" --json > "$work/held.json" 2>/dev/null
  check "... the loss of exactly the split's $held batches, its tokens counted once" \
    test "$(cat "$work/all.json")" = "$(cat "$work/held.json")" -a -n "$(grep "\"tokens\": $((held * 2 * 16))}" "$work/all.json")"
  train --steps 1 --eval-batches 4096 --out "$work/evb" > /dev/null 2> "$work/evb.err" || fail "train --eval-batches past the split"
  grep -q "note: --eval-batches 4096: the validation shards .* hold $held batches of 2 x 16 tokens" "$work/evb.err" \
    && grep -q "\"eval_batches\": $held" "$work/evb/summary.json" && ok \
    || fail "train --eval-batches past the split: cut to $held and said: $(cat "$work/evb.err")"
else
  fail "eval --batches 4096 past a small split says how many batches it holds: $(cat "$work/all.err")"
fi
train --steps 4 --stages 2 --pipeline gpipe --save-dir "$work/pk" --save-every 2 >/dev/null 2>&1 || fail "a pipeline checkpoint"
rm -rf "$work/mixed"; cp -r "$work/pk/step_000004" "$work/mixed"
cp "$work/pk/step_000002/model-00002-of-00002.safetensors" "$work/mixed/"
check "a pipeline checkpoint evaluates" eval 'nb eval --checkpoint "$work/pk/step_000004" --data "$work/data" --batch 2 --batches 1 >/dev/null'
expect_error "eval of model parts from two saves" "model-00002-of-00002.safetensors is of step 2, .*model-00001-of-00002.safetensors of step 4: parts of two checkpoints" \
  nb eval --checkpoint "$work/mixed" --data "$work/data" --batch 2 --batches 1

# ---- schedule: costs finite and bounded, sizes bounded
expect_error "--forward-cost 1e38" "schedule: --forward-cost '1e38': 1e+38: expected a cost of at most 1e+09" \
  nb schedule --kind gpipe --stages 2 --microbatches 2 --forward-cost 1e38
check "a cost ratio of 1e9 / 1e-300 runs (the grid is skipped)" eval \
  'nb schedule --kind gpipe --stages 2 --microbatches 2 --forward-cost 1e9 --backward-cost 1e-300 | grep -q "grid skipped"'
expect_error "--stages 100000" "schedule: --stages 100000: out of range" nb schedule --kind gpipe --stages 100000 --microbatches 1
expect_error "stages x micro-batches x steps" "too many passes to simulate" \
  nb schedule --kind gpipe --stages 1024 --microbatches 4096 --steps 1000

# ---- bench: lists
expect_error "bench --models ''" "bench: --models '': expected a comma-separated list of non-empty items" nb bench --models ''
expect_error "bench --models tiny," "bench: --models 'tiny,'" nb bench --models tiny,
expect_error "bench --threads 100000" "bench: --threads '100000'" nb bench --threads 100000
expect_error "bench --tokens 0" "bench: --tokens 0: out of range" nb bench --tokens 0
# ---- bench: the step's shape (--seq, --batch; tests/cli_bench.sh runs the valid ones)
expect_error "bench --seq 0" "bench: --seq 0: out of range, expected an integer from 1 to 1048576" nb bench --seq 0
expect_error "bench --seq 2^21" "bench: --seq 2097152: out of range" nb bench --seq 2097152
expect_error "bench --batch 0" "bench: --batch 0: out of range, expected an integer from 1 to 65536" nb bench --batch 0
expect_error "bench --batch 65537" "bench: --batch 65537: out of range" nb bench --batch 65537
expect_error "bench --batch with --tokens" "bench: --batch 8 and --tokens 4096: give one of them" \
  nb bench --batch 8 --tokens 4096
expect_error "bench: a step too large for memory" \
  "bench: --models smollm-135m with --seq 1048576 and --batch 1: --batch 1 x --seq 1048576 x 49152 .* too large" \
  nb bench --models smollm-135m --seq 1048576 --batch 1

# ---- sample
expect_error "sample --tokens 10^8" "sample: --tokens 100000000: out of range" nb sample --checkpoint "$ck" --tokens 100000000
expect_error "sample --temperature 1e30" "sample: --temperature 1e30: out of range" nb sample --checkpoint "$ck" --temperature 1e30

# ---- sweep: grids that would run something else than asked
: > "$work/empty.grid"
expect_error "an empty grid" "empty.grid: no \`axis\` and no flags" nb sweep "$work/empty.grid" --out "$work/sw"
check "... ran nothing" test ! -e "$work/sw/runs"
printf '# only a comment\n\n' > "$work/comment.grid"
expect_error "a grid of comments" "no \`axis\`" nb sweep "$work/comment.grid" --out "$work/sw"
printf 'fixed: --steps 2 --resume=%s\n' "$ck" > "$work/resume.grid"
expect_error "--resume=X in a grid" "resume.grid:1: --resume=.*leave it out of the grid" nb sweep "$work/resume.grid" --out "$work/sw"
printf 'axis a: resume out\nfixed: --{a}=x\n' > "$work/placeholder.grid"
expect_error "--{a}=x making --resume=x" "point resume: --resume=x" nb sweep "$work/placeholder.grid" --dry-run
expect_error "sweep --jobs 0" "sweep: --jobs 0: out of range" nb sweep "$work/resume.grid" --jobs 0 --out "$work/sw"

finish
