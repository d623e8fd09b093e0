#!/usr/bin/env bash
# --precision from the command line: bf16 runs are bitwise reproducible (the same run twice, a threads
# pipeline against its one-process simulation, a resumed run against the uninterrupted one), their
# losses stay near fp32's, auto records the precision it chose, and a resume that changes the
# precision needs --override; bad values are refused.
set -u
bin=${1:?usage: cli_precision.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"

small_corpus "$bin" "$work/data" 30 && ok || fail "prepare"
small=(--data "$work/data" --model tiny --set context=32 --set d_model=64 --set d_ffn=128 --set n_heads=4
       --set n_kv_heads=2 --set n_layers=2 --batch 2 --steps 6 --eval-batches 2)
hash_of() { sed -n 's/^done: .*weights \([0-9a-f]\{16\}\)$/\1/p' "$1"; }
val_of() { sed -n 's/^done: .*val loss \([^,]*\),.*/\1/p' "$1"; }
train() { local log=$1; shift; OMP_NUM_THREADS=1 "$bin" train "${small[@]}" --threads 1 "$@" > "$work/$log" 2>&1; }

train fp32.log --precision fp32 || fail "fp32 run: $(tail -3 "$work/fp32.log")"
train bf16a.log --precision bf16 --out "$work/bf16a" || fail "bf16 run: $(tail -3 "$work/bf16a.log")"
train bf16b.log --precision bf16 || fail "bf16 run again"
a=$(hash_of "$work/bf16a.log"); b=$(hash_of "$work/bf16b.log"); f=$(hash_of "$work/fp32.log")
[ -n "$a" ] && [ "$a" = "$b" ] && ok || fail "bf16 twice: weights $a vs $b"
[ -n "$f" ] && [ "$a" != "$f" ] && ok || fail "bf16 ($a) differs from fp32 ($f): the bf16 path ran"
grep -q '"precision": "bf16"' "$work/bf16a/summary.json" && ok || fail "summary.json records bf16"
# bf16 keeps 8 significant bits: after 6 steps the validation loss stays within 1% of fp32's
python3 - "$(val_of "$work/fp32.log")" "$(val_of "$work/bf16a.log")" <<'PY' && ok || fail "bf16 val loss near fp32's"
import sys
f, b = map(float, sys.argv[1:])
sys.exit(0 if abs(f - b) <= 0.01 * f else 1)
PY

# A threads pipeline (2BW, two stages) equals the one-process run with the same delay, in bf16.
train one.log --precision bf16 --stages 2 --delay 2bw --microbatches 2 || fail "one-process 2bw"
train pipe.log --precision bf16 --stages 2 --pipeline 2bw --microbatches 2 --threads-per-stage 1 || fail "pipeline 2bw: $(tail -3 "$work/pipe.log")"
x=$(hash_of "$work/one.log"); y=$(hash_of "$work/pipe.log")
[ -n "$x" ] && [ "$x" = "$y" ] && ok || fail "bf16 pipeline ($y) equals its one-process run ($x)"

# Resume in bf16 at step 3 of 6: the uninterrupted run's weights.
train whole.log --precision bf16 --delay 2bw --save-dir "$work/ck" --save-every 3 || fail "bf16 with checkpoints"
train resumed.log --precision bf16 --delay 2bw --resume "$work/ck/step_000003" || fail "bf16 resume: $(tail -3 "$work/resumed.log")"
x=$(hash_of "$work/whole.log"); y=$(hash_of "$work/resumed.log")
[ -n "$x" ] && [ "$x" = "$y" ] && ok || fail "bf16 resumed ($y) equals uninterrupted ($x)"
# Muon and NorMuon under bf16 run their Newton-Schulz products on bf16 operands: the same identities hold.
train muon_a.log --precision bf16 --optimizer muon || fail "bf16 muon: $(tail -3 "$work/muon_a.log")"
train muon_b.log --precision bf16 --optimizer muon || fail "bf16 muon again"
x=$(hash_of "$work/muon_a.log"); y=$(hash_of "$work/muon_b.log")
[ -n "$x" ] && [ "$x" = "$y" ] && ok || fail "bf16 muon twice: weights $x vs $y"
for opt in muon normuon; do
  train "one_$opt.log" --precision bf16 --optimizer $opt --stages 2 --delay 2bw --microbatches 2 || fail "one-process 2bw $opt"
  train "pipe_$opt.log" --precision bf16 --optimizer $opt --stages 2 --pipeline 2bw --microbatches 2 --threads-per-stage 1 \
    || fail "pipeline 2bw $opt: $(tail -3 "$work/pipe_$opt.log")"
  x=$(hash_of "$work/one_$opt.log"); y=$(hash_of "$work/pipe_$opt.log")
  [ -n "$x" ] && [ "$x" = "$y" ] && ok || fail "bf16 $opt pipeline ($y) equals its one-process run ($x)"
done
train muon_whole.log --precision bf16 --optimizer muon --delay 2bw --save-dir "$work/ck_muon" --save-every 3 || fail "bf16 muon with checkpoints"
train muon_resumed.log --precision bf16 --optimizer muon --delay 2bw --resume "$work/ck_muon/step_000003" \
  || fail "bf16 muon resume: $(tail -3 "$work/muon_resumed.log")"
x=$(hash_of "$work/muon_whole.log"); y=$(hash_of "$work/muon_resumed.log")
[ -n "$x" ] && [ "$x" = "$y" ] && ok || fail "bf16 muon resumed ($y) equals uninterrupted ($x)"

# Changing the precision on resume needs --override.
expect_error "fp32 resume of a bf16 checkpoint" "precision fp32 (checkpoint: bf16)" \
  "$bin" train "${small[@]}" --delay 2bw --resume "$work/ck/step_000003"
train override.log --delay 2bw --resume "$work/ck/step_000003" --override && ok || fail "--override: $(tail -3 "$work/override.log")"

# auto records what it chose (bf16 only where the CPU has bf16 instructions), and says so.
train auto.log --precision auto --out "$work/auto" || fail "auto run"
chosen=$(sed -n 's/^precision: auto chose \([a-z0-9]*\) .*/\1/p' "$work/auto.log")
{ [ "$chosen" = fp32 ] || [ "$chosen" = bf16 ]; } && grep -q "\"precision\": \"$chosen\"" "$work/auto/summary.json" && ok \
  || fail "auto: printed '$chosen', summary $(grep -o '"precision": "[a-z0-9]*"' "$work/auto/summary.json")"

# Both bf16 GEMM paths give the same numbers up to the order of float32 additions (the backend's suffix
# names the path: --gemm or NB_GEMM).
# Where oneDNN has no bf16 matmul (below AVX-512: an AVX2 CPU), ":onednn" is refused at the start, naming
# the ISA and the choices, and there is no second path to compare.
NB_GEMM=tiles:widen train widen.log --precision bf16 --out "$work/widen" || fail "NB_GEMM=tiles:widen"
if train dnnl.log --precision bf16 --gemm tiles:onednn --out "$work/dnnl"; then
  # summary.json names the backend that ran: the flag's, else the environment's
  grep -q '"gemm": "tiles:onednn"' "$work/dnnl/summary.json" && grep -q '"gemm": "tiles:widen"' "$work/widen/summary.json" \
    && ok || fail "summary.json's gemm: $(grep -o '"gemm": "[^"]*"' "$work/dnnl/summary.json" "$work/widen/summary.json")"
  python3 - "$(val_of "$work/dnnl.log")" "$(val_of "$work/widen.log")" <<'PY' && ok || fail "the two bf16 GEMM paths agree"
import sys
a, b = map(float, sys.argv[1:])
sys.exit(0 if abs(a - b) <= 1e-3 * a else 1)
PY
elif grep -q "has no bf16 matmul on this CPU (its ISA is .*use 'tiles' or 'tiles:widen'" "$work/dnnl.log"; then
  ok
  echo "  (this CPU's oneDNN has no bf16 matmul: --gemm tiles:onednn refused, as documented)"
else
  fail "--gemm tiles:onednn: $(tail -2 "$work/dnnl.log")"
fi

expect_error "--precision fp16" "--precision" "$bin" train "${small[@]}" --precision fp16
expect_error "--gemm tiles:amx" "--gemm: backend 'tiles:amx': expected tiles, hybrid, onednn or openblas" \
  "$bin" train "${small[@]}" --gemm tiles:amx
# The old switch is refused, not ignored: its choice would silently not apply.
expect_error "NB_BF16_GEMM=widen" "NB_BF16_GEMM is no longer read" env NB_BF16_GEMM=widen "$bin" train "${small[@]}"
finish
