#!/usr/bin/env bash
# experiments/claims.py, RESULTS.md's claims table: on the committed results/ it must equal the table in
# RESULTS.md (so the document cannot drift from its runs); on a hand-made results tree whose answers are
# worked out here by hand it must give those answers: the tuned rate (a tie to the lower rate), paired gaps
# with t(2) = 4.302653 intervals, AdamW minus Muon per seed, Welch's interval between lengths (df 4,
# t = 2.776445), the equivalence tests, error feedback's share only where the plain gap is resolved, a study
# with no runs named as such, and the pre-registered 10,000-step test entering only when all 80 runs are in.
# Bad files are refused naming them. ($1, the nobubble binary, is not used: ctest passes it to every cli test.)
set -u
source "$(dirname "$0")/support/cli_harness.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
claims=$root/experiments/claims.py
command -v python3 > /dev/null || { echo "python3 is missing"; exit 1; }

# ---- the committed results against RESULTS.md
python3 "$claims" --results "$root/results" --check "$root/RESULTS.md" 2> "$work/c.err" && ok \
  || fail "RESULTS.md's claims table is not what results/ gives: $(cat "$work/c.err")"

# ---- a hand-made tree: the scaling study only.
# AdamW 300 steps: sync 5 + s/100 at 2e-3 and at 4e-3 (a tie: 2e-3, the lower, is the pick), 0.1 worse at 1e-3;
# 2BW gaps 0.9, 1.0, 1.1 at 2e-3 (mean 1, sd 0.1, half-width 4.302653 * 0.1 / sqrt(3) = 0.2484) and +5 at
# 4e-3 (which a wrong pick would show); EF halves each gap. Muon 300 steps at 8e-3: gaps 0.03, 0.04, 0.05
# (+0.040 [+0.015, +0.065]), EF leaves 40% of each; Muon 1,000 steps: gaps 0.01, 0.02, 0.03, EF the same.
mkdir -p "$work/res/scaling"
python3 - "$work/res/scaling/results.csv" <<'EOF'
import sys
rows = ["point,steps,optimizer,lr,delay,seed,final_train_loss,final_val_loss,best_val_loss,tokens,seconds,status,exit_status"]
def add(steps, opt, lr, delay, seed, loss, status="done"):
    rows.append(f"{steps}_{opt}_{lr}_{delay}_{seed},{steps},{opt},{lr},{delay},{seed},0,{loss:.6f},{loss:.6f},0,0,{status},0")
for seed in (1, 2, 3):
    base = 5.0 + seed / 100
    add(300, "adamw", "1e-3", "sync", seed, base + 0.1)
    add(300, "adamw", "2e-3", "sync", seed, base)
    add(300, "adamw", "4e-3", "sync", seed, base)
    add(300, "adamw", "2e-3", "2bw", seed, base + [0.9, 1.0, 1.1][seed - 1])
    add(300, "adamw", "4e-3", "2bw", seed, base + 5)
    add(300, "adamw", "2e-3", "2bw+ef", seed, base + [0.9, 1.0, 1.1][seed - 1] / 2)
    add(300, "muon", "8e-3", "sync", seed, base)
    add(300, "muon", "1.6e-2", "sync", seed, base + 0.05)  # worse: 8e-3, the lowest rate run, is an edge pick
    add(300, "muon", "8e-3", "2bw", seed, base + [0.03, 0.04, 0.05][seed - 1])
    add(300, "muon", "8e-3", "2bw+ef", seed, base + [0.03, 0.04, 0.05][seed - 1] * 0.4)
    add(1000, "muon", "8e-3", "sync", seed, base - 1)
    add(1000, "muon", "8e-3", "2bw", seed, base - 1 + [0.01, 0.02, 0.03][seed - 1])
    add(1000, "muon", "8e-3", "2bw+ef", seed, base - 1 + [0.01, 0.02, 0.03][seed - 1])
    add(1000, "muon", "4e-3", "sync", seed, base - 2, status="interrupted")  # unfinished: never the pick
