#!/usr/bin/env bash
# nobubble report's tuning and scaling sections (docs/experiments.md, "Tuned rates and scaling"):
# every row of the tuning, scaling, slope, extrapolation, fixed-rate and difference tables and every
# caveat checked against tools/reference/scaling_report.py, which computes them independently from the
# runs' files, on (1) a real tiny sweep (steps x lr x delay x 3 seeds, a few steps each) and (2) a
# hand-made sweep folder whose numbers were chosen so that the picks, the edges, the missing points,
# the fits on per-length means (exact power laws, means off the line, negative means), the Welch
# differences, the recovery (75%), the noise floor's interval and the extrapolations (closed forms)
# are known by hand. Grids without an lr axis get no such section.
set -u
bin=${1:?usage: cli_scaling_report.sh path/to/nobubble}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
source "$(dirname "$0")/support/cli_harness.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
ref=$root/tools/reference/scaling_report.py

# ---------------------------------------------------------------- a real tiny sweep
small_corpus "$bin" "$work/data" && ok || fail "prepare small text"
cat > "$work/real.grid" <<EOF
fixed: --data $work/data --set n_layers=1 --set context=16 --batch 2 --eval-batches 1 --threads 1 --schedule constant
axis steps: 4 8 12
when steps=4: --eval-every 4
when steps=8: --eval-every 8
when steps=12: --eval-every 12
axis optimizer: adamw
axis lr: 1e-3 1.6e-2
axis delay
  sync:   --delay sync
  2bw:    --delay 2bw
  2bw+ef: --delay 2bw --ef 1
skip delay=2bw+ef steps=12 lr=1e-3
axis seed: 1 2 3
fixed: --data-seed {seed}
EOF
"$bin" sweep "$work/real.grid" --out "$work/real" --jobs 2 --quiet > "$work/real.log" 2>&1 && ok || fail "sweep: $(tail -3 "$work/real.log")"
"$bin" report "$work/real" > /dev/null 2>&1 && ok || fail "report of the real sweep"
python3 "$ref" "$work/real" > "$work/real.check" 2>&1 && ok || fail "real sweep against the reference: $(cat "$work/real.check")"
# 1.6e-2 is tuned at every length: both curves' means are fitted and extrapolated (2 rows, 6 caveats); at one
# rate 1e-3's 2bw+ef ran at 4 and 8 steps only, its means there <= 0 (named by the log fit, kept by the power
# law); 11 differences between consecutive lengths (tuned: 2 curves x 2; at one rate: 3 + 2 + 2 + 2).
check "real sweep: 6 tuning rows, 6 scaling rows, 2 slope rows, 2 extrapolation rows, 6 caveats, 4 fixed-rate rows, 11 differences" \
  grep -q "37 of 37 rows" "$work/real.check"
# The caveats' model size is counted from summary.json's model: the engine's own count (train prints it) agrees.
"$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 --steps 1 --eval-every 1 --eval-batches 1 \
  --threads 1 --out "$work/one" > "$work/one.log" 2>&1 && ok || fail "one train run: $(tail -3 "$work/one.log")"
n_params=$(sed -n 's/^model \([0-9]*\) parameters.*/\1/p' "$work/one.log")
check "real sweep: the caveats' model size is the engine's ($n_params)" \
  grep -q "<li>One model size ($n_params parameters in every fitted run)" "$work/real/report.html"

# ---------------------------------------------------------------- a hand-made sweep folder
# adamw: steps 100 (tokens 6400), 1000 (64000), 3000; rates 1e-3 2e-3 4e-3. At 100 the middle rate is
# best (tuned, no edge); at 1000 the lowest (edge); at 3000 one synchronous run has not run (not tuned
# yet: 8 of 9 ended). 2bw's gap at the tuned rate is 0.2 (tokens / 6400)^-0.5 x (1, 1.1, 0.9) over
# seeds, so the mean gaps lie exactly on gap ~ tokens^-0.5 (the seed factors average to 1); EF's gap is a
# quarter of it: recovery 75% on every seed.
# muon: rates 4e-3 8e-3; at 100 the highest rate is best (edge); at 1000 a failed synchronous run at
# 8e-3 rules that rate out (4e-3 tuned, the lowest: edge) and 2bw+ef has no runs (not run at the tuned
# rate); one of 2bw's gaps is negative (-0.01 at 100, seed 2), its mean (0.05, -0.01, 0.05) positive.
# lion (1e-3, 100 to 10000 steps, 5 seeds): 2bw's gap is 0.1 on every seed but -0.001 at 1000 steps, seed
# 5; its EF's is exactly 0.05 (tokens / 6400)^-0.5 on every seed but at 3000 steps, where it averages -0.002.
# normuon, adan, sgd (100, 1000, 10000 steps), soap (100, 1000): the fits' and the extrapolation's cases,
# described at their checks.
python3 - "$work/hand" <<'EOF'
import json, math, os, sys
d = sys.argv[1]
os.makedirs(d + "/runs")
rows = []
def run(steps, opt, lr, delay, seed, val, status="done", d_model=128, d_ffn=384):
    point = f"{steps}_{opt}_{lr}_{delay}_{seed}"
    rows.append(f"{point},{steps},{opt},{lr},{delay},{seed},{val},{val},{val},{steps * 64},1.0,{status},{0 if status == 'done' else 2}")
    if status != "done":
        return
    f = d + "/runs/" + point
    os.makedirs(f)
    sync = delay == "sync"
    model = {"vocab_size": 4096, "d_model": d_model, "n_layers": 4, "n_heads": 4, "n_kv_heads": 4, "d_ffn": d_ffn, "tied": True}
    json.dump({"final_train_loss": val, "final_val_loss": val, "seconds": 1.0, "run": {"optimizer": opt}, "model": model,
               "delay": {"mode": "sync" if sync else "2bw", "tau": 0 if sync else 1, "ef": delay == "2bw+ef",
                         "taylor": 0, "sync_start": 0, "sync_cooldown": 0}}, open(f + "/summary.json", "w"))
    with open(f + "/metrics.jsonl", "w") as m:
        m.write(json.dumps({"step": steps, "train_loss": val, "tokens": steps * 64, "time_s": 1.0, "val_loss": val}) + "\n")
