#!/usr/bin/env bash
# The cost of the delay machinery (issue 5): `small`, 2 threads, AdamW, sync vs 2bw, 2bw + EF and
# fixed:4, R rounds in two orders (a process's first configuration tends to run slow); prints the
# median step, the median of the part the delay touches (the update, GRADS and APPLY: the version
# distance, the optimizer, the apply that keeps w_t and applies EF), and the memory kept beyond the
# weights. Usage: bench/delay.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bash scripts/build.sh >/dev/null
out=$(mktemp -d)
for r in $(seq 1 "$rounds"); do
  ./build/nobubble bench --models small --threads 2 --delays sync,2bw,2bw+ef,fixed:4 --steps 7 --json > "$out/a$r.json"
  ./build/nobubble bench --models small --threads 2 --delays fixed:4,2bw+ef,2bw,sync --steps 7 --json > "$out/b$r.json"
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
rows = {}
for path in sorted(glob.glob(sys.argv[1] + "/*.json")):
    for x in json.load(open(path))["results"]:
        rows.setdefault(x["delay"], []).append(x)
med = lambda v, key: statistics.median([x[key] for x in v])
base, base_opt = med(rows["sync"], "median_step_s"), med(rows["sync"], "median_optimizer_s")
print("| delay | runs | step (ms) | vs sync | update (ms) | its increase, share of the sync step | memory beyond the weights |")
print("|---|---|---|---|---|---|---|")
for k, v in rows.items():
    m, o = med(v, "median_step_s"), med(v, "median_optimizer_s")
    print("| %s | %d | %.1f | %+.1f%% | %.1f | %+.1f ms (%+.2f%%) | %.2f x weights |" % (
        k, len(v), m * 1e3, 100 * (m / base - 1), o * 1e3, (o - base_opt) * 1e3, 100 * (o - base_opt) / base,
        v[0]["delay_bytes"] / v[0]["weight_bytes"]))
PY
rm -rf "$out"
