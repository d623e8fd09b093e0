#!/usr/bin/env bash
# The command line: --help on every subcommand, a short real run and its files, and bad
# input (each a clear message naming the flag, file or value, and a non-zero exit).
set -u
bin=${1:?usage: cli_train.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"

for cmd in prepare train eval sample bench; do
  if "$bin" $cmd --help | grep -q "usage: nobubble $cmd"; then ok; else fail "$cmd --help"; fi
done
"$bin" --help | grep -q "train" && ok || fail "nobubble --help"
"$bin" version --help | grep -q "usage: nobubble version" && ok || fail "version --help"
# --help names every model preset and every backend the parsers accept (the lists the refusals give)
presets=$("$bin" train --model frobnicate --steps 1 2>&1 | sed -n 's/.*expected one of: \([^)]*\)).*/\1/p')
[ -n "$presets" ] && ok || fail "train --model frobnicate: no list of presets"
for cmd in train export; do
  line=$("$bin" $cmd --help | grep -- "--model")
  for p in $presets; do
    case "$line" in *" $p "*|*" $p") ok ;; *) fail "$cmd --help: --model lacks the preset $p: $line" ;; esac
  done
done
backends=$("$bin" train --gemm frobnicate --steps 1 2>&1 | sed -n "s/.*backend 'frobnicate': expected \(.*\)/\1/p")
[ -n "$backends" ] && "$bin" train --help | grep -- "--gemm" | grep -qF -- "$backends" && ok \
  || fail "train --help's --gemm lacks the backends '$backends': $("$bin" train --help | grep -- --gemm)"
expect_error "unknown command" "unknown command" "$bin" frobnicate

# A small prepared corpus: a few hundred paragraphs of real text, byte-level BPE vocab 300.
small_corpus "$bin" "$work/data" && ok || fail "prepare small text"

"$bin" train --data "$work/data" --model tiny --set n_layers=2 --set context=32 --batch 2 --steps 5 \
  --eval-every 5 --eval-batches 1 --out "$work/run" > "$work/train.log" 2>&1
if [ $? -eq 0 ] && grep -q "step     5/5" "$work/train.log"; then ok; else fail "short train run: $(cat "$work/train.log")"; fi
[ "$(wc -l < "$work/run/metrics.jsonl")" -eq 5 ] && ok || fail "metrics.jsonl has one line per step"
grep -q '"weights_hash": "[0-9a-f]\{16\}"' "$work/run/summary.json" && ok || fail "summary.json has the weights hash"
grep -q '"vocab_size": 300' "$work/run/summary.json" && ok || fail "the model takes the data's vocabulary"
grep -q '"val_loss"' "$work/run/metrics.jsonl" && ok || fail "validation loss logged"
# The final weights as a Hugging Face folder.
"$bin" train --data "$work/data" --model tiny --set n_layers=2 --set context=32 --batch 2 --steps 3 --quiet \
  --eval-batches 2 --out "$work/exrun" --export "$work/hf" > "$work/export.log" 2>&1 && ok || fail "train --export: $(cat "$work/export.log")"
check "exported model" test -s "$work/hf/model.safetensors"
check "exported config" grep -q '"vocab_size": 300' "$work/hf/config.json"
check "the data's tokenizer goes with the exported model" cmp -s "$work/hf/tokenizer.json" "$work/data/tokenizer.json"
# nobubble eval on the exported model reports exactly the run's final validation loss.
want=$(sed -n 's/.*"final_val_loss": \([^,]*\),/\1/p' "$work/exrun/summary.json")
got=$("$bin" eval --checkpoint "$work/hf" --data "$work/data" --batch 2 --batches 2 --json | sed -n 's/.*"val_loss": \([^,]*\),.*/\1/p')
[ -n "$want" ] && [ "$want" = "$got" ] && ok || fail "eval of the exported model: $got, the run's final validation loss: $want"
# nobubble sample: the same seed gives the same text; bad use refused.
s1=$("$bin" sample --checkpoint "$work/hf" --tokenizer "$work/data/tokenizer.json" --prompt "In the beginning" --tokens 8 --seed 5)
s2=$("$bin" sample --checkpoint "$work/hf" --tokenizer "$work/data/tokenizer.json" --prompt "In the beginning" --tokens 8 --seed 5)
[ -n "$s1" ] && [ "$s1" = "$s2" ] && case "$s1" in "In the beginning"*) true ;; *) false ;; esac && ok || fail "sample: '$s1' vs '$s2'"
expect_error "sample without a prompt" "--prompt TEXT are required" "$bin" sample --checkpoint "$work/hf"
expect_error "sample past the context" "more than the model's context" "$bin" sample --checkpoint "$work/hf" \
  --tokenizer "$work/data/tokenizer.json" --prompt "In the beginning" --tokens 100
