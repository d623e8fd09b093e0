#!/usr/bin/env bash
# Old against new on the same machine, alternating: `nobubble bench` (the trainer's own step on random
# tokens) of two binaries, REPEATS rounds of (new, old), each cell the median of its rounds; the
# weights' hashes after the timed steps must agree (a refactoring that changes no bit).
#
# usage: bench/old_new_bench.sh OLD_BINARY NEW_BINARY [REPEATS (5)] [nobubble bench flags...]
#   e.g. git worktree add /tmp/old REV && (cd /tmp/old && scripts/build.sh) &&
#        bench/old_new_bench.sh /tmp/old/build/nobubble build/nobubble 5 --models tiny,moe-tiny --threads 1,2 \
#          --precisions fp32,bf16 --steps 30
set -euo pipefail
old=$1 new=$2 reps=${3:-5}
shift $(( $# < 3 ? $# : 3 ))
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for ((r = 1; r <= reps; r++)); do
  "$new" bench "$@" --json > "$tmp/new.$r.json"
  "$old" bench "$@" --json > "$tmp/old.$r.json"
done
lscpu | grep -E '^Model name' | sed 's/^Model name: */CPU: /'
echo "flags: $(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
python3 - "$tmp" "$reps" <<'PY'
import json, statistics, sys
tmp, reps = sys.argv[1], int(sys.argv[2])
cells = {}
for who in ("old", "new"):
    for r in range(1, reps + 1):
        for x in json.load(open(f"{tmp}/{who}.{r}.json"))["results"]:
            key = (x["model"], x["threads"], x["precision"])
            cells.setdefault(key, {}).setdefault(who, []).append(x)
print("| model | threads | precision | old tokens/s: median (rounds) | new tokens/s: median (rounds) | new / old "
      "| MoE routing share, old / new | weights equal |")
print("|---|---|---|---|---|---|---|---|")
bad = 0
for key in sorted(cells):
    o, n = cells[key]["old"], cells[key]["new"]
    tps = lambda runs: [x["tokens_per_s"] for x in runs]
    cell = lambda v: "%.0f (%s)" % (statistics.median(v), ", ".join("%.0f" % t for t in v))
    share = lambda runs: statistics.median(x.get("moe_routing_share", 0) for x in runs)
    same = len({x["weights_hash"] for x in o + n}) == 1
    bad += not same
    print("| %s | %d | %s | %s | %s | %.3f | %.1f%% / %.1f%% | %s |" % (*key, cell(tps(o)), cell(tps(n)),
          statistics.median(tps(n)) / statistics.median(tps(o)), 100 * share(o), 100 * share(n),
          "yes" if same else "NO"))
sys.exit(1 if bad else 0)
PY
