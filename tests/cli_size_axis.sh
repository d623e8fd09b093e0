#!/usr/bin/env bash
# experiments/size_axis/tune.py and analyze.py, the size axis's decision rules (README.md there, Amendment 1),
# on hand-made results trees whose answers are worked out here by hand. Synchronous losses: base + d^2 / 100
# with d = log2(rate / best), base = 4 + seed / 100 (`small`: 3.5 + seed / 100); the bests: tiny AdamW 2e-3
# (the plan's low edge: 1e-3 must run first), tiny Muon 4e-3, small AdamW 4e-3, small Muon 8e-3.
# Gaps at the picks, per seed 1-3:
# - AdamW: tiny 0.10, 0.11, 0.12 and small 0.03, 0.04, 0.05 (sd 0.01 each): small less tiny -0.07, Welch
#   se = sqrt(2 x 0.0001 / 3) = 0.0081650, df 4, t = 2.776445, half-width 0.022669: [-0.0927, -0.0473],
#   decided, no seeds added; EF halves every gap: share 50%.
# - Muon: tiny 0.048, 0.060, 0.072 and small 0.028, 0.040, 0.052 (sd 0.012 each): -0.02, half-width
#   2.776445 x 0.012 x sqrt(2/3) = 0.027203: [-0.0472, +0.0072] covers 0 and 0.0272 < 2 x 0.02, so rule 4
#   adds seeds 4-6 at both sizes. With seeds 4-6 repeating 1-3's gaps: sd sqrt(4 x 0.000144 / 5) =
#   0.010733, se sqrt(2 x 0.0001152 / 6) = 0.0061968, df 10, t = 2.228139, half-width 0.013807:
#   [-0.0338, -0.0062], "smaller for the larger model".
# - Rule 5: small Muon in fp32, gaps 0.03, 0.04, 0.05 (sd 0.01) against bf16's (sd 0.012): fp32 less bf16 0,
#   Welch se sqrt(0.000144 / 3 + 0.0001 / 3) = 0.0090185, df 3.874, t 2.81: about +-0.0254; bf16 stands for fp32.
# - Rule 3's addition (a pick's own gap near deciding gets seeds 4-6) on a second tree, below.
# - Machines: one point started on a Xeon and finished on an EPYC is named by both; the rest by the EPYC.
# ($1, the nobubble binary, is not used: ctest passes it to every cli test.)
set -u
source "$(dirname "$0")/support/cli_harness.sh"
here=$(dirname "$0")/../experiments/size_axis
command -v python3 > /dev/null || { echo "python3 is missing"; exit 1; }
runs=$work/res/size_axis
tune() { python3 "$here/tune.py" "$@" --runs "$runs"; }

# make WHAT...: writes final_eval.json files (python below): sync SIZE OPT LADDER-RATES SEEDS | delayed ...
make() {
  python3 - "$runs" "$@" <<'EOF'
import json, math, os, sys
runs, what = sys.argv[1], sys.argv[2:]
BEST = {("tiny", "adamw"): 2e-3, ("tiny", "muon"): 4e-3, ("small", "adamw"): 4e-3, ("small", "muon"): 8e-3}
GAPS = {("tiny", "adamw"): [0.10, 0.11, 0.12], ("small", "adamw"): [0.03, 0.04, 0.05],
        ("tiny", "muon"): [0.048, 0.060, 0.072], ("small", "muon"): [0.028, 0.040, 0.052]}
def put(size, opt, lr, delay, prec, seed, loss):
    d = os.path.join(runs, "runs", f"{size}_{opt}_{lr}_{delay}_{prec}_{seed}")
    os.makedirs(d, exist_ok=True)
    json.dump({"point": os.path.basename(d), "val_loss": loss}, open(os.path.join(d, "final_eval.json"), "w"))
def base(size, seed):
    return (4.0 if size == "tiny" else 3.5) + seed / 100
kind, size, opt, rates, seeds = what[0], what[1], what[2], what[3].split(","), [int(s) for s in what[4].split(",")]
for lr in rates:
    for s in seeds:
        b = base(size, s) + math.log2(float(lr) / BEST[(size, opt)]) ** 2 / 100
        if kind == "sync":
            put(size, opt, lr, "sync", "bf16", s, b)
        elif kind == "delayed":
            g = GAPS[(size, opt)][(s - 1) % 3]
            put(size, opt, lr, "2bw", "bf16", s, b + g)
            put(size, opt, lr, "2bw+ef", "bf16", s, b + g / 2)
        elif kind == "fp32":
            put(size, opt, lr, "sync", "fp32", s, b)
            put(size, opt, lr, "2bw", "fp32", s, b + [0.03, 0.04, 0.05][s - 1])
EOF
}
has() { grep -qx -- "$1" "$work/g.txt"; }