seed_f = {1: 1.0, 2: 1.1, 3: 0.9}
seed_o = {1: 0.0, 2: 0.01, 3: -0.01}
for steps, base in ((100, {"1e-3": 4.0, "2e-3": 3.9, "4e-3": 4.1}), (1000, {"1e-3": 3.5, "2e-3": 3.6, "4e-3": 3.7}),
                    (3000, {"1e-3": 3.3, "2e-3": 3.2, "4e-3": 3.4})):
    gap = 0.2 * (steps / 100) ** -0.5
    for lr, v in base.items():
        for s in (1, 2, 3):
            sync = v + seed_o[s]
            run(steps, "adamw", lr, "sync", s, round(sync, 6), "not_run" if (steps, lr, s) == (3000, "2e-3", 2) else "done")
            run(steps, "adamw", lr, "2bw", s, round(sync + gap * seed_f[s], 9))
            run(steps, "adamw", lr, "2bw+ef", s, round(sync + 0.25 * gap * seed_f[s], 9))
for steps, base in ((100, {"4e-3": 4.2, "8e-3": 4.1}), (1000, {"4e-3": 3.6, "8e-3": 3.5})):
    for lr, v in base.items():
        for s in (1, 2, 3):
            sync = v + seed_o[s]
            failed = (steps, lr, s) == (1000, "8e-3", 2)
            run(steps, "muon", lr, "sync", s, "" if failed else round(sync, 6), "failed" if failed else "done")
            run(steps, "muon", lr, "2bw", s, round(sync + (-0.01 if (steps, s) == (100, 2) else 0.05), 6))
            if steps == 100:
                run(steps, "muon", lr, "2bw+ef", s, round(sync + 0.02, 6))
for steps, v in ((100, 4.0), (1000, 3.6), (10000, 3.3)):
    for s in (1, 2, 3):
        sync = v + seed_o[s]
        run(steps, "normuon", "8e-3", "sync", s, round(sync, 6))
        run(steps, "normuon", "8e-3", "2bw", s, round(sync + 0.1 * (steps / 100) ** -0.5, 9))
        run(steps, "normuon", "8e-3", "2bw+ef", s, round(sync + 0.01 * (steps / 100) ** 0.25, 9))
        if steps < 10000 or s == 1:
            run(steps, "adan", "1e-3", "sync", s, round(sync, 6), d_model=256, d_ffn=768)
            run(steps, "adan", "1e-3", "2bw", s, round(sync + 0.08 * (steps / 100) ** -0.5, 9), d_model=256, d_ffn=768)
        # sgd: mean gaps 0.1 (tokens / 6400)^-0.5 exp(0.1 (1, -2, 1)) over the lengths (seed factors 1, 1.1, 0.9
        # keep the mean); its EF's exactly -0.1 (tokens / 6400)^-0.5 in the mean
        dev = math.exp(0.1 * {100: 1, 1000: -2, 10000: 1}[steps])
        run(steps, "sgd", "1e-3", "sync", s, round(sync, 6))
        run(steps, "sgd", "1e-3", "2bw", s, round(sync + 0.1 * (steps / 100) ** -0.5 * dev * seed_f[s], 9))
        run(steps, "sgd", "1e-3", "2bw+ef", s, round(sync - 0.1 * (steps / 100) ** -0.5 * seed_f[s], 9))
        if steps == 10000:
            continue
        run(steps, "soap", "1e-3", "sync", s, round(sync, 6))
        run(steps, "soap", "1e-3", "2bw", s, round(sync + 0.1 * (steps / 100) ** -0.1 * {1: 1, 2: 2, 3: 0.5}[s], 9))
        if s == 1:
            run(steps, "soap", "1e-3", "2bw+ef", s, round(sync + 0.05 * (steps / 100) ** -0.5, 9))
