#!/usr/bin/env bash
# The main job on the bundled default: install, build, prepare the King James Bible into
# data/bible (BPE, 4096 tokens), train the tiny model on it, print and write the result
# to runs/quickstart (metrics.jsonl, summary.json). Extra arguments go to `nobubble train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
[ -f data/bible/manifest.json ] || ./build/nobubble prepare --out data/bible
./build/nobubble train --data data/bible --model tiny --steps 300 --batch 8 --lr 2e-3 --warmup 30 \
  --eval-every 50 --out runs/quickstart "$@"