expect_error "eval without a checkpoint" "--checkpoint DIR is required" "$bin" eval --data "$work/data"
expect_error "eval of a missing folder" "config.json" "$bin" eval --checkpoint "$work/nowhere"

# Bad input
expect_error "zero steps" "--steps 0" "$bin" train --data "$work/data" --steps 0
expect_error "heads do not divide d_model" "n_heads" "$bin" train --data "$work/data" --set n_heads=3
expect_error "kv heads do not divide heads" "n_kv_heads" "$bin" train --data "$work/data" --set n_kv_heads=3
expect_error "negative size" "d_ffn" "$bin" train --data "$work/data" --set d_ffn=-1
expect_error "unknown model field" "width" "$bin" train --data "$work/data" --set width=3
expect_error "unknown preset" "huge" "$bin" train --data "$work/data" --model huge
expect_error "sequence longer than the context" "context" "$bin" train --data "$work/data" --seq 4096
expect_error "not a number" "--batch 'abc'" "$bin" train --data "$work/data" --batch abc
expect_error "unknown flag" "--bogus" "$bin" train --bogus
expect_error "missing data" "nowhere" "$bin" train --data "$work/nowhere"
expect_error "vocabulary too small for the data" "vocab" "$bin" train --data "$work/data" --set vocab_size=100
# Optimizers: a short run with each, then bad hyperparameters.
for opt in sgd adamw muon lion adan mars soap normuon; do
  if "$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 --steps 2 --optimizer $opt \
       --quiet > "$work/opt.log" 2>&1 && grep -q "done: 2 steps" "$work/opt.log"; then ok; else fail "train --optimizer $opt: $(cat "$work/opt.log")"; fi
done
expect_error "unknown optimizer lists the valid ones" "sgd, adamw, muon, lion, adan, mars, soap, normuon" "$bin" train --data "$work/data" --optimizer adamax
expect_error "negative learning rate" "--lr -0.1" "$bin" train --data "$work/data" --lr -0.1
expect_error "NaN learning rate" "--lr 'nan'" "$bin" train --data "$work/data" --lr nan
expect_error "beta1 outside [0, 1)" "--beta1 1" "$bin" train --data "$work/data" --beta1 1
expect_error "negative beta2" "--beta2 -0.5" "$bin" train --data "$work/data" --optimizer lion --beta2 -0.5
expect_error "negative weight decay" "--wd -1" "$bin" train --data "$work/data" --wd -1
expect_error "SOAP refresh interval 0" "--precond-every 0" "$bin" train --data "$work/data" --optimizer soap --precond-every 0
expect_error "negative clip" "--clip -1" "$bin" train --data "$work/data" --clip -1
expect_error "unknown schedule" "--schedule 'linear': expected one of cosine, wsd, constant" "$bin" train --data "$work/data" --schedule linear

# Delays and mitigations: a short delayed run records them; bad ones are refused.
"$bin" train --data "$work/data" --set n_layers=2 --set context=16 --batch 2 --steps 4 --stages 2 --delay pipedream \
  --ef 1 --taylor 0.04 --sync-start 1 --sync-cooldown 1 --out "$work/delayed" > "$work/delay.log" 2>&1
