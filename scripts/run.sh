#!/usr/bin/env bash
# The main job on the bundled default: install, build, prepare the King James Bible into
# data/bible (BPE, 4096 tokens), then run experiments/quickstart: the tiny model trained with AdamW
# and with Muon on a real two-stage pipeline (two pinned worker threads, 4 micro-batches per step)
# as synchronous 1F1B, as asynchronous PipeDream-2BW (no flush, one-step weight delay) and as 2BW
# with error feedback; write runs/quickstart/{results.csv,report.html} (each run's metrics.jsonl,
# summary.json and Hugging Face folder under runs/quickstart/runs/), print each run's losses and,
# per optimizer, the gap to 1F1B with and without error feedback; then print a sample from the
# Muon 2BW + EF model. Extra arguments go to `nobubble sweep` (e.g. --jobs 2).
# Re-running skips the runs already done (delete runs/quickstart to start over).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
[ -f data/bible/manifest.json ] || ./build/nobubble prepare --out data/bible
./build/nobubble sweep experiments/quickstart/grid.txt --out runs/quickstart "$@"
./build/nobubble report runs/quickstart
echo "--- runs (runs/quickstart/results.csv; the report: runs/quickstart/report.html):"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; printf "%-14s %12s %12s %12s %10s\n", "run", "final train", "final val", "best val", "seconds"; next }
         { printf "%-14s %12.4f %12.4f %12.4f %10.1f\n", $col["point"], $col["final_train_loss"], $col["final_val_loss"], $col["best_val_loss"], $col["seconds"] }' \
  runs/quickstart/results.csv
echo "--- the one-step delay's cost: final validation loss, gap to 1F1B (one seed; RESULTS.md has 3-seed tables):"
awk -F, -f scripts/gap_summary.awk runs/quickstart/results.csv
echo "--- a sample from the Muon 2BW + EF model:"
./build/nobubble sample --checkpoint runs/quickstart/runs/muon_2bw+ef/hf --prompt "And God said" --tokens 40 --seed 1
