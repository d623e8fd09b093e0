#!/usr/bin/env bash
# The main job on the bundled default: install, build, prepare the King James Bible into
# data/bible (BPE, 4096 tokens), then train the tiny model with AdamW on a real asynchronous
# PipeDream-2BW pipeline (two stages as two pinned worker threads, two micro-batches per step, no
# flush, one-step weight delay) with error feedback, print the result and write runs/quickstart/{metrics.jsonl,summary.json}
# and the trained model as a Hugging Face folder, runs/quickstart/hf; then print a sample from it.
# Extra arguments go to `nobubble train` (e.g. --delay sync to compare).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
[ -f data/bible/manifest.json ] || ./build/nobubble prepare --out data/bible
./build/nobubble train --data data/bible --model tiny --steps 300 --batch 4 --microbatches 2 --lr 2e-3 --warmup 30 \
  --pipeline 2bw --stages 2 --ef 1 --eval-every 50 --out runs/quickstart --export runs/quickstart/hf "$@"
echo "--- a sample from the trained model:"
./build/nobubble sample --checkpoint runs/quickstart/hf --prompt "And God said" --tokens 40 --seed 1