for steps, v in ((100, 4.0), (1000, 3.6), (3000, 3.3), (10000, 3.2)):
    for s in (1, 2, 3, 4, 5):
        sync = v + 0.01 * s
        run(steps, "lion", "1e-3", "sync", s, round(sync, 6))
        run(steps, "lion", "1e-3", "2bw", s, round(sync + (-0.001 if (steps, s) == (1000, 5) else 0.1), 6))
        ef = 0.05 * (steps / 100) ** -0.5 if steps != 3000 else {1: 0.02, 2: -0.03, 3: 0.02, 4: -0.03, 5: 0.01}[s]
        run(steps, "lion", "1e-3", "2bw+ef", s, round(sync + ef, 9))
with open(d + "/results.csv", "w") as f:
    f.write("point,steps,optimizer,lr,delay,seed,final_train_loss,final_val_loss,best_val_loss,tokens,seconds,status,exit_status\n")
    f.write("\n".join(rows) + "\n")
EOF
"$bin" report "$work/hand" > "$work/hand.log" 2>&1 && ok || fail "report of the hand-made sweep: $(cat "$work/hand.log")"
python3 "$ref" "$work/hand" > "$work/hand.check" 2>&1 && ok || fail "hand-made sweep against the reference: $(cat "$work/hand.check")"
html=$work/hand/report.html
row() { grep -o "<tr><td>$1</td><td>$2</td>.*</tr>" "$html"; }
has() { local what=$1 pattern=$2 text=$3; [[ "$text" == *"$pattern"* ]] && ok || fail "$what: lacks '$pattern' in: $text"; }
has "adamw 100: the middle rate tuned, no edge" "<td>tuned</td>" "$(row "steps=100, optimizer=adamw" 2e-3)"
has "adamw 1000: the lowest rate, an edge" "<td>tuned; edge: extend the grid (the lowest rate)</td>" "$(row "steps=1000, optimizer=adamw" 1e-3)"
has "muon 100: the highest rate, an edge" "<td>tuned; edge: extend the grid (the highest rate)</td>" "$(row "steps=100, optimizer=muon" 8e-3)"
has "muon 1000: a failed run rules 8e-3 out" "<td>tuned; edge: extend the grid (the lowest rate)</td>" "$(row "steps=1000, optimizer=muon" 4e-3)"
has "adamw 3000: not tuned yet" "<td>no pick: not tuned yet: 8 of 9 synchronous runs ended</td>" "$(row "steps=3000, optimizer=adamw" 1e-3)"
# the sync cell at adamw 100, 2e-3: 3.9 + (0, 0.01, -0.01): mean 3.9000, sd 0.0100
has "adamw 100 2e-3: sync mean +- sd" "<td>3.9000 &plusmn; 0.0100 (3)</td>" "$(row "steps=100, optimizer=adamw" 2e-3)"
# 2bw's gap at 100: 0.2 x (1, 1.1, 0.9): mean 0.2, sd 0.02, half 4.302653 x 0.02 / sqrt(3) = 0.049683
has "adamw 100 2e-3: 2bw gap" "<td>+0.2000 [+0.1503, +0.2497]</td>" "$(row "steps=100, optimizer=adamw" 2e-3)"
has "scaling: adamw 1000 2bw at its tuned rate" \
  "<td>64000</td><td>1e-3</td><td>2bw</td><td>+0.0632</td><td>[+0.0475, +0.0790]</td><td>3</td><td>&mdash;</td>" \
  "$(row optimizer=adamw 1000)"
has "scaling: EF recovers 75% on every seed" "<td>2bw+ef</td><td>+0.0158</td>" "$(row optimizer=adamw 1000 | grep 2bw+ef)"
has "scaling: EF recovery" "<td>75.0% [75.0%, 75.0%]</td>" "$(row optimizer=adamw 1000 | grep 2bw+ef)"
has "scaling: adamw 3000 not tuned" '<td colspan="8">not tuned yet: 8 of 9 synchronous runs ended</td>' "$(row optimizer=adamw 3000)"
has "scaling: muon 1000 EF not run" '<td colspan="4">not run at the tuned rate</td>' "$(row optimizer=muon 1000 | grep 2bw+ef)"
# The fits take one mean gap per length. adamw's means are exactly 0.2 (tokens / 6400)^-0.5 (the seed
# factors 1, 1.1, 0.9 average to 1) at its two tuned lengths: both fits give -0.5, without an interval.
has "slope: exactly -0.5 from 2 lengths' means, 6 pairs" \
  "<td>2</td><td>6</td><td>-0.500 (2 lengths, no interval)</td><td>-0.500 (2 lengths, no interval)</td>" "$(row optimizer=adamw 2bw)"
# sgd: mean gaps 0.1 (tokens / 6400)^-0.5 exp(0.1 (1, -2, 1)) at 6400, 64000, 640000 tokens: the deviations
# are orthogonal to the line, so the slope is exactly -0.5, s^2 = 6 (0.1)^2 / 1, Sxx = 2 ln(10)^2, half =
# 12.706205 x 0.1 sqrt(3) / ln(10) = 0.955786: not resolved. Fitted to the 9 (length, seed) points instead
# (t_{0.975,7} = 2.364624, s^2 = 18 (0.1)^2 / 7, Sxx = 6 ln(10)^2) the half-width would be 0.0672 and the
# verdict "shrinks": the seeds would count as lengths.
has "slope: per-seed points would narrow it; the means do not" \
  "<td>3</td><td>9</td><td>-0.500 [-1.456, +0.456] not resolved</td>" "$(row optimizer=sgd 2bw)"
