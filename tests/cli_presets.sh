#!/usr/bin/env bash
# The presets of issue 16 and the main job's summary, without training anything: each preset's dry
# run is checked against the arithmetic its README states (equal_time's step counts from
# (M+P-1)/M, momentum's stable betas and factor-2 rates, cooldown's schedules x cooldowns, the
# quickstart's six pipeline runs), and scripts/gap_summary.awk (what scripts/run.sh prints) against
# gaps and recoveries computed by hand from a hand-made results.csv.
set -u
bin=${1:?usage: cli_presets.sh path/to/nobubble}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
source "$(dirname "$0")/support/cli_harness.sh"
root=$(cd "$(dirname "$0")/.." && pwd)

# A flag's value in a dry run's command line (the last occurrence, as train reads it).
flag_of() { awk -v f="$1" '{ v = ""; for (i = 1; i < NF; i++) if ($i == f) v = $(i + 1); print v }'; }
preset_dry() { "$bin" sweep "$root/experiments/$1/grid.txt" --dry-run 2>&1 | grep ": nobubble train "; }
# equal_time: 1F1B runs S = 300 steps; each 2BW run (M+P-1)/M x S, computed here from its own
# --stages and --microbatches; evaluations every S/15 steps of its own length, warmup 10% of it.
preset_dry equal_time > "$work/eq.out"
bad_eq=$(while read -r line; do
  P=$(echo "$line" | flag_of --stages); M=$(echo "$line" | flag_of --microbatches)
  N=$(echo "$line" | flag_of --steps); E=$(echo "$line" | flag_of --eval-every)
  W=$(echo "$line" | flag_of --warmup); kind=$(echo "$line" | flag_of --pipeline)
  want=300; [ "$kind" = 2bw ] && want=$((300 * (M + P - 1) / M))
  [ "$N" = "$want" ] && [ $((N % 15)) -eq 0 ] && [ "$E" = $((N / 15)) ] && [ "$W" = $(((N + 5) / 10)) ] || echo "$line"
done < "$work/eq.out")
check "equal_time: 2BW gets (M+P-1)/M x 1F1B's steps, own warmup and evaluations" test -z "$bad_eq"
check "equal_time: P = 2 and 4 on real threads" test "$(flag_of --stages < "$work/eq.out" | sort -u | tr '\n' ' ')" = "2 4 "
# momentum: AdamW's beta1 below sqrt(beta2) everywhere (a stable baseline); per optimizer and
# momentum three rates, each twice the one before.
preset_dry momentum > "$work/mom.out"
# (beta2 absent: train's AdamW default, 0.95)
check "momentum: AdamW beta1 < sqrt(beta2)" test -z "$(grep -- '--optimizer adamw' "$work/mom.out" |
  awk '{ b1 = 0.9; b2 = 0.95; for (i = 1; i < NF; i++) { if ($i == "--beta1") b1 = $(i+1); if ($i == "--beta2") b2 = $(i+1) } if (!(b1 * b1 < b2)) print }')"
rates=$(awk '{ o = m = r = ""; for (i = 1; i < NF; i++) { if ($i == "--optimizer") o = $(i+1);
                 if ($i == "--beta1" || $i == "--momentum") m = $(i+1); if ($i == "--lr") r = $(i+1) }
               print o, m, r }' "$work/mom.out" | sort -u | sort -k1,1 -k2,2n -k3,3g |
  awk '{ k = $1 " " $2; if (k == prev) { if ($3 / last < 1.99 || $3 / last > 2.01) print "not x2:", $0; n[k]++ } else n[k] = 1; prev = k; last = $3 }
       END { for (k in n) if (n[k] != (k ~ /^adamw / ? 3 : 4)) print k, n[k], "rates" }')
# AdamW three rates, Muon and NorMuon four (3.2e-2 added when 1.6e-2, the top, was picked)
check "momentum: factor-2 rates per optimizer and momentum, AdamW 3, Muon and NorMuon 4 ($rates)" test -z "$rates"
check "momentum: AdamW 0.8/0.9/0.95, Muon and NorMuon 0.9/0.95/0.98" test "$(
  awk '{ for (i = 1; i < NF; i++) { if ($i == "--optimizer") o = $(i+1); if ($i == "--beta1" || $i == "--momentum") m = $(i+1) } print o ":" m }' \
    "$work/mom.out" | sort -u | tr '\n' ' ')" = "adamw:0.8 adamw:0.9 adamw:0.95 muon:0.9 muon:0.95 muon:0.98 normuon:0.9 normuon:0.95 normuon:0.98 "
