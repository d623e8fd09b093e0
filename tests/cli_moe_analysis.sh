#!/usr/bin/env bash
# experiments/moe/tune.py and analyze.py, the MoE study's rate tuning and pre-registered analysis, on
# hand-made results trees whose answers are worked out here by hand:
# - tune.py picks the lowest 3-seed mean; a best at the grid's edge extends the grid by a factor 2 on that
#   side and holds the delays back until the new rate is measured; then 2BW and 2BW + EF run at the pick only;
# - analyze.py's paired gap (per-seed 2BW - sync = 0.05 + e_s, e = (-0.01, 0, 0.01): mean 0.05, sd 0.01,
#   95% interval 0.05 +- 4.302653 x 0.01 / sqrt(3) = [+0.0252, +0.0748]), EF's gap (0.01 + e_s: within
#   noise) and share ((0.05 - 0.01) / 0.05 = 80%), and MoE minus dense (0.02 + (-0.02, 0, 0.02):
#   [-0.0297, +0.0697], within noise).
# ($1, the nobubble binary, is not used: ctest passes it to every cli test.)
set -u
source "$(dirname "$0")/support/cli_harness.sh"
here=$(dirname "$0")/../experiments/moe
command -v python3 > /dev/null || { echo "python3 is missing"; exit 1; }

point() {  # length seed model opt lr delay loss
  local d="$work/res/moe/runs/$1_$2_$3_$4_$5_$6"
  mkdir -p "$d"
  printf '{"point": "%s", "val_loss": %s}\n' "$(basename "$d")" "$7" > "$d/final_eval.json"
}
e=(0 -0.01 0 0.01)
# ---- tuning: every configuration's best is 4e-3, except tiny adamw's, at 2e-3, the grid's low edge
for s in 1 2 3; do
  for model in tiny moe-tiny; do
    for opt in adamw muon; do
      for lr in 2e-3 4e-3 8e-3 1.6e-2; do
        loss=$(awk -v lr=$lr -v s=$s 'BEGIN { d = log(lr / 4e-3) / log(2); printf "%.6f", 4.0 + d * d / 100 + s / 1000 }')
        [ "$model/$opt/$lr" = tiny/adamw/2e-3 ] && loss=3.9
        point 1000 $s $model $opt $lr sync "$loss"
      done
    done
  done
done
python3 "$here/tune.py" 1000 --runs "$work/res/moe" > "$work/g1.txt" || fail "tune.py: $(tail -3 "$work/g1.txt")"
check "an edge best extends the grid down (1e-3 runs for tiny adamw)" \
  grep -qx "skip length=1000 model=tiny optimizer=adamw lr=5e-4,3.2e-2,6.4e-2" "$work/g1.txt"
check "and holds its delays back until 1e-3 is measured" \
  grep -qx "skip length=1000 model=tiny optimizer=adamw lr=1e-3,2e-3,4e-3,8e-3,1.6e-2 delay=2bw,2bw+ef" "$work/g1.txt"
check "an inside best runs the delays at it alone" \
  grep -qx "skip length=1000 model=moe-tiny optimizer=muon lr=2e-3,8e-3,1.6e-2 delay=2bw,2bw+ef" "$work/g1.txt"
check "the 3,000-step runs wait" grep -qx "skip length=3000" "$work/g1.txt"
python3 "$here/tune.py" 1000 --runs "$work/res/moe" --check > /dev/null 2>&1
[ $? -eq 3 ] && ok || fail "--check: expected exit 3 while a rate is pending"
for s in 1 2 3; do point 1000 $s tiny adamw 1e-3 sync 3.95; done
python3 "$here/tune.py" 1000 --runs "$work/res/moe" > "$work/g2.txt"
check "measured, 2e-3 is tiny adamw's rate" \
  grep -qx "skip length=1000 model=tiny optimizer=adamw lr=1e-3,4e-3,8e-3,1.6e-2 delay=2bw,2bw+ef" "$work/g2.txt"
python3 -c 'import json,sys; r = json.load(open(sys.argv[1]))["1000"]; sys.exit(0 if r["tiny"]["adamw"]["chosen"] == "2e-3" and r["moe-tiny"]["adamw"]["chosen"] == "4e-3" else 1)' \
  "$work/res/moe/rates.json" && ok || fail "rates.json: $(cat "$work/res/moe/rates.json")"
python3 -c 'import json,sys; r = json.load(open(sys.argv[1]))["3000"]["tiny"]["adamw"]; sys.exit(0 if r["chosen"] is None else 1)' \
  "$work/res/moe/rates.json" && ok || fail "rates.json written by the 1,000-step phase keeps the 3,000-step phase's state"

# ---- the analysis: gaps at the chosen rates
ed=(0 0.01 0 -0.01)
for s in 1 2 3; do
  for model in tiny moe-tiny; do
    for opt in adamw muon; do
      lr=4e-3; [ "$model/$opt" = tiny/adamw ] && lr=2e-3
      base=$(python3 -c "import json; print(json.load(open('$work/res/moe/runs/1000_${s}_${model}_${opt}_${lr}_sync/final_eval.json'))['val_loss'])")
      if [ $model = moe-tiny ]; then gap=$(awk -v e=${e[$s]} 'BEGIN { printf "%.6f", 0.05 + e }'); ef=$(awk -v e=${e[$s]} 'BEGIN { printf "%.6f", 0.01 + e }')
      else gap=$(awk -v e=${ed[$s]} 'BEGIN { printf "%.6f", 0.03 + e }'); ef=$gap; fi
      point 1000 $s $model $opt $lr 2bw "$(awk -v b=$base -v g=$gap 'BEGIN { printf "%.6f", b + g }')"
      point 1000 $s $model $opt $lr 2bw+ef "$(awk -v b=$base -v g=$ef 'BEGIN { printf "%.6f", b + g }')"
    done
  done
done
python3 "$here/analyze.py" --results "$work/res" --partial > "$work/a.out" 2> "$work/a.err" || fail "analyze.py: $(cat "$work/a.err")"
row=$(grep "^| moe-tiny | muon | 4e-3 | 3 |" "$work/a.out")
check "the paired gap and its interval" grep -q "+0.0500 \[+0.0252, +0.0748\]" <<< "$row"
check "EF's gap within noise" grep -q "+0.0100 \[-0.0148, +0.0348\] (within noise)" <<< "$row"
check "EF's share" grep -q "| 80% |" <<< "$row"
check "MoE minus dense" grep -q "^| muon | 3 | +0.0200 \[-0.0297, +0.0697\] (within noise) |" "$work/a.out"
check "the 3,000-step tables wait" grep -q "^| tiny | adamw | pending |" "$work/a.out"
python3 "$here/analyze.py" --results "$work/res" > /dev/null 2>&1 && ok || fail "analyze.py without --partial on complete 1000-step tables"
finish