# sgd's EF means are exactly -0.1 (tokens / 6400)^-0.5: no logarithm anywhere, every length named; the power
# law keeps them all and recovers b = -0.5 exactly (a < 0). At 100 steps sd 0.01, half 4.302653 x 0.01 /
# sqrt(3) = 0.024841.
has "slope: negative means named by the log fit, kept by the power law" \
  "<td>3</td><td>9</td><td>not fitted: a mean gap &gt; 0 at 0 lengths, 2 needed; left out, mean gap &le; 0 (no logarithm): 100 steps at lr 1e-3 (-0.1000 [-0.1248, -0.0752]), 1000 steps at lr 1e-3 (-0.0316 [" \
  "$(row optimizer=sgd 2bw+ef)"
has "slope: the power law recovers -0.5 through negative means" \
  "10000 steps at lr 1e-3 (-0.0100 [-0.0125, -0.0075])</td><td>-0.500 [-0.500, -0.500] shrinks</td>" "$(row optimizer=sgd 2bw+ef)"
# muon's 2bw gaps (0.05, -0.01, 0.05) at 100 steps average +0.03 > 0: a seed's negative gap no longer takes
# the length out. Both fits through 0.03 and 0.05 over tenfold tokens: log10(5 / 3) = +0.2218.
has "slope: a negative seed gap in a positive mean stays in" \
  "<td>2</td><td>6</td><td>+0.222 (2 lengths, no interval)</td><td>+0.222 (2 lengths, no interval)</td>" "$(row optimizer=muon 2bw)"
# lion's 2bw gap is 0.1 on every seed but -0.001 at 1000 steps, seed 5 (mean 0.0798): fitted, no stop.
has "slope: a negative seed gap does not stop the fit" "<td>4</td><td>20</td><td>+0.005 [-0.169, +0.180] not resolved</td>" \
  "$(row optimizer=lion 2bw)"
# lion's EF: exactly 0.05 (tokens / 6400)^-0.5 at 100, 1000 and 10000 steps, and (0.02, -0.03, 0.02, -0.03,
# 0.01) at 3000, mean -0.002 (sd 0.0258844, half 2.776445 x 0.0258844 / sqrt(5) = 0.032140): the log fit
# leaves 3000 out, names it, and is exact over the rest; the power law keeps all four lengths.
has "slope: a negative mean is named by the log fit" \
  "<td>4</td><td>20</td><td>-0.500 [-0.500, -0.500] shrinks; left out, mean gap &le; 0 (no logarithm): 3000 steps at lr 1e-3 (-0.0020 [-0.0341, +0.0301])</td><td>" \
  "$(row optimizer=lion 2bw+ef)"
# The gap at one rate: adamw's gap formula holds at every rate, so at 1e-3 (all 3 lengths, 9 pairs, means
# exactly on the power law) both fits give -0.5 with an interval of zero width; at 2e-3 the pair whose sync
# did not run is missing; normuon's is exact too; muon's 8e-3 loses the pair of the failed sync run. 17 rows:
# adamw 3 rates x 2 curves, muon 2 (its EF ran at 100 steps only: no row), normuon 2, soap 2, adan 1, lion 2,
# sgd 2.
frow() { sed -n '/<table id="fixed-rate-table">/,/<\/table>/p' "$html" | grep -o "<tr><td>$1</td><td>$2</td><td>$3</td>.*"; }
has "fixed rate: adamw 1e-3 over 3 lengths, both fits -0.5" \
  "<td>3</td><td>9</td><td>-0.500 [-0.500, -0.500] shrinks</td><td>-0.500 [-0.500, -0.500] shrinks</td>" "$(frow optimizer=adamw 1e-3 2bw)"
has "fixed rate: adamw 2e-3 misses the pair whose sync did not run" "<td>3</td><td>8</td>" "$(frow optimizer=adamw 2e-3 2bw)"
has "fixed rate: normuon's exact power law" "<td>3</td><td>9</td><td>-0.500 [-0.500, -0.500] shrinks</td><td>-0.500 [-0.500, -0.500] shrinks</td>" \
  "$(frow optimizer=normuon 8e-3 2bw)"
has "fixed rate: muon 8e-3, the failed sync's pair missing" "<td>2</td><td>5</td><td>+0.222 (2 lengths, no interval)</td>" \
  "$(frow optimizer=muon 8e-3 2bw)"