# ---- phase tiny: nothing run yet
tune tiny > "$work/g.txt" || fail "tune.py tiny on an empty tree"
check "phase tiny holds small back" has "skip size=small"
check "phase tiny holds fp32 back" has "skip precision=fp32"
check "phase tiny holds seeds 4-6 back" has "skip size=small optimizer=muon seed=4,5,6"
check "the plan's rates for tiny" has "skip size=tiny optimizer=adamw lr=5e-4,1e-3,3.2e-2,6.4e-2"
check "no delays before a pick" has "skip size=tiny optimizer=adamw lr=2e-3,4e-3,8e-3,1.6e-2 delay=2bw,2bw+ef"
check "the grid file comes first" grep -q "^axis precision" "$work/g.txt"
# ---- tiny's synchronous runs: AdamW's best is the low edge (2e-3), Muon's inside (4e-3)
make sync tiny adamw 2e-3,4e-3,8e-3,1.6e-2 1,2,3
make sync tiny muon 2e-3,4e-3,8e-3,1.6e-2 1,2,3
tune tiny > "$work/g.txt"
check "an edge best extends the grid down (1e-3 runs)" has "skip size=tiny optimizer=adamw lr=5e-4,3.2e-2,6.4e-2"
check "and holds its delays back" has "skip size=tiny optimizer=adamw lr=1e-3,2e-3,4e-3,8e-3,1.6e-2 delay=2bw,2bw+ef"
check "an inside best runs the delays at it alone" has "skip size=tiny optimizer=muon lr=2e-3,8e-3,1.6e-2 delay=2bw,2bw+ef"
tune tiny --check > /dev/null 2>&1
[ $? -eq 3 ] && ok || fail "--check: expected exit 3 while tiny AdamW has no pick"
make sync tiny adamw 1e-3 1,2,3
tune tiny --check > "$work/g.txt" && ok || fail "--check once tiny is tuned"
check "measured, 2e-3 is tiny AdamW's pick" has "skip size=tiny optimizer=adamw lr=1e-3,4e-3,8e-3,1.6e-2 delay=2bw,2bw+ef"
tune small --check > /dev/null 2>&1
[ $? -eq 3 ] && ok || fail "--check in phase small: expected exit 3 while small has no pick"
tune small > "$work/g.txt"
check "phase small runs small" test "$(grep -c '^skip size=small$' "$work/g.txt")" = 0
check "small AdamW's plan: 1e-3 to 8e-3" has "skip size=small optimizer=adamw lr=5e-4,1.6e-2,3.2e-2,6.4e-2"
# ---- small tuned; the delayed runs of both sizes
make sync small adamw 1e-3,2e-3,4e-3,8e-3 1,2,3
make sync small muon 2e-3,4e-3,8e-3,1.6e-2 1,2,3
tune fp32 > "$work/g.txt"
check "phase fp32: small Muon's pick alone in fp32" has "skip precision=fp32 lr=5e-4,1e-3,2e-3,4e-3,1.6e-2,3.2e-2,6.4e-2"
check "phase fp32: no fp32 for tiny" has "skip precision=fp32 size=tiny"
check "phase fp32: no fp32 EF" has "skip precision=fp32 delay=2bw+ef"
check "phase fp32 no longer skips fp32 whole" test "$(grep -c '^skip precision=fp32$' "$work/g.txt")" = 0
make delayed tiny adamw 2e-3 1,2,3; make delayed tiny muon 4e-3 1,2,3
make delayed small adamw 4e-3 1,2,3; make delayed small muon 8e-3 1,2,3
tune seeds > "$work/g.txt"
check "rule 4 adds seeds 4-6 for Muon at tiny's pick" has "skip size=tiny optimizer=muon lr=5e-4,1e-3,2e-3,8e-3,1.6e-2,3.2e-2,6.4e-2 seed=4,5,6"
check "and at small's" has "skip size=small optimizer=muon lr=5e-4,1e-3,2e-3,4e-3,1.6e-2,3.2e-2,6.4e-2 seed=4,5,6"
check "rule 4 adds none for AdamW (decided)" has "skip size=small optimizer=adamw seed=4,5,6"
check "nor does rule 3 (every gap resolved)" has "skip size=tiny optimizer=adamw seed=4,5,6"
check "no blanket skip of Muon's seeds 4-6" test "$(grep -c '^skip size=[a-z]* optimizer=muon seed=4,5,6$' "$work/g.txt")" = 0
python3 - "$runs/rates.json" <<'EOF' && ok || fail "rates.json: $(cat "$runs/rates.json")"
import json, sys
r = json.load(open(sys.argv[1]))
m, a = r["rule4"]["muon"], r["rule4"]["adamw"]
assert r["tiny"]["adamw"]["chosen"] == "2e-3" and r["small"]["muon"]["chosen"] == "8e-3", r
assert abs(m["low"] - (-0.047203)) < 5e-5 and abs(m["high"] - 0.007203) < 5e-5 and m["adds_seeds"], m
assert abs(a["low"] - (-0.092669)) < 5e-5 and not a["adds_seeds"], a
assert r["fp32_check"] == {"rate": "8e-3", "runs": True}, r["fp32_check"]
assert not any(r["rule3"][z][o]["adds_seeds"] for z in ("tiny", "small") for o in ("adamw", "muon")), r["rule3"]
EOF

