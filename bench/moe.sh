#!/usr/bin/env bash
# A mixture of experts' training step beside its dense twin and beside PyTorch (issue 39, item 4): for R
# rounds, interleaved so that all see the same machine, `nobubble bench` of each dense preset and its MoE
# preset (tiny and moe-tiny at B 16 x T 128; small and moe-small at B 8 x T 256) in fp32, and
# tools/bench/torch_moe_bench.py (transformers' Mixtral of the same shape, eager and torch.compile), in
# PRECISION: fp32, or bf16 (nobubble's bf16; PyTorch's bf16 autocast on float32 weights, and its fp32
# modes beside them); then the
# medians over the rounds. GFLOP/s count active parameters on both sides; "MoE routing" is the share of
# nobubble's step its MoE layers spend outside their products (bench's moe_routing_share).
#
# Usage: bench/moe.sh [ROUNDS (3)] [THREADS (the online cores)] [PRECISION (fp32)]   (after scripts/build.sh)
# PyTorch and transformers come from $NB_MOE_PYTHON (default /tmp/venv/bin/python), a Python with
# torch >= 2 and transformers >= 4.36; without it only nobubble's rows are measured.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
threads=${2:-$(getconf _NPROCESSORS_ONLN)}
precision=${3:-fp32}
case "$precision" in fp32|bf16) ;; *) echo "bench/moe.sh: PRECISION '$precision': expected fp32 or bf16" >&2; exit 2 ;; esac
# PyTorch's modes: under bf16 its fp32 ones too, so that the table holds its best mode whichever it is
modes=eager-fp32,compile-fp32
[ "$precision" = bf16 ] && modes=$modes,eager-bf16,compile-bf16
py=${NB_MOE_PYTHON:-/tmp/venv/bin/python}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
torch_ok=1
"$py" -c 'import torch, transformers; from transformers import MixtralForCausalLM' 2>/dev/null || torch_ok=0
lscpu | grep -m1 "Model name" | sed 's/^[^:]*: */cpu: /'
echo "flags: $(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "threads: $threads; rounds: $rounds; precision: $precision"
for r in $(seq 1 "$rounds"); do
  for pair in "tiny moe-tiny 16 128" "small moe-small 8 256"; do
    read -r dense moe B T <<< "$pair"
    ./build/nobubble bench --models "$dense,$moe" --threads "$threads" --precisions "$precision" --batch "$B" --seq "$T" \
      --steps 8 --json > "$out/nb_${r}_$moe.json"
    if [ "$torch_ok" = 1 ]; then
      OMP_NUM_THREADS=$threads "$py" -W ignore tools/bench/torch_moe_bench.py --model "$moe" --threads "$threads" \
        --modes "$modes" --batch "$B" --seq "$T" --steps 5 --json > "$out/torch_${r}_$moe.json" 2> "$out/torch_${r}_$moe.log" \
        || { tail -3 "$out/torch_${r}_$moe.log" >&2; }
    fi
  done
done
python3 - "$out" "$rounds" <<'EOF'
import glob, json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for f in glob.glob(out + "/nb_*.json"):
    for r in json.load(open(f))["results"]:
        rows.setdefault(("nobubble", r["model"]), []).append((r["tokens_per_s"], r["gflops"], r.get("outside_gemm_share"),
                                                               r.get("moe_routing_share") if r["model"].startswith("moe") else None))
for f in glob.glob(out + "/torch_*.json"):
    try:
        data = json.load(open(f))
    except ValueError:
        continue
    for r in data["results"]:
        if "error" not in r:
            rows.setdefault(("PyTorch " + r["mode"], r["model"]), []).append((r["tokens_per_s"], r["gflops"], None, None))
print("| model | who | tokens/s: median (rounds) | GFLOP/s (active) | outside GEMMs | MoE routing |")
print("|---|---|---|---|---|---|")
for (who, model), v in sorted(rows.items(), key=lambda kv: (kv[0][1].replace("moe-", ""), kv[0][1], kv[0][0])):
    tps = [x[0] for x in v]
    share = [x[2] for x in v if x[2] is not None]
    routing = [x[3] for x in v if x[3] is not None]
    print("| %s | %s | %.0f (%s) | %.1f | %s | %s |" % (model, who, statistics.median(tps), ", ".join("%.0f" % t for t in tps),
          statistics.median(x[1] for x in v), "%.0f%%" % (100 * statistics.median(share)) if share else "",
          "%.1f%%" % (100 * statistics.median(routing)) if routing else ""))
EOF