check "fixed rate: no row for a curve run at one length" test -z "$(frow optimizer=muon 4e-3 2bw+ef)"
check "fixed rate: 17 rows" test "$(sed -n '/<table id="fixed-rate-table">/,/<\/table>/p' "$html" | grep -c '<tr><td>')" -eq 17
# The change between consecutive lengths (Welch, the lengths' runs unpaired). muon at its tuned rates, 100 to
# 1000 steps: +0.03 (sd 0.034641, 3 pairs) to +0.05 (no spread): df = 2 exactly, half 4.302653 x 0.034641 /
# sqrt(3) = 0.086053. lion's EF, 1000 to 3000: 0.0158114 (no spread) to -0.002 (half 0.032140 with df = 4):
# -0.0178 [-0.0500, +0.0143]; 100 to 1000 has no spread at all: a zero-width interval. soap's EF has one
# seed: no interval.
drow() { sed -n '/<table id="difference-table">/,/<\/table>/p' "$html" | grep -o "<tr><td>$1</td><td>$2</td><td>$3</td><td>$4</td>.*"; }
has "differences: Welch with df 2" "<td>+0.0300 &rarr; +0.0500</td><td>+0.0200 [-0.0661, +0.1061] not resolved</td><td>2.0</td>" \
  "$(drow optimizer=muon 2bw "8e-3 &rarr; 4e-3 (tuned)" "100 &rarr; 1000")"
has "differences: a negative mean kept" "<td>+0.0158 &rarr; -0.0020</td><td>-0.0178 [-0.0500, +0.0143] not resolved</td><td>4.0</td>" \
  "$(drow optimizer=lion 2bw+ef 1e-3 "1000 &rarr; 3000")"
has "differences: no spread, an exact change" "<td>-0.0342 [-0.0342, -0.0342] shrinks</td>" \
  "$(drow optimizer=lion 2bw+ef 1e-3 "100 &rarr; 1000")"
has "differences: one pair, no interval" "<td>-0.0342 (one pair at a length: no interval)</td><td>&mdash;</td>" \
  "$(drow optimizer=soap 2bw+ef "1e-3 &rarr; 1e-3 (tuned)" "100 &rarr; 1000")"
# The extrapolation table (ln mean gap = a + b ln tokens at T, 10 T, 100 T; noise floor = the sync runs' sd
# with its chi-square interval). normuon's gaps are exactly 0.1 (tokens / 6400)^-0.5 on every seed at 100,
# 1000 and 10000 steps: at T = 640000 tokens 0.0100, then 0.0032 and 0.0010; its sync runs at 10000 are 3.3 +
# (0, 0.01, -0.01), sd 0.0100, 95% interval 0.01 sqrt(2 / chi2) with chi2_{0.975,2} = -2 ln(0.025) and
# chi2_{0.025,2} = -2 ln(0.975): [0.0052, 0.0628]. The line reaches 0.01 at 6400 x (0.1 / 0.01)^2 = 640000
# tokens; with the floor's 97.5% interval (chi2 at 0.9875 and 0.0125: [0.0047771, 0.0891622]) and a line
# without error the crossing runs from 6400 (0.1 / 0.0891622)^2 = 8050 to 6400 (0.1 / 0.0047771)^2 = 2.80e6.
erow() { sed -n '/<table id="extrapolation-table">/,/<\/table>/p' "$html" | grep -o "<tr><td>$1</td><td>$2</td>.*"; }
has "extrapolation: exact power law, closed form" \
  "<td>10000</td><td>640000</td><td>0.0100 [0.0100, 0.0100]</td><td>0.0032 [0.0032, 0.0032]</td>" "$(erow optimizer=normuon 2bw)"
has "extrapolation: the floor's interval, carried into the crossing" \
  "<td>0.0100 [0.0052, 0.0628] (3 runs)</td><td>6.4e+05 [8.05e+03, 2.8e+06]</td></tr>" "$(erow optimizer=normuon 2bw)"
# Its EF gap 0.01 (tokens / 6400)^0.25 grows (0.0316, 0.0562, 0.1000): never.
has "extrapolation: a growing gap never reaches the floor" \
  "<td>0.0316 [0.0316, 0.0316]</td><td>0.0562 [0.0562, 0.0562]</td><td>0.1000 [0.1000, 0.1000]</td><td>0.0100 [0.0052, 0.0628] (3 runs)</td><td>never (slope &ge; 0)</td>" \
  "$(erow optimizer=normuon 2bw+ef)"
# sgd (the deviations above, orthogonal to the line): the line at T is 0.0100; se^2 = s^2 (1/3 + (ln 10)^2 /
# Sxx) = 0.06 x 5/6, t_{0.975,1} = 12.706205: x exp(-+2.841191) = [0.000584, 0.1714]; at 10 T 0.0032, se^2 =
# 0.06 (1/3 + 4/2): [2.72e-05, 0.3671]. The floor 0.01 is the line's value at T: crossed at 640000 tokens, no
# interval (the slope's interval reaches 0).
has "extrapolation: the means' spread, closed form" \
  "<td>0.0100 [0.000584, 0.1714]</td><td>0.0032 [2.72e-05, 0.3671]</td><td>" "$(erow optimizer=sgd 2bw)"
has "extrapolation: an unresolved slope's crossing has no interval" \
  "<td>0.0100 [0.0052, 0.0628] (3 runs)</td><td>6.4e+05 (no interval: the slope's 97.5% interval reaches 0)</td>" \
  "$(erow optimizer=sgd 2bw)"