# ---- rule 3's seeds (Amendment 1), alone on another tree. tiny AdamW's gaps 0.02, 0.04, 0.06 (mean 0.04,
# sd 0.02): half-width 4.302653 x 0.02 / sqrt(3) = 0.0497 covers 0 and is less than 2 x 0.04: near deciding.
# tiny Muon's 0.00, 0.03, 0.06 (sd 0.03): 0.0745 covers 0 but is more than 2 x 0.03: not near.
near=$work/near/size_axis
mkdir -p "$near"
python3 - "$near" <<'EOF'
import json, math, os, sys
root = sys.argv[1]
def put(name, loss):
    os.makedirs(os.path.join(root, "runs", name), exist_ok=True)
    json.dump({"val_loss": loss}, open(os.path.join(root, "runs", name, "final_eval.json"), "w"))
for s in (1, 2, 3):
    for lr in ("2e-3", "4e-3", "8e-3", "1.6e-2"):
        b = 4 + s / 100 + math.log2(float(lr) / 4e-3) ** 2 / 100
        put(f"tiny_adamw_{lr}_sync_bf16_{s}", b)
        put(f"tiny_muon_{lr}_sync_bf16_{s}", b)
    put(f"tiny_adamw_4e-3_2bw_bf16_{s}", 4 + s / 100 + [0.02, 0.04, 0.06][s - 1])
    put(f"tiny_muon_4e-3_2bw_bf16_{s}", 4 + s / 100 + [0.00, 0.03, 0.06][s - 1])
EOF
python3 "$here/tune.py" seeds --runs "$near" > "$work/n.txt" || fail "tune.py seeds on the rule-3 tree"
check "rule 3: a gap near deciding gets seeds 4-6 at its pick" \
  grep -qx "skip size=tiny optimizer=adamw lr=5e-4,1e-3,2e-3,8e-3,1.6e-2,3.2e-2,6.4e-2 seed=4,5,6" "$work/n.txt"
check "rule 3: a gap far from deciding gets none" grep -qx "skip size=tiny optimizer=muon seed=4,5,6" "$work/n.txt"
check "rule 3: a size without a pick gets none" grep -qx "skip size=small optimizer=adamw seed=4,5,6" "$work/n.txt"
python3 "$here/analyze.py" --results "$work/near" --partial > "$work/n.md" 2>&1 || fail "analyze.py on the rule-3 tree: $(cat "$work/n.md")"
check "analyze.py: rule 3 near deciding, added" grep -q "^| tiny | 1,377,408 | adamw | 4e-3 | 3 | +0.0400 \[-0.0097, +0.0897\] (within noise) | pending | none (2BW gap not resolved and positive) | \[-0.0097, +0.0897\]: near deciding: added |$" "$work/n.md"
python3 "$here/analyze.py" --results "$work/near" > /dev/null 2> "$work/n.err"
grep -q "tiny adamw's seeds 4-6 (rule 3)" "$work/n.err" && ok || fail "without --partial, rule 3's pending seeds named: $(cat "$work/n.err")"