# cooldown: every schedule crossed with sync, 2bw and the two cooldowns.
check "cooldown: schedules x cooldowns" test "$(preset_dry cooldown |
  awk '{ s = c = ""; for (i = 1; i < NF; i++) { if ($i == "--schedule") s = $(i+1); if ($i == "--sync-cooldown") c = $(i+1); if ($i == "--delay") d = $(i+1) } print s ":" d ":" c }' |
  sort | uniq -c | awk '{ print $1 "x" $2 }' | tr '\n' ' ')" = \
  "9xconstant:2bw: 9xconstant:2bw:30 9xconstant:2bw:60 9xconstant:sync: 9xcosine:2bw: 9xcosine:2bw:30 9xcosine:2bw:60 9xcosine:sync: 9xwsd:2bw: 9xwsd:2bw:30 9xwsd:2bw:60 9xwsd:sync: "
# quickstart: AdamW and Muon, each 1F1B / 2BW / 2BW + EF on a 2-stage pipeline, every run exporting
# to its own folder, one of which is the one scripts/run.sh samples from.
preset_dry quickstart > "$work/qs.out"
check "quickstart: optimizer x pipeline x EF" test "$(
  awk '{ o = p = s = ""; e = 0; for (i = 1; i < NF; i++) { if ($i == "--optimizer") o = $(i+1); if ($i == "--pipeline") p = $(i+1);
         if ($i == "--stages") s = $(i+1); if ($i == "--ef") e = $(i+1) } print o ":" p ":" e ":" s }' "$work/qs.out" | tr '\n' ' ')" = \
  "adamw:1f1b:0:2 adamw:2bw:0:2 adamw:2bw:1:2 muon:1f1b:0:2 muon:2bw:0:2 muon:2bw:1:2 "
check "quickstart: an export folder per point" test "$(flag_of --export < "$work/qs.out" | sort -u | wc -l)" -eq 6
sampled=$(sed -n 's/.*sample --checkpoint \([^ ]*\) .*/\1/p' "$root/scripts/run.sh")
check "quickstart: run.sh samples a model the grid exports ($sampled)" grep -q -- "--export $sampled\( \|\$\)" "$work/qs.out"

# ---------------------------------------------------------------- the main job's summary
# Hand-computed: adamw gap 5.5 - 4.75 = +0.75, with EF 5.05 - 4.75 = +0.30, recovery 1 - 0.30/0.75
# = 60%; muon gap 4.65 - 4.50 = +0.15, with EF +0.10, recovery 33%; 0.75 / 0.15 = 5.0x. A failed
# run is not counted (muon's 2bw+ef row below it would otherwise replace the 4.60).
cat > "$work/results.csv" <<'CSV'
point,optimizer,delay,final_train_loss,final_val_loss,best_val_loss,tokens,seconds,status,exit_status
adamw_1f1b,adamw,1f1b,4.8,4.75,4.75,100,1.0,done,0
adamw_2bw,adamw,2bw,5.6,5.5,5.5,100,1.0,done,0
adamw_2bw+ef,adamw,2bw+ef,5.1,5.05,5.05,100,1.0,done,0
muon_1f1b,muon,1f1b,4.6,4.5,4.5,100,1.0,done,0
muon_2bw,muon,2bw,4.7,4.65,4.65,100,1.0,done,0
muon_2bw+ef,muon,2bw+ef,4.7,4.6,4.6,100,1.0,done,0
muon_2bw+ef,muon,2bw+ef,,9.9,,,,failed,1
CSV
awk -F, -f "$root/scripts/gap_summary.awk" "$work/results.csv" > "$work/summary.out" 2>&1
row() { awk -v o="$1" '$1 == o { $1 = ""; print substr($0, 2) }' "$work/summary.out"; }
check "summary: adamw ($(row adamw))" test "$(row adamw)" = "4.7500 5.5000 5.0500 +0.7500 +0.3000 60%"
check "summary: muon ($(row muon))" test "$(row muon)" = "4.5000 4.6500 4.6000 +0.1500 +0.1000 33%"
check "summary: ratio of the gaps" grep -qx "adamw's gap is 5.0x muon's" "$work/summary.out"
# A missing 1F1B run is named, not computed from an empty field.
grep -v '^muon_1f1b' "$work/results.csv" > "$work/missing.csv"
awk -F, -f "$root/scripts/gap_summary.awk" "$work/missing.csv" > "$work/missing.out" 2>&1
check "summary: a missing run is named" grep -qx "muon       (runs missing)" "$work/missing.out"
check "summary: no ratio to a missing gap" test -z "$(grep "gap is" "$work/missing.out")"
finish