has "extrapolation: 2 lengths" '<td colspan="7">not extrapolated: 2 lengths, no interval (3 needed)</td>' "$(erow optimizer=soap 2bw+ef)"
# adan: one seed at 10000 steps, so no noise floor there; a bigger model (d_model 256, d_ffn 768: 4458752
# parameters against tiny's 1377408).
has "extrapolation: no noise floor from one run" \
  "<td>0.0080 [0.0080, 0.0080]</td><td>0.0025 [0.0025, 0.0025]</td><td>0.0008 [0.0008, 0.0008]</td><td>n/a: 1 synchronous run</td><td>n/a: no noise floor</td>" \
  "$(erow optimizer=adan 2bw)"
has "extrapolation: one length is not fitted" '<td colspan="7">not fitted: a mean gap &gt; 0 at 1 length, 2 needed</td>' \
  "$(erow optimizer=muon 2bw+ef)"
caveats=$(sed -n '/<ul id="extrapolation-caveats">/,/<\/ul>/p' "$html")
check "caveats: one per fitted row (6), seeds, rate, model, paper" test "$(grep -c '<li>' <<< "$caveats")" -eq 10
has "caveats: a length left out" "<li>optimizer=lion, 2bw+ef: a fit over 3 lengths spanning a factor 100 of tokens (6400 to 640000, 2.00 decades): 100 steps at lr 1e-3 (grid edge), 1000 steps at lr 1e-3 (grid edge), 10000 steps at lr 1e-3 (grid edge); left out, mean gap &le; 0 (no logarithm): 3000 steps at lr 1e-3 (-0.0020 [-0.0341, +0.0301]); 100 T lies" "$caveats"
has "caveats: N and F" "<li>optimizer=normuon, 2bw: a fit over 3 lengths spanning a factor 100 of tokens (6400 to 640000, 2.00 decades): 100 steps at lr 8e-3 (grid edge), 1000 steps at lr 8e-3 (grid edge), 10000 steps at lr 8e-3 (grid edge); 100 T lies 2 decades beyond the longest, 1.0 times that span.</li>" "$caveats"
has "caveats: model sizes" "One model size per fit (1.38M to 4.46M parameters)" "$caveats"
has "caveats: the paper's scale" "1e8 parameters is 1.4 decades above 4.46M, and 1e9 tokens is 3.2 decades beyond the longest fitted length's 640000 tokens." "$caveats"
has "caveats: an edge rate" "A rate at its grid's edge may not be the best" "$caveats"
# A fit whose lengths ran different models (normuon's 1000 steps on a wider one) is named as such; a
# summary without a model leaves the count out; synchronous runs that agree to the last digit (normuon's
# at 1000 steps all 3.6, the delayed ones moved with them) give a floor of 0 that no gap reaches. All
# against the reference too.
for case in mixed nomodel floor0; do
  cp -r "$work/hand" "$work/$case"
  python3 - "$work/$case/runs" "$case" <<'EOF'
import json, sys
d, case = sys.argv[1:]
gaps = {"sync": 0, "2bw": round(3.5 + 0.1 * 100 ** -0.5, 9) - 3.5, "2bw+ef": round(3.5 + 0.01 * 100 ** 0.25, 9) - 3.5}
for point in [f"10000_normuon_8e-3_{c}_{k}" for c in (("sync", "2bw", "2bw+ef") if case == "floor0" else ("sync",))
              for k in (1, 2, 3)]:
    f = f"{d}/{point}/summary.json"
    s = json.load(open(f))
    if case == "floor0":
        s["final_val_loss"] = 3.5 + gaps[point.split("_")[3]]  # 3 x 3.5 / 3 is 3.5 exactly: sd 0
    elif case == "mixed":
        s["model"]["d_model"] = 256
    else:
        del s["model"]
    json.dump(s, open(f, "w"))
EOF
  "$bin" report "$work/$case" > "$work/$case.log" 2>&1 && ok || fail "report of $case: $(cat "$work/$case.log")"
  python3 "$ref" "$work/$case" > "$work/$case.check" 2>&1 && ok || fail "$case against the reference: $(cat "$work/$case.check")"
done
has "caveats: a fit over two model sizes" \
  "<li>A fit mixes model sizes across its lengths: its line confounds tokens with model size.</li>" "$(cat "$work/mixed/report.html")"
has "caveats: no model in a summary" \
  "<li>One model size per fit (the runs' summary.json has no model to count): how the gap changes with model size is not measured.</li>
<li>The paper's scale (hundreds of millions to billions of parameters, billions of tokens) is many decades beyond: 1e9 tokens is 3.2 decades" \
  "$(cat "$work/nomodel/report.html")"
erow0() { sed -n '/<table id="extrapolation-table">/,/<\/table>/p' "$work/floor0/report.html" | grep -o "<tr><td>$1</td><td>$2</td>.*"; }
has "extrapolation: a noise floor of 0 is never reached" "<td>0.0000 [0.0000, 0.0000] (3 runs)</td><td>never (noise floor 0)</td>" \
  "$(erow0 optimizer=normuon 2bw)"
