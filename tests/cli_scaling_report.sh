#!/usr/bin/env bash
# nobubble report's tuning and scaling sections (docs/experiments.md, "Tuned rates and scaling"):
# every row of the tuning, scaling and slope tables checked against tools/reference/scaling_report.py,
# which computes them independently from the runs' files, on (1) a real tiny sweep (steps x lr x
# delay x 3 seeds, a few steps each) and (2) a hand-made sweep folder whose numbers were chosen so
# that the picks, the edges, the missing points, the slope (exactly -0.5) and the recovery (75%) are
# known by hand. Grids without an lr axis get no such section.
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
axis steps: 3 6
when steps=3: --eval-every 3
when steps=6: --eval-every 6
axis optimizer: adamw
axis lr: 1e-3 1.6e-2
axis delay
  sync:   --delay sync
  2bw:    --delay 2bw
  2bw+ef: --delay 2bw --ef 1
skip delay=2bw+ef steps=6 lr=1e-3
axis seed: 1 2 3
fixed: --data-seed {seed}
EOF
"$bin" sweep "$work/real.grid" --out "$work/real" --jobs 2 --quiet > "$work/real.log" 2>&1 && ok || fail "sweep: $(tail -3 "$work/real.log")"
"$bin" report "$work/real" > /dev/null 2>&1 && ok || fail "report of the real sweep"
python3 "$ref" "$work/real" > "$work/real.check" 2>&1 && ok || fail "real sweep against the reference: $(cat "$work/real.check")"
check "real sweep: 2 x 2 tuning rows, 4 scaling rows, 2 slope rows" grep -q "10 of 10 rows" "$work/real.check"

# ---------------------------------------------------------------- a hand-made sweep folder
# adamw: steps 100 (tokens 6400), 1000 (64000), 3000; rates 1e-3 2e-3 4e-3. At 100 the middle rate is
# best (tuned, no edge); at 1000 the lowest (edge); at 3000 one synchronous run has not run (not tuned
# yet: 8 of 9 ended). 2bw's gap at the tuned rate is 0.2 (tokens / 6400)^-0.5 x (1, 1.1, 0.9) over
# seeds, so ln(gap) on ln(tokens) has slope exactly -0.5 (the seed factors repeat at each length); EF's
# gap is a quarter of it: recovery 75% on every seed.
# muon: rates 4e-3 8e-3; at 100 the highest rate is best (edge); at 1000 a failed synchronous run at
# 8e-3 rules that rate out (4e-3 tuned, the lowest: edge) and 2bw+ef has no runs (not run at the tuned
# rate); one of 2bw's gaps is negative (-0.01 at 100, seed 2): its slope is not fitted.
python3 - "$work/hand" <<'EOF'
import json, os, sys
d = sys.argv[1]
os.makedirs(d + "/runs")
rows = []
def run(steps, opt, lr, delay, seed, val, status="done"):
    point = f"{steps}_{opt}_{lr}_{delay}_{seed}"
    rows.append(f"{point},{steps},{opt},{lr},{delay},{seed},{val},{val},{val},{steps * 64},1.0,{status},{0 if status == 'done' else 2}")
    if status != "done":
        return
    f = d + "/runs/" + point
    os.makedirs(f)
    sync = delay == "sync"
    json.dump({"final_train_loss": val, "final_val_loss": val, "seconds": 1.0, "run": {"optimizer": opt},
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
has "slope: exactly -0.5 over 2 lengths, 6 points" "<td>2</td><td>6</td><td>-0.500</td>" "$(row optimizer=adamw 2bw)"
# residuals ln(1, 1.1, 0.9) less their mean at both lengths: SSR 0.040302, s^2 = SSR / 4, Sxx = 6 (ln(10) / 2)^2
# = 7.9529, half = 2.776445 sqrt(s^2 / Sxx) = 0.0988
has "slope: its interval, shrinks" "<td>[-0.599, -0.401] shrinks</td>" "$(row optimizer=adamw 2bw)"
has "slope: a negative gap is not fitted" "not fitted: the gap is -0.0100 &le; 0 at steps=100, seed 2 (no logarithm)" "$(row optimizer=muon 2bw)"
check "the gap-against-rate charts" test "$(grep -c '<svg[^>]* id="gaplr-' "$html")" -eq 5
check "the scaling charts" test "$(grep -c '<svg[^>]* id="scaling-' "$html")" -eq 2

# ---------------------------------------------------------------- no lr axis: no new section
mkdir -p "$work/nolr/runs"
python3 - "$work/hand/results.csv" > "$work/nolr/results.csv" <<'EOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
keep = [i for i, name in enumerate(rows[0]) if name not in ("steps", "lr")]
for r in rows:
    if r is rows[0] or (r[1], r[3]) == ("100", "2e-3"):
        print(",".join(r[i] for i in keep))
EOF
for p in $(awk -F, 'NR > 1 { print $1 }' "$work/nolr/results.csv"); do cp -r "$work/hand/runs/$p" "$work/nolr/runs/"; done
"$bin" report "$work/nolr" > "$work/nolr.log" 2>&1 && ok || fail "report without an lr axis: $(cat "$work/nolr.log") $(head -2 "$work/nolr/results.csv")"
check "no lr axis: the gap table, no tuning or scaling" test "$(grep -c 'id="gap-table"' "$work/nolr/report.html")" -eq 1 -a \
  "$(grep -c 'id="tuning\|id="scaling' "$work/nolr/report.html")" -eq 0

# Rendered by a browser: the page parses and has the new tables and charts.
if render_dom "$html"; then
  dom_has_ids tuning-table scaling-table slope-table gaplr-100-adamw scaling-1 scaling-2
else
  fail "$no_chromium"
fi
finish