if grep -q "delay pipedream, error feedback alpha 1, taylor lambda 0.04, sync start 1, sync cooldown 1" "$work/delay.log" &&
   grep -q '"delay": {"mode": "pipedream", "tau": 0, "ef": true' "$work/delayed/summary.json"; then ok
else fail "delayed run header and summary: $(cat "$work/delay.log")"; fi
grep -q '"version_distance"' "$work/delayed/metrics.jsonl" && ok || fail "metrics record the version distance"
# taylor_ratio = ||lambda g g (w_t - w_{t-1})|| / ||g||. Under 2bw step 1's correction is 0 (w_0 - w_0),
# and step 2's gradient (on w_0) and w_1 - w_0 do not depend on lambda (step 1 was not corrected), so
# the ratio at step 2 is exactly proportional to lambda: 10x with --taylor 10 as with --taylor 1.
ratio() { sed -n "$2s/.*\"taylor_ratio\": \([^,}]*\).*/\1/p" "$1/metrics.jsonl"; }
for lam in 1 10; do
  "$bin" train --data "$work/data" --set n_layers=2 --set context=16 --batch 2 --steps 3 --stages 2 --delay 2bw \
    --taylor $lam --quiet --out "$work/taylor$lam" > "$work/taylor$lam.log" 2>&1 || fail "--taylor $lam: $(cat "$work/taylor$lam.log")"
done
check "taylor_ratio on every line" test "$(grep -c '"taylor_ratio"' "$work/taylor1/metrics.jsonl")" -eq 3
check "taylor_ratio 0 at step 1 (w_0 - w_0 = 0)" test "$(ratio "$work/taylor1" 1)" = 0
awk -v a="$(ratio "$work/taylor1" 2)" -v b="$(ratio "$work/taylor10" 2)" 'BEGIN { exit !(a > 0 && b / a > 10 * (1 - 1e-5) && b / a < 10 * (1 + 1e-5)) }' &&
  ok || fail "taylor_ratio at step 2 proportional to lambda: $(ratio "$work/taylor1" 2) with 1, $(ratio "$work/taylor10" 2) with 10"
check "no taylor_ratio without --taylor" test "$(grep -c taylor_ratio "$work/run/metrics.jsonl")" -eq 0
expect_error "unknown delay mode" "sync, 2bw, pipedream or fixed:TAU" "$bin" train --data "$work/data" --delay 3bw
expect_error "negative tau" "fixed:TAU with an integer TAU from 0 to 1000000" "$bin" train --data "$work/data" --delay fixed:-2
expect_error "sync start longer than the run" "--sync-start 50" "$bin" train --data "$work/data" --steps 10 --delay 2bw --sync-start 50
expect_error "sync cooldown longer than the run" "--sync-cooldown 50" "$bin" train --data "$work/data" --steps 10 --delay 2bw --sync-cooldown 50
expect_error "more stages than blocks" "stages = 9" "$bin" train --data "$work/data" --set n_layers=2 --stages 9 --delay pipedream
expect_error "negative EF alpha" "--ef -1: out of range, expected a number from 0 to" "$bin" train --data "$work/data" --delay 2bw --ef -1
"$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 --steps 1 --ef 1 --quiet > /dev/null 2> "$work/warn.log"
grep -q "warning: --ef with no delay does nothing" "$work/warn.log" && ok || fail "--ef with sync warns: $(cat "$work/warn.log")"
# flags this run does not read are said (the run goes on); none is said when each is used
for f in "--taylor 1:--taylor with no delay does nothing" "--chunks 2:--chunks does nothing here" \
         "--threads-per-stage 1:--threads-per-stage does nothing here" "--dp-bucket-mib 5:--dp-bucket-mib does nothing here" \
         "--warmup 5:--warmup is longer than the run's updates"; do
  "$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 --steps 2 ${f%%:*} --quiet > /dev/null 2> "$work/warn.log"
  grep -q "warning: ${f#*:}" "$work/warn.log" && ok || fail "${f%%:*} unused warns: $(cat "$work/warn.log")"