open(sys.argv[1], "w").write("\n".join(rows) + "\n")
EOF
python3 "$claims" --results "$work/res" > "$work/t.md" 2> "$work/t.err" || fail "claims.py on the hand-made tree: $(cat "$work/t.err")"
row() { grep "^| $1" "$work/t.md"; }
row "AdamW degrades under" | grep -q "300 steps (0.31M tokens, 0.22/param): +1.000 \[+0.752, +1.248\] at 2e-3 .*| reproduces at 300 steps |$" \
  && ok || fail "AdamW's gap at the tie's lower rate: $(row 'AdamW degrades under')"
row "AdamW degrades more" | grep -q "300 steps: +0.960 \[+0.736, +1.184\] .*| reproduces at 300 steps |$" && ok \
  || fail "AdamW minus Muon per seed (0.87, 0.96, 1.05): $(row 'AdamW degrades more')"
# Muon 1,000 steps: mean 0.02, se 0.00577; TOST at 0.05: t = -5.196, p = 0.018 (inside); at 0.012: p = 0.85
row "Muon barely" | grep -q "300 steps: +0.040 \[+0.015, +0.065\] at 8e-3 (grid edge) (not shown inside +-0.012, not shown inside +-0.05); 1,000 steps: +0.020 \[-0.005, +0.045\] at 8e-3 (not shown inside +-0.012, inside +-0.05)" && ok \
  || fail "Muon's gap and its equivalence tests: $(row 'Muon barely')"
row "Muon barely" | grep -q "| partly: above the paper's +0.012 (the interval excludes it) at 300 steps; shown inside +-0.05 at 1,000; inside +-0.012 at no length |$" \
  && ok || fail "Muon's verdict: $(row 'Muon barely')"
# Welch: -0.02, se sqrt(2 * 0.0001 / 3) = 0.008165, df 4: half-width 0.02267
row "The gap closes" | grep -q "Muon: 300 -> 1,000 -0.020 \[-0.043, +0.003\]" && ok \
  || fail "Welch's interval between lengths: $(row 'The gap closes')"
row "The gap closes" | grep -q "| not resolved: Muon: not resolved 300 -> 1,000; the 8-seed test at 10,000 steps is running" && ok \
  || fail "the closing verdict: $(row 'The gap closes')"
row "Error feedback recovers 50-70% of Muon" | grep -q "300: 60% \[60%, 60%\]; 1,000: none (plain gap not resolved)" && ok \
  || fail "Muon's EF share (and none at 1,000, where the plain gap is within noise): $(row 'Error feedback recovers 50-70%')"
row "Error feedback recovers 85-90% of AdamW" | grep -q "300: 50% \[50%, 50%\].*below the paper's range at 300;" && ok \
  || fail "AdamW's EF share below 85-90%: $(row 'Error feedback recovers 85-90%')"
row "PipeDream's gap" | grep -q "| no finished runs in results/depth | not measured |$" && ok \
  || fail "a study without runs: $(row "PipeDream's gap")"
row "At the longest length" | grep -q "running; enters here when all 80 runs are in | not measured yet |$" && ok \
  || fail "the 10,000-step test before its runs: $(row 'At the longest length')"

# ---- the 10,000-step test once all 80 runs are in (tests/support/claim_10k_tree.sh): 4e-3 is every
# leave-one-out pick, AdamW's gap 0.10 + e_s, Muon's 0.004 + e_s (sd 0.002, half-width 2.364624 * 0.002 /
# sqrt(8) = 0.00167), AdamW minus Muon 0.096 on every seed. First with one run's whole-split loss missing.
source "$(dirname "$0")/support/claim_10k_tree.sh"
claim_10k_tree "$work/res"
mv "$work/res/claim_10k/runs/8_muon_8e-3_2bw+ef/final_eval.json" "$work/held.json"
python3 "$claims" --results "$work/res" > "$work/u.md" 2>&1 || fail "claims.py with 79 runs: $(cat "$work/u.md")"
grep "^| At the longest length" "$work/u.md" | grep -q "not measured yet" && ok \
  || fail "79 of 80 runs entered the table: $(grep '^| At the longest' "$work/u.md")"
