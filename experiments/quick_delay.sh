#!/usr/bin/env bash
# A first look at the paper's effect on this machine: `tiny` on the default corpus, 300 steps,
# AdamW and Muon, each synchronous, under PipeDream-2BW's one-step delay, and 2BW with error
# feedback, for SEEDS seeds; prints final validation losses, the gap to sync and EF's recovery
# (async - async_EF) / (async - sync). About 35 s per run on 2 cores.
# Usage: experiments/quick_delay.sh [SEEDS]   (results in runs/quick_delay/)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-2}
bash scripts/build.sh >/dev/null
[ -f data/bible/manifest.json ] || ./build/nobubble prepare --out data/bible --quiet
common=(--data data/bible --model tiny --steps 300 --batch 8 --warmup 30 --eval-every 100 --quiet)
for seed in $(seq 1 "$seeds"); do
  for opt in adamw muon; do
    case $opt in adamw) lr=(--lr 2e-3) ;; muon) lr=(--lr 0.02 --aux-lr 2e-3) ;; esac
    for mode in sync 2bw 2bw+ef; do
      extra=(); case $mode in sync) extra=(--delay sync) ;; 2bw) extra=(--delay 2bw) ;; 2bw+ef) extra=(--delay 2bw --ef 1) ;; esac
      out=runs/quick_delay/$opt-$mode-seed$seed
      # a finished run is kept; an interrupted one (no summary.json) starts afresh (--force)
      [ -f "$out/summary.json" ] || ./build/nobubble train "${common[@]}" --optimizer $opt "${lr[@]}" "${extra[@]}" \
        --seed "$seed" --data-seed "$seed" --out "$out" --force > /dev/null
    done
  done
done
python3 - "$seeds" <<'PY'
import json, statistics, sys
seeds = int(sys.argv[1])
print("| optimizer | sync | 2bw | 2bw + EF | gap (2bw - sync) | gap with EF | EF recovery |")
print("|---|---|---|---|---|---|---|")
for opt in ("adamw", "muon"):
    val = {m: [json.load(open(f"runs/quick_delay/{opt}-{m}-seed{s}/summary.json"))["final_val_loss"] for s in range(1, seeds + 1)]
           for m in ("sync", "2bw", "2bw+ef")}
    mean = {m: statistics.mean(v) for m, v in val.items()}
    sd = {m: statistics.stdev(v) if len(v) > 1 else 0.0 for m, v in val.items()}
    gap, gap_ef = mean["2bw"] - mean["sync"], mean["2bw+ef"] - mean["sync"]
    rec = "%.0f%%" % (100 * (mean["2bw"] - mean["2bw+ef"]) / gap) if gap > 0 else "n/a (no gap)"
    print("| %s | %.4f +- %.4f | %.4f +- %.4f | %.4f +- %.4f | %+.4f | %+.4f | %s |" % (
        opt, mean["sync"], sd["sync"], mean["2bw"], sd["2bw"], mean["2bw+ef"], sd["2bw+ef"], gap, gap_ef, rec))
print("\n(tiny, default corpus, 300 steps of 8 x 128 tokens, final validation loss, mean +- sd over %d seeds)" % seeds)
PY