done
# ... and a flag the run then refuses is not first said to do nothing (zbh1's --ef, 1f1b's --chunks)
for f in "--pipeline zbh1 --ef 1:--ef" "--pipeline 1f1b --chunks 2:--chunks"; do
  "$bin" train --data "$work/data" --set n_layers=2 --set context=16 --batch 2 --steps 2 --stages 2 --microbatches 2 \
    ${f%%:*} --quiet > /dev/null 2> "$work/warn.log" && fail "${f%%:*}: exit 0"
  ! grep -q "warning: ${f#*:}" "$work/warn.log" && grep -q -- "${f#*:}" "$work/warn.log" && ok ||
    fail "${f%%:*}: warned before the refusal: $(cat "$work/warn.log")"
done
# An empty string is no name (--device '' and --gemm '' ran the defaults, --init-from '' read /config.json)
for f in --device --gemm --init-from --resume --out; do
  expect_error "$f ''" "$f '': expected [A-Z]*, not an empty string" "$bin" train --data "$work/data" --steps 1 $f ''
done
expect_error "eval --device ''" "--device '': expected cpu" "$bin" eval --checkpoint "$work/hf" --device ''
# ... --threads under a pipeline (each stage takes --threads-per-stage), --dp-bucket-mib on a device (no MPI needed
# to see it: the replicas there are one process's)
"$bin" train --data "$work/data" --set n_layers=2 --set context=16 --batch 2 --steps 1 --pipeline 1f1b --stages 2 \
  --microbatches 2 --threads 1 --quiet > /dev/null 2> "$work/warn.log"
grep -q "warning: --threads does nothing with --pipeline" "$work/warn.log" && ok || fail "--threads: $(cat "$work/warn.log")"
"$bin" train --data "$work/data" --set n_layers=2 --set context=16 --batch 2 --steps 1 --device guarded \
  --dp-bucket-mib 5 --quiet > /dev/null 2> "$work/warn.log"
grep -q "warning: --dp-bucket-mib does nothing here" "$work/warn.log" && ok || fail "--dp-bucket-mib: $(cat "$work/warn.log")"
"$bin" train --data "$work/data" --set n_layers=2 --set context=16 --batch 2 --steps 2 --delay 2bw --ef 1 --taylor 1 --warmup 1 \
  --quiet > /dev/null 2> "$work/warn.log" && "$bin" train --data "$work/data" --set n_layers=4 --set context=16 --batch 2 \
  --steps 2 --pipeline interleaved --stages 2 --microbatches 2 --chunks 2 --threads-per-stage 1 --quiet > /dev/null 2>> "$work/warn.log" \
  && ! grep -q "warning: --\(ef\|taylor\|chunks\|threads-per-stage\|warmup\)" "$work/warn.log" && ok \
  || fail "flags in use are not said to be unused: $(cat "$work/warn.log")"
# a run whose every update has rate 0 (cosine ends at --lr-min on its last update: one update is that one) is said
# to train nothing; a run with an update above 0 is not
"$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 --steps 1 --quiet > /dev/null 2> "$work/warn.log"
grep -q "warning: every update of this run has learning rate 0 (--schedule cosine ends at --lr-min 0" "$work/warn.log" \
  && ok || fail "--steps 1 under cosine warns: $(cat "$work/warn.log")"
for f in "--steps 1 --schedule constant" "--steps 1 --warmup 1" "--steps 2" "--steps 1 --lr-min 1e-5"; do
  "$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 $f --quiet > /dev/null 2> "$work/warn.log"
  ! grep -q "learning rate 0" "$work/warn.log" && ok || fail "$f: said to have rate 0: $(cat "$work/warn.log")"
done