mv "$work/held.json" "$work/res/claim_10k/runs/8_muon_8e-3_2bw+ef/final_eval.json"
python3 "$claims" --results "$work/res" > "$work/u.md" 2>&1 || fail "claims.py with 80 runs: $(cat "$work/u.md")"
grep "^| At the longest length" "$work/u.md" \
  | grep -q "AdamW +0.100 \[+0.098, +0.102\] (not shown inside +-0.012, not shown inside +-0.05; at 4e-3 +0.100 \[+0.098, +0.102\]; at 8e-3 +0.100 \[+0.098, +0.102\]); Muon +0.0040 \[+0.0023, +0.0057\] (inside +-0.012, inside +-0.05;.*AdamW minus Muon per seed +0.096 \[+0.096, +0.096\] .*| AdamW: a resolved gap; Muon: a resolved gap; AdamW degrades more |$" \
  && ok || fail "the 10,000-step row: $(grep '^| At the longest' "$work/u.md")"
grep "^| The gap closes" "$work/u.md" | grep -q "the 8-seed test at 10,000 steps is in (its own row)" && ok \
  || fail "the closing row does not point to the test: $(grep '^| The gap closes' "$work/u.md")"

# ---- the MoE study's row, once a length has every seed (whole-split losses, final_eval.json): synchronous
# runs at 2e-3 .. 1.6e-2 with 4e-3 best (inside the grid); gaps at 4e-3: AdamW dense 0.10, 0.11, 0.12 and MoE
# 0.20, 0.21, 0.22 (MoE minus dense 0.10 on every seed: resolved); Muon dense 0.03, 0.04, 0.05 and MoE 0.03,
# 0.05, 0.04 (differences 0, +0.01, -0.01: mean 0, half-width 4.302653 * 0.01 / sqrt(3) = 0.0248); Muon MoE
# with EF 0.001, 0.002, 0.003 (within noise; TOST at 0.012: t = -17.3, inside).
python3 - "$work/res/moe/runs" <<'EOF2'
import json, os, sys
def put(length, seed, model, opt, lr, delay, loss):
    d = os.path.join(sys.argv[1], f"{length}_{seed}_{model}_{opt}_{lr}_{delay}")
    os.makedirs(d, exist_ok=True)
    json.dump({"val_loss": loss}, open(os.path.join(d, "final_eval.json"), "w"))
gaps = {("tiny", "adamw"): ([0.10, 0.11, 0.12], [0.05] * 3), ("moe-tiny", "adamw"): ([0.20, 0.21, 0.22], [0.1] * 3),
        ("tiny", "muon"): ([0.03, 0.04, 0.05], [0.01] * 3), ("moe-tiny", "muon"): ([0.03, 0.05, 0.04], [0.001, 0.002, 0.003])}
for (model, opt), (g, ef) in gaps.items():
    for seed in (1, 2, 3):
        for lr, extra in (("2e-3", 0.2), ("4e-3", 0.0), ("8e-3", 0.1), ("1.6e-2", 0.3)):
            put(1000, seed, model, opt, lr, "sync", 4.0 + seed / 100 + extra)
        put(1000, seed, model, opt, "4e-3", "2bw", 4.0 + seed / 100 + g[seed - 1])
        if (model, opt, seed) != ("tiny", "muon", 3):
            put(1000, seed, model, opt, "4e-3", "2bw+ef", 4.0 + seed / 100 + ef[seed - 1])
EOF2
python3 "$claims" --results "$work/res" > "$work/v.md" 2>&1 || fail "claims.py with MoE runs: $(cat "$work/v.md")"
grep "^| A mixture of experts" "$work/v.md" | grep -q "running; a length enters here when all its seeds are in | not measured yet |$" \
  && ok || fail "a MoE length with one run missing entered the table: $(grep '^| A mixture' "$work/v.md")"