# ---- the analysis
python3 "$here/analyze.py" --results "$work/res" > /dev/null 2> "$work/a.err" && fail "analyze.py without --partial while seeds 4-6 and fp32 run" \
  || { grep -q "incomplete (.*muon's seeds 4-6.*rule 5's fp32 runs)" "$work/a.err" && ok || fail "the refusal: $(cat "$work/a.err")"; }
python3 "$here/analyze.py" --results "$work/res" --partial > "$work/a.md" 2> "$work/a.err" || fail "analyze.py --partial: $(cat "$work/a.err")"
check "tiny AdamW's gap, EF's gap and share, rule 3" grep -q "^| tiny | 1,377,408 | adamw | 2e-3 | 3 | +0.1100 \[+0.0852, +0.1348\] (resolved) | +0.0550 \[+0.0426, +0.0674\] (resolved) | 50% \[50%, 50%\] | \[+0.0852, +0.1348\]: none |$" "$work/a.md"
check "AdamW between sizes: smaller for the larger model" grep -q "^| adamw | 3, 3 | -0.0700 \[-0.0927, -0.0473\] | 0.36 | smaller for the larger model | \[-0.0927, -0.0473\]: no seeds added |$" "$work/a.md"
check "Muon pending its seeds 4-6" grep -q "^| muon | 3, 3 | -0.0200 \[-0.0472, +0.0072\] | 0.67 | pending (seeds 4-6 are running) | \[-0.0472, +0.0072\]: within 2x of deciding: seeds 4-6 added |$" "$work/a.md"
make delayed tiny muon 4e-3 4,5,6; make sync tiny muon 4e-3 4,5,6
make delayed small muon 8e-3 4,5,6; make sync small muon 8e-3 4,5,6
make fp32 small muon 8e-3 1,2,3
printf '100 start Intel Xeon | amx_bf16 avx512f  | binary aa\n300 start AMD EPYC | avx2 avx512_bf16 avx512f  | binary bb\n' > "$runs/machines.log"
printf '150 start tiny_muon_4e-3_sync_bf16_1\n310 resume tiny_muon_4e-3_sync_bf16_1\n320 done tiny_muon_4e-3_sync_bf16_1 9.0s\n330 start tiny_muon_4e-3_2bw_bf16_1\n340 done tiny_muon_4e-3_2bw_bf16_1 9.0s\n350 start tiny_muon_4e-3_2bw_bf16_9\n' > "$runs/sweep.log"
python3 "$here/analyze.py" --results "$work/res" > "$work/b.md" 2> "$work/b.err" || fail "analyze.py complete: $(cat "$work/b.err")"
check "Muon on 6 seeds: smaller for the larger model" grep -q "^| muon | 6, 6 | -0.0200 \[-0.0338, -0.0062\] | 0.67 | smaller for the larger model |" "$work/b.md"
check "the rule-4 decision stays on seeds 1-3" grep -q "| \[-0.0472, +0.0072\]: within 2x of deciding: seeds 4-6 added |$" "$work/b.md"
check "the pick's tuning on seeds 1-3 (small Muon 8e-3 mean 3.52)" grep -q "^| small | muon | 2e-3, 4e-3, 8e-3, 1.6e-2 | .*8e-3: 3.5200.* | 8e-3 |$" "$work/b.md"
check "rule 5: bf16 stands for fp32" grep -q "^| fp32 | +0.0400 \[+0.0152, +0.0648\] (resolved) | +0.0000 \[-0.025[34], +0.025[34]\] | bf16 stands for fp32" "$work/b.md"
check "a point resumed on another machine names both" grep -q "^| Intel Xeon (amx_bf16 avx512f) then AMD EPYC (avx2 avx512_bf16 avx512f) | 1 |$" "$work/b.md"
check "the other points by their one machine" grep -q "^| AMD EPYC (avx2 avx512_bf16 avx512f) | 1 |$" "$work/b.md"
tune seeds --check > /dev/null && ok || fail "--check once every rule has run"
finish