check "the gap-against-rate charts" test "$(grep -c '<svg[^>]* id="gaplr-' "$html")" -eq 20
check "the scaling charts" test "$(grep -c '<svg[^>]* id="scaling-' "$html")" -eq 7
# lion's chart draws all 8 mean gaps (2bw and 2bw+ef at 4 lengths), EF's negative mean at 3000 steps too: the
# gap axis is linear (a log axis had no place for it), and its ticks include 0.
lion_chart=$(awk '/<svg[^>]* id="scaling-/ { on = 1; buf = "" } on { buf = buf $0 "\n" } /<\/svg>/ && on { if (buf ~ /lion/) printf "%s", buf; on = 0 }' "$html")
check "lion's scaling chart: 8 points, a negative mean among them" test "$(grep -o '<circle' <<< "$lion_chart" | wc -l)" -eq 8
check "lion's scaling chart: a 0 tick on the gap axis" grep -q 'text-anchor="end">0.0*<' <<< "$lion_chart"

# ---------------------------------------------------------------- the whole-split evaluation (final_eval.json)
# A folder whose every finished run has final_eval.json (a study's evaluation of the final model on the whole
# validation split) is measured there in every table: each run's loss + 0.5, and adamw's synchronous runs
# at 100 steps and 2e-3 + 1.0 more, so that 1e-3 (4.5 against 4.9 + 0.5) becomes the pick there, an edge.
# The reference twin must agree on every table; a folder where one run lacks the file keeps the batches for
# all (the tables equal the first report's) and says so; a malformed file is refused naming it.
cp -r "$work/hand" "$work/whole"
python3 - "$work/whole" <<'EOF'
import json, os, sys
root = os.path.join(sys.argv[1], "runs")
for p in os.listdir(root):
    v = json.load(open(os.path.join(root, p, "summary.json")))["final_val_loss"]
    v += 0.5 + (1.0 if p.startswith("100_adamw_2e-3_sync_") else 0)
    json.dump({"point": p, "val_loss": v}, open(os.path.join(root, p, "final_eval.json"), "w"))
EOF
"$bin" report "$work/whole" > "$work/whole.log" 2>&1 && ok || fail "report with final_eval.json: $(cat "$work/whole.log")"
python3 "$ref" "$work/whole" > "$work/whole.check" 2>&1 && ok || fail "the whole-split tables against the reference: $(cat "$work/whole.check")"
check "every table on the whole split, said" grep -q 'id="measure">The final validation loss of every run is its final model on the whole validation split' "$work/whole/report.html"
has "the whole-split losses move adamw's pick at 100 steps to 1e-3, an edge" "<td>tuned; edge: extend the grid (the lowest rate)</td>" \
  "$(grep -o "<tr><td>steps=100, optimizer=adamw</td><td>1e-3</td>.*</tr>" "$work/whole/report.html")"
rm "$work/whole/runs/100_adamw_1e-3_sync_1/final_eval.json"
"$bin" report "$work/whole" > "$work/whole2.log" 2>&1 && ok || fail "report with one final_eval.json missing: $(cat "$work/whole2.log")"
check "one missing: the batches for every run, said" grep -q 'id="measure">[0-9]* of [0-9]* finished runs also have a whole-split evaluation' "$work/whole/report.html"
check "one missing: the gap table equals the first report's" \
  test "$(grep -o '<table id="gap-table">.*' "$work/whole/report.html" | head -c 20000)" = "$(grep -o '<table id="gap-table">.*' "$work/hand/report.html" | head -c 20000)"
echo '{"val_loss": null}' > "$work/whole/runs/100_adamw_1e-3_sync_1/final_eval.json"
expect_error "a final_eval.json without a number" "100_adamw_1e-3_sync_1/final_eval.json: expected a finite number val_loss" \
  "$bin" report "$work/whole"

# ---------------------------------------------------------------- no lr axis: no new section
mkdir -p "$work/nolr/runs"
# (each point renamed by its remaining labels, as a sweep names it, its run folder copied under that name)
python3 - "$work/hand/results.csv" "$work/nolr/renamed" > "$work/nolr/results.csv" <<'EOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
keep = [i for i, name in enumerate(rows[0]) if name not in ("steps", "lr")]
labels = [i for i in keep if 0 < i < len(rows[0]) - 7]
with open(sys.argv[2], "w") as renamed:
    for r in rows:
        if r is rows[0]:
            print(",".join(r[i] for i in keep))
        elif (r[1], r[3]) == ("100", "2e-3"):
            name = "_".join(r[i] for i in labels)
            renamed.write(f"{r[0]} {name}\n")
            print(",".join([name] + [r[i] for i in keep[1:]]))
EOF
while read -r old new; do cp -r "$work/hand/runs/$old" "$work/nolr/runs/$new"; done < "$work/nolr/renamed"
"$bin" report "$work/nolr" > "$work/nolr.log" 2>&1 && ok || fail "report without an lr axis: $(cat "$work/nolr.log") $(head -2 "$work/nolr/results.csv")"
check "no lr axis: the gap table, no tuning or scaling" test "$(grep -c 'id="gap-table"' "$work/nolr/report.html")" -eq 1 -a \
  "$(grep -c 'id="tuning\|id="scaling' "$work/nolr/report.html")" -eq 0