# An optimizer's hyperparameter given to another rule is said to do nothing, and that is checked against what
# the run does: said <=> the weights after 5 steps are the default run's bit for bit (--nesterov: said <=>
# --nesterov and --no-nesterov give the same weights).
hash_of_run() {
  "$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 --steps 5 --quiet "$@" 2> "$work/hp.err" |
    sed -n 's/.*weights \([0-9a-f]*\).*/\1/p'
}
for opt in sgd adamw muon lion adan mars soap normuon; do
  base=$(hash_of_run --optimizer $opt)
  for f in "--beta1 0.5" "--beta2 0.5" "--beta3 0.5" "--momentum 0.5" "--ns-steps 2" "--gamma 0.5" "--precond-every 1" \
           "--max-precond-dim 1" "--nesterov"; do
    h=$(hash_of_run --optimizer $opt $f)
    said=$(grep -c "warning: ${f%% *} does nothing with --optimizer $opt" "$work/hp.err")
    [ "$f" = "--nesterov" ] && base=$(hash_of_run --optimizer $opt --no-nesterov)
    if [ -z "$h" ] || [ -z "$base" ]; then fail "$opt $f: a run failed: $(cat "$work/hp.err")"
    elif [ "$said" -eq 1 ] && [ "$h" = "$base" ]; then ok
    elif [ "$said" -eq 0 ] && [ "$h" != "$base" ]; then ok
    else fail "$opt $f: said unused $said time(s), weights $( [ "$h" = "$base" ] && echo equal || echo differ) to the default's"
    fi
  done
done

# Checkpoints: saved every N steps and at the end; resuming continues the metrics; bad use refused.
"$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 --steps 4 --quiet --out "$work/ck" \
  --save-dir "$work/ck/save" --save-every 2 > /dev/null 2>&1 && ok || fail "train --save-every"
check "checkpoint at step 2 is complete" test -s "$work/ck/save/step_000002/state.safetensors"
check "checkpoint at the end" test -s "$work/ck/save/step_000004/model.safetensors"
"$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 --steps 4 --quiet --out "$work/ck" \
  --resume "$work/ck/save/step_000002" > /dev/null 2>&1 && ok || fail "train --resume"
# the resumed run redoes steps 3 and 4: their first lines go, so each step has one line
check "the resumed run continues its metrics, each step once" \
  test "$(sed -n 's/^{"step": \([0-9]*\),.*/\1/p' "$work/ck/metrics.jsonl" | tr '\n' ' ')" = "1 2 3 4 "
expect_error "--save-every without --save-dir" "--save-every needs --save-dir" "$bin" train --data "$work/data" --save-every 2
expect_error "resume from nothing" "state.safetensors" "$bin" train --data "$work/data" --set n_layers=1 --set context=16 \
  --batch 2 --steps 4 --resume "$work/nowhere"
expect_error "resume another model" "model n_layers 2 (checkpoint: 1)" "$bin" train --data "$work/data" --set n_layers=2 --set context=16 \
  --batch 2 --steps 4 --resume "$work/ck/save/step_000002"

# --keep K keeps the newest K periodic checkpoints.
"$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 --steps 6 --quiet \
  --save-dir "$work/keep" --save-every 2 --keep 2 > /dev/null 2>&1 && ok || fail "train --keep"
check "--keep 2: step 2 removed" test ! -e "$work/keep/step_000002"
check "--keep 2: steps 4 and 6 kept" test -s "$work/keep/step_000004/state.safetensors" -a -s "$work/keep/step_000006/state.safetensors"
expect_error "--keep without --save-every" "--keep needs --save-every" "$bin" train --data "$work/data" --save-dir "$work/k2" --keep 2

# SIGTERM finishes the step, saves a checkpoint, says where, and exits non-zero; the run resumes from it.
"$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 --steps 100000 --quiet \
  --out "$work/sigrun" --save-dir "$work/sig" > "$work/sig.log" 2>&1 &
