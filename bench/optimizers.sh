#!/usr/bin/env bash
# The optimizer's share of a training step (issue 4): `small`, 2 threads, each optimizer, R rounds;
# prints the median step, the median update time (the step's GRADS and APPLY: the gradient's norm and
# clipping, d computed and applied; bench's median_optimizer_s) and its share.
# Usage: bench/optimizers.sh [ROUNDS] [TOKENS_PER_STEP]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
tokens=${2:-2048}
bash scripts/build.sh >/dev/null
out=$(mktemp -d)
for r in $(seq 1 "$rounds"); do
  ./build/nobubble bench --models small --threads 2 --optimizers adamw,sgd,muon,normuon,lion,adan,mars,soap \
    --tokens "$tokens" --steps 5 --json > "$out/$r.json"
done
python3 - "$out" "$tokens" <<'PY'
import glob, json, statistics, sys
rows = {}
for path in sorted(glob.glob(sys.argv[1] + "/*.json")):
    for x in json.load(open(path))["results"]:
        rows.setdefault(x["optimizer"], []).append(x)
print("| optimizer | step (ms) | update (ms) | share of the step |")
print("|---|---|---|---|")
for k, v in rows.items():
    med = lambda key: statistics.median([x[key] for x in v])
    share = statistics.median([x["median_optimizer_s"] / x["median_step_s"] for x in v])
    print("| %s | %.1f | %.1f | %.1f%% |" % (k, med("median_step_s") * 1e3, med("median_optimizer_s") * 1e3, 100 * share))
print("\n(small, 2 threads, %s tokens per step, medians over %d rounds)" % (sys.argv[2], len(glob.glob(sys.argv[1] + "/*.json"))))
PY
rm -rf "$out"
