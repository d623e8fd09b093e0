#!/usr/bin/env bash
# Weights that do not depend on the thread count (docs/executor.md, "Thread counts"): a narrow-batch,
# wide model (64 rows per micro-batch, d_model 512, d_ffn 1536: the shapes where oneDNN's own threading
# splits a product's inner dimension at 8 threads) trained at --threads 1 and --threads 8 ends with
# bitwise the same weights and losses for AdamW and Muon in fp32 and bf16 and NorMuon in fp32 (SOAP, whose
# products run like Muon's, one matrix per thread, is left out for time: it doubled the script's 15 s);
# 600 rows a micro-batch (where OpenBLAS's threaded weight gradients sum otherwise) at --threads 1 and 2;
# a real 2BW pipeline with 8 GEMM threads per stage equals its one-process simulation at 1 thread.
# About 6.5 min under AddressSanitizer on the loaded 2-core machine (ctest's limit: 10).
set -u
bin=${1:?usage: cli_threads.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"

if [ "$(nproc)" -lt 2 ]; then
  echo "skipped: --threads 8 needs 2 cores (at most 4 threads a core)"
  exit 77
fi
small_corpus "$bin" "$work/data" 200 || fail "prepare"  # 200 paragraphs: a 600-token validation batch
wide=(--data "$work/data" --set d_model=512 --set d_ffn=1536 --set n_heads=8 --set n_kv_heads=4 --set context=32
      --batch 2 --steps 2 --eval-batches 1 --quiet)
hash_of() { sed -n 's/.*"weights_hash": "\([0-9a-f]*\)".*/\1/p' "$1/summary.json"; }
losses() { grep -o '"train_loss": [^,]*' "$1/metrics.jsonl"; }
export OMP_WAIT_POLICY=passive  # 8 threads on 2 cores: waiting threads sleep

# same_run WHAT OUT_A OUT_B: both runs' weights and losses are bitwise equal
same_run() {
  [ -n "$(hash_of "$2")" ] && [ "$(hash_of "$2")" = "$(hash_of "$3")" ] && [ "$(losses "$2")" = "$(losses "$3")" ] \
    && ok || fail "$1: weights $(hash_of "$3") and losses differ from $(hash_of "$2")"
}

for opt in adamw muon normuon; do
  for prec in fp32 bf16; do
    [ "$opt" = normuon ] && [ "$prec" = bf16 ] && continue  # Muon's products, covered by muon bf16
    for t in 1 8; do
      "$bin" train "${wide[@]}" --set n_layers=1 --optimizer "$opt" --precision "$prec" \
        --threads "$t" --out "$work/$opt-$prec-$t" > "$work/log" 2>&1 || fail "$opt $prec --threads $t: $(tail -3 "$work/log")"
    done
    same_run "$opt $prec: --threads 8 equals --threads 1" "$work/$opt-$prec-1" "$work/$opt-$prec-8"
  done
done

# 600 rows a micro-batch: the weight gradients' sums (K = 600) are where OpenBLAS's threads sum otherwise.
for t in 1 2; do
  "$bin" train "${wide[@]}" --set n_layers=1 --set context=200 --batch 3 --threads "$t" --out "$work/rows600-$t" \
    > "$work/log" 2>&1 || fail "600 rows, --threads $t: $(tail -3 "$work/log")"
done
same_run "600 rows a micro-batch: --threads 2 equals --threads 1" "$work/rows600-1" "$work/rows600-2"

# A pipeline whose stages have another thread count than the one-process run it simulates.
pipe=(--set n_layers=2 --stages 2 --microbatches 2 --optimizer muon)
"$bin" train "${wide[@]}" "${pipe[@]}" --delay 2bw --threads 1 --out "$work/one" > "$work/log" 2>&1 \
  || fail "one-process 2bw: $(tail -3 "$work/log")"
"$bin" train "${wide[@]}" "${pipe[@]}" --pipeline 2bw --threads-per-stage 8 --out "$work/pipe" > "$work/log" 2>&1 \
  || fail "2bw pipeline: $(tail -3 "$work/log")"
same_run "a 2bw pipeline at 8 threads per stage equals its one-process simulation at 1 thread" "$work/one" "$work/pipe"
finish