# ---------------------------------------------------------------- the gap against model size (an axis named size)
# size tiny (d_model 128, 4 layers: 1,377,408 parameters), small (d_model 256: 4,458,752) and, for muon
# only, "mystery" (no model in summary.json: unknown, after the known sizes). adamw: tiny's pick 1e-3 (2e-3
# 0.1 worse) with gaps 0.10, 0.11, 0.12; small's pick 2e-3 with 0.03, 0.04, 0.05: small less tiny -0.07, Welch
# se 0.008165 on df 4, half-width 0.0227: [-0.0927, -0.0473], smaller for the larger model. muon: gaps 0.04,
# 0.05, 0.06 (tiny) and 0.04, 0.06, 0.05 (small): +0.0000, not resolved; "mystery" gets no change.
python3 - "$work/size" <<'EOF'
import json, os, sys
d = sys.argv[1]
os.makedirs(d + "/runs")
rows = []
dims = {"tiny": (128, 384), "small": (256, 768), "mystery": None}
def run(size, opt, lr, delay, seed, val):
    point = f"{size}_{opt}_{lr}_{delay}_{seed}"
    rows.append(f"{point},{size},{opt},{lr},{delay},{seed},{val},{val},{val},6400,1.0,done,0")
    os.makedirs(d + "/runs/" + point)
    sync = delay == "sync"
    s = {"final_train_loss": val, "final_val_loss": val, "seconds": 1.0, "run": {"optimizer": opt},
         "delay": {"mode": "sync" if sync else "2bw", "tau": 0 if sync else 1, "ef": False, "taylor": 0,
                   "sync_start": 0, "sync_cooldown": 0}}
    if dims[size]:
        s["model"] = {"vocab_size": 4096, "d_model": dims[size][0], "n_layers": 4, "n_heads": 4, "n_kv_heads": 4,
                      "d_ffn": dims[size][1], "tied": True}
    json.dump(s, open(d + "/runs/" + point + "/summary.json", "w"))
    with open(d + "/runs/" + point + "/metrics.jsonl", "w") as m:
        m.write(json.dumps({"step": 100, "train_loss": val, "tokens": 6400, "time_s": 1.0, "val_loss": val}) + "\n")
gaps = {("tiny", "adamw"): [0.10, 0.11, 0.12], ("small", "adamw"): [0.03, 0.04, 0.05],
        ("tiny", "muon"): [0.04, 0.05, 0.06], ("small", "muon"): [0.04, 0.06, 0.05], ("mystery", "muon"): [0.02, 0.03, 0.04]}
for (size, opt), g in gaps.items():
    best = "1e-3" if size == "tiny" else "2e-3"
    for lr in ("1e-3", "2e-3"):
        for s in (1, 2, 3):
            sync = round(4.0 + s / 100 + (0 if lr == best else 0.1), 6)
            run(size, opt, lr, "sync", s, sync)
            run(size, opt, lr, "2bw", s, round(sync + g[s - 1], 6))
with open(d + "/results.csv", "w") as f:
    f.write("point,size,optimizer,lr,delay,seed,final_train_loss,final_val_loss,best_val_loss,tokens,seconds,status,exit_status\n")
    f.write("\n".join(rows) + "\n")
EOF
"$bin" report "$work/size" > "$work/size.log" 2>&1 && ok || fail "report of the size sweep: $(cat "$work/size.log")"
python3 "$ref" "$work/size" > "$work/size.check" 2>&1 && ok || fail "size sweep against the reference: $(cat "$work/size.check")"
size_html=$(cat "$work/size/report.html")
has "size: adamw, smaller for the larger model" \
  "<tr><td>optimizer=adamw</td><td>2bw</td><td>small</td><td>4458752</td><td>2e-3</td><td>+0.0400 [+0.0152, +0.0648]</td><td>-0.0700 [-0.0927, -0.0473] smaller for the larger model</td></tr>" \
  "$size_html"
has "size: the smallest size has no change" \
  "<tr><td>optimizer=adamw</td><td>2bw</td><td>tiny</td><td>1377408</td><td>1e-3</td><td>+0.1100 [+0.0852, +0.1348]</td><td>&mdash;</td></tr>" \
  "$size_html"
has "size: muon not resolved" "<td>small</td><td>4458752</td><td>2e-3</td><td>+0.0500 [+0.0252, +0.0748]</td><td>+0.0000 [-0.0227, +0.0227] not resolved</td>" "$size_html"
has "size: an unknown size last, no change" "<td>mystery</td><td>unknown</td><td>2e-3</td><td>+0.0300 [+0.0052, +0.0548]</td><td>&mdash;</td></tr>" "$size_html"
check "size: one chart per series" test "$(grep -c '<svg[^>]* id="size-' "$work/size/report.html")" -eq 2
check "size: the 10 tuning and 5 size rows of the reference, nothing more" grep -q "scaling_report: 15 of 15 rows" "$work/size.check"

# Rendered by a browser: the page parses and has the new tables and charts.
if render_dom "$html"; then
  dom_has_ids tuning-table scaling-table slope-table extrapolation-table extrapolation-caveats gaplr-100-adamw scaling-1 scaling-2
else
  fail "$no_chromium"
fi
finish