mkdir -p "$work/res/moe/runs/1000_3_tiny_muon_4e-3_2bw+ef"
printf '{"val_loss": 4.04}\n' > "$work/res/moe/runs/1000_3_tiny_muon_4e-3_2bw+ef/final_eval.json"
python3 "$claims" --results "$work/res" > "$work/v.md" 2>&1 || fail "claims.py with MoE runs: $(cat "$work/v.md")"
grep "^| A mixture of experts" "$work/v.md" | grep -q "1,000 steps, AdamW: MoE +0.210 \[+0.185, +0.235\] at 4e-3, with EF +0.100 \[+0.100, +0.100\]; dense +0.110 \[+0.085, +0.135\] at 4e-3; MoE minus dense per seed +0.100 \[+0.100, +0.100\]" \
  && ok || fail "the MoE row's AdamW cell: $(grep '^| A mixture' "$work/v.md")"
grep "^| A mixture of experts" "$work/v.md" | grep -q "MoE minus dense per seed +0.0000 \[-0.0248, +0.0248\] .*| AdamW at 1,000 steps: the delay hurts MoE more; MoE with EF resolved; Muon at 1,000 steps: the delay not told apart on MoE and dense; MoE with EF within noise (inside +-0.012);" \
  && ok || fail "the MoE row's Muon cell and verdicts: $(grep '^| A mixture' "$work/v.md")"

# ---- the size axis (experiments/size_axis's rule 4, on the whole-split losses of final_eval.json): AdamW's
# pick is 4e-3 at both sizes (every other rate of the plan's four 0.1 worse), gaps tiny 0.10, 0.11, 0.12 and
# small 0.03, 0.04, 0.05: small less tiny -0.07, Welch se sqrt(2 * 0.0001 / 3) = 0.008165, df 4, half-width
# 0.02267: [-0.093, -0.047], below 0; Muon (4e-3 at both) has delayed runs at `tiny` only. Decoys that a
# wrong reading would count: results.csv's 8-batch losses (not read), an fp32 2BW run 5 worse, and seeds 4-6
# at tiny AdamW 2e-3 1.0 better than the pick (the picks use seeds 1-3 alone).
python3 - "$work/res/size_axis" <<'EOF2'
import json, os, sys
root = sys.argv[1]
def add(size, opt, lr, delay, seed, loss, prec="bf16"):
    d = os.path.join(root, "runs", f"{size}_{opt}_{lr}_{delay}_{prec}_{seed}")
    os.makedirs(d, exist_ok=True)
    json.dump({"val_loss": loss}, open(os.path.join(d, "final_eval.json"), "w"))
PLAN = {"tiny": ["2e-3", "4e-3", "8e-3", "1.6e-2"], "small": ["1e-3", "2e-3", "4e-3", "8e-3"]}
for seed in (1, 2, 3):
    for size, gaps in (("tiny", [0.10, 0.11, 0.12]), ("small", [0.03, 0.04, 0.05])):
        base = 4.0 + seed / 100 - (0.5 if size == "small" else 0)
        for opt in ("adamw", "muon"):
            for lr in (PLAN[size] if opt == "adamw" else ["2e-3", "4e-3", "8e-3", "1.6e-2"]):
                add(size, opt, lr, "sync", seed, base + (0 if lr == "4e-3" else 0.1))
        add(size, "adamw", "4e-3", "2bw", seed, base + gaps[seed - 1])
        add(size, "adamw", "4e-3", "2bw+ef", seed, base + gaps[seed - 1] / 2)
    add("tiny", "muon", "4e-3", "2bw", seed, 4.0 + seed / 100 + 0.02)
    add("tiny", "adamw", "4e-3", "2bw", seed, 9.0, "fp32")
    add("tiny", "adamw", "2e-3", "sync", seed + 3, 3.0)
open(os.path.join(root, "results.csv"), "w").write(
    "point,size,optimizer,lr,delay,precision,seed,final_train_loss,final_val_loss,best_val_loss,tokens,seconds,status,exit_status\n"
    "tiny_adamw_4e-3_2bw_bf16_1,tiny,adamw,4e-3,2bw,bf16,1,0,1.0,1.0,0,0,done,0\n")