pid=$!
for i in $(seq 1 400); do [ "$(cat "$work/sigrun/metrics.jsonl" 2>/dev/null | wc -l)" -ge 2 ] && break; sleep 0.05; done
kill -TERM $pid; wait $pid; rc=$?
saved=$(ls "$work/sig" 2>/dev/null | head -1)
if [ $rc -ne 0 ] && grep -q "stopped on request after step" "$work/sig.log" && [ -s "$work/sig/$saved/state.safetensors" ]; then ok
else fail "SIGTERM: rc $rc, saved '$saved', log: $(cat "$work/sig.log")"; fi

# A diverging run stops with a message instead of training on NaN.
expect_error "loss becomes NaN" "became .* at step" "$bin" train --data "$work/data" --set n_layers=1 --set context=16 \
  --batch 2 --steps 30 --lr 1e6 --schedule constant
# ... and keeps its good checkpoints: nothing of the diverged step is saved, and --keep 1 does not prune the
# newest checkpoint a finite step ran on (whose validation loss eval then reports, exiting 0), for the
# one-process run, its delay simulation and a real pipeline.
for mode in "" "--delay 2bw --stages 2" "--pipeline 2bw --stages 2 --microbatches 2"; do
  rm -rf "$work/div"
  # shellcheck disable=SC2086
  "$bin" train --data "$work/data" --set n_layers=2 --set context=16 --batch 2 --steps 30 --lr 1e6 --schedule constant \
    --save-dir "$work/div" --save-every 1 --keep 1 --quiet $mode > "$work/div.log" 2>&1; rc=$?
  grep -q "became .* at step [0-9]*: the run stopped before applying that step" "$work/div.log" && [ $rc -ne 0 ] && ok ||
    fail "diverging run ($mode): rc $rc, $(cat "$work/div.log")"
  oldest=$(ls "$work/div" | grep -v partial | head -1)
  "$bin" eval --checkpoint "$work/div/$oldest" --data "$work/data" --batch 2 --batches 2 > "$work/div.eval" 2>&1 &&
    grep -q "val loss [0-9]" "$work/div.eval" && ok ||
    fail "diverging run ($mode): its oldest kept checkpoint '$oldest' is not good: $(cat "$work/div.eval")"
done
# eval refuses a model whose loss is not finite: a NaN weight in an exported model (checksums removed,
# as in a file another tool wrote).
python3 - "$work/hf/model.safetensors" "$work/nanhf/model.safetensors" <<'PY'
import json, struct, sys, os
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
header.pop("__metadata__", None)
name = next(k for k in header if "norm" in k)
off = header[name]["data_offsets"][0]
body = bytearray(data[8 + n:])
body[off:off + 4] = struct.pack("<f", float("nan"))
h = json.dumps(header).encode()
os.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + bytes(body))
PY
cp "$work/hf/config.json" "$work/nanhf/"
expect_error "eval of NaN weights" "validation loss is .*nan" "$bin" eval --checkpoint "$work/nanhf" --data "$work/data" --batch 2 --batches 1

# A shard with a wrong magic, and a truncated one.
mkdir -p "$work/bad"
cp "$work/data/"*_train_*.bin "$work/bad/x_train_000000.bin"
printf '\x01\x02\x03\x04' | dd of="$work/bad/x_train_000000.bin" bs=1 seek=0 conv=notrunc 2>/dev/null
expect_error "wrong magic" "x_train_000000.bin" "$bin" train --train "$work/bad/x_train_*.bin" --set vocab_size=300
cp "$work/data/"*_train_*.bin "$work/bad/y_train_000000.bin"
truncate -s -3 "$work/bad/y_train_000000.bin"
expect_error "truncated shard" "y_train_000000.bin" "$bin" train --train "$work/bad/y_train_*.bin" --set vocab_size=300


# --split takes as many counts as --stages allows (past 256 it said "expected 300 counts" to 300 counts); the
# model then refuses 300 stages for 2 blocks
split=$(printf '1,%.0s' $(seq 1 299))1
expect_error "--split of 300 counts" "stages = 300: expected 1 <= stages <= n_layers (2)" \
  "$bin" train --data "$work/data" --set n_layers=2 --batch 2 --seq 16 --steps 2 --quiet --stages 300 --split "$split"
finish
