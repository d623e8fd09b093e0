#!/usr/bin/env bash
# The engine's benchmark, as quoted in BENCHMARKS.md: for R rounds, per thread count, time
# `nobubble bench` with each GEMM backend and the same model in PyTorch (Debian's python3-torch
# on OpenBLAS, tools/bench/torch_step.py), interleaved so that both see the same machine; then
# print medians over the rounds and the ratios. Usage: bench/compare.sh [ROUNDS] [MODELS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
models=${2:-tiny,small,medium}
bash scripts/build.sh >/dev/null
if ! dpkg-query -W -f='${Status}' python3-torch libopenblas0-pthread 2>/dev/null | grep -q "installed.*installed"; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch libopenblas0-pthread >/dev/null
fi
out=$(mktemp -d)
for r in $(seq 1 "$rounds"); do
  for t in 1 2; do
    for g in onednn hybrid tiles openblas; do
      NB_GEMM=$g ./build/nobubble bench --models "$models" --threads "$t" --steps 5 --json > "$out/nb_${g}_${r}_${t}.json"
    done
    OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread \
      /usr/bin/python3 tools/bench/torch_step.py --models "$models" --threads "$t" --steps 5 --json \
      > "$out/torch_${r}_${t}.json" 2>/dev/null
  done
done
/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
rows = {}
for path in glob.glob(os.path.join(out, "*.json")):
    name = os.path.basename(path)[:-5].split("_")
    impl = "torch" if name[0] == "torch" else "nobubble-" + name[1]
    for r in json.load(open(path))["results"]:
        rows.setdefault((r["model"], r["threads"]), {}).setdefault(impl, []).append(r)
med = lambda xs: statistics.median(xs)
print("| model | threads | implementation | median step (s) | tokens/s | GFLOP/s | of measured peak | x PyTorch |")
print("|---|---|---|---|---|---|---|---|")
for (model, threads) in sorted(rows, key=lambda k: (["tiny", "small", "medium", "smollm-135m", "smollm-360m"].index(k[0]), k[1])):
    impls = rows[(model, threads)]
    torch_tps = med([x["tokens_per_s"] for x in impls.get("torch", [])]) if "torch" in impls else None
    for impl in ["nobubble-onednn", "nobubble-hybrid", "nobubble-tiles", "nobubble-openblas", "torch"]:
        if impl not in impls: continue
        xs = impls[impl]
        tps = med([x["tokens_per_s"] for x in xs])
        peak = "%.0f%% of %.0f" % (100 * med([x["fraction_of_peak"] for x in xs]), med([x["peak_gflops"] for x in xs])) if "peak_gflops" in xs[0] else ""
        ratio = "%.2f" % (tps / torch_tps) if torch_tps and impl != "torch" else ""
        print("| %s | %d | %s | %.3f | %.0f | %.1f | %s | %s |" % (model, threads, impl, med([x["median_step_s"] for x in xs]), tps,
              med([x["gflops"] for x in xs]), peak, ratio))
print("\n(%d rounds; medians over rounds of each round's median step)" % len(glob.glob(os.path.join(out, "torch_*_1.json"))))
PY
rm -rf "$out"