EOF2
python3 "$claims" --results "$work/res" > "$work/z.md" 2>&1 || fail "claims.py with the size axis: $(cat "$work/z.md")"
grep "^| The gap is smaller for a larger model" "$work/z.md" \
  | grep -q "AdamW: \`tiny\` (1.38M) +0.110 \[+0.085, +0.135\] at 4e-3; \`small\` (6.16M) +0.040 \[+0.015, +0.065\] at 4e-3; \`small\` less \`tiny\` -0.070 \[-0.093, -0.047\] (Welch); Muon: \`tiny\` (1.38M) +0.020 \[+0.020, +0.020\] at 4e-3 .*| AdamW: smaller for the larger model |$" \
  && ok || fail "the size axis's row: $(grep '^| The gap is smaller' "$work/z.md")"

# while the size axis runs and no size has its delayed runs, the model-size row counts its finished runs
progress() {
  python3 - "$claims" "$1" <<'EOF3'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("claims", sys.argv[1]); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
print(m.Claims(sys.argv[2]).size_axis_progress())
EOF3
}
mkdir -p "$work/res2/size_axis/runs/a" "$work/res2/size_axis/runs/b" "$work/res2/size_axis/runs/c"
check "no size-axis runs: has not run" test "$(progress "$work/res2")" = "has not run"
echo '{"val_loss": 4}' > "$work/res2/size_axis/runs/a/final_eval.json"; echo '{"val_loss": 4}' > "$work/res2/size_axis/runs/b/final_eval.json"
check "two finished runs (a third without final_eval.json)" test "$(progress "$work/res2")" = "is running (2 runs in, no size tuned and delayed yet)"

# ---- --check and --write, and bad files
printf 'intro\n\n' > "$work/R.md"; cat "$work/t.md" >> "$work/R.md"; printf '\nafter\n' >> "$work/R.md"
python3 "$claims" --results "$work/res" --check "$work/R.md" 2> "$work/k.err" && fail "a stale table passed --check" \
  || { grep -q "R.md.*: differs from what .*res/ gives; run python3 experiments/claims.py --write" "$work/k.err" \
         && ok || fail "a stale table's message: $(cat "$work/k.err")"; }
python3 "$claims" --results "$work/res" --write "$work/R.md" && python3 "$claims" --results "$work/res" --check "$work/R.md" \
  && head -1 "$work/R.md" | grep -q "^intro$" && tail -1 "$work/R.md" | grep -q "^after$" && ok \
  || fail "--write then --check, keeping the text around the table: $(head -3 "$work/R.md")"
test -s "$work/docs/figures/gap_vs_tokens.svg" && grep -c "<circle" "$work/docs/figures/gap_vs_tokens.svg" | grep -qx 6 && ok \
  || fail "--write draws the figure beside the file, 6 points (AdamW at 300 steps, Muon at 300 and 1,000, each 2BW and EF): $(grep -c "<circle" "$work/docs/figures/gap_vs_tokens.svg")"
grep -c "<circle" "$work/docs/figures/gap_vs_size.svg" | grep -qx 5 && ok \
  || fail "--write draws the size figure, 5 points (AdamW at two sizes, 2BW and EF; Muon's 2BW at one)"
sed -i 's/<circle/<circle data-x="1"/' "$work/docs/figures/gap_vs_tokens.svg"
python3 "$claims" --results "$work/res" --check "$work/R.md" 2> "$work/f.err" && fail "a stale figure passed --check" \
  || { grep -q "gap_vs_tokens.svg: differs from what" "$work/f.err" && ok || fail "a stale figure's message: $(cat "$work/f.err")"; }
printf 'no table here\n' > "$work/none.md"
python3 "$claims" --results "$work/res" --check "$work/none.md" 2> "$work/n.err" && fail "a file without the markers passed" \
  || { grep -q "none.md: no claims table (expected the markers" "$work/n.err" && ok || fail "no markers: $(cat "$work/n.err")"; }
python3 "$claims" --results "$work/res" --check "$work/missing.md" 2> "$work/m.err" && fail "a missing file passed" \
  || { grep -q "missing.md: No such file" "$work/m.err" && ok || fail "a missing file: $(cat "$work/m.err")"; }
finish
