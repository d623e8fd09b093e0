#!/usr/bin/env bash
# Malformed experiment tables are refused, naming the file, line and value, never read into a wrong result:
# - nobubble report: a results.csv row whose status is not one the sweep writes (a done run would drop out of
#   every mean), or whose labels are not its point's (one run's files in another configuration's cell);
# - experiments/claims.py: a done row with a NaN loss (counted, or silently dropped), a status it does not
#   know, a point listed twice, a row with a field missing, labels not the point's;
# - nobubble sweep: a when/skip line naming one axis twice (it matches no point: silently ignored);
# - the studies' scripts (experiments/studylib.py): a final_eval.json without a finite val_loss.
# $1: the nobubble binary.
set -u
source "$(dirname "$0")/support/cli_harness.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
nb=$1
claims=$root/experiments/claims.py

# ---- a small sweep folder from the committed scaling study: 300-step AdamW at 2e-3, sync and 2BW, 3 seeds
src=$root/results/scaling
mkdir -p "$work/s/runs"
head -n 1 "$src/results.csv" > "$work/s/results.csv"
grep -E '^300_adamw_2e-3_(sync|2bw)_[123],' "$src/results.csv" >> "$work/s/results.csv"
for p in $(tail -n +2 "$work/s/results.csv" | cut -d, -f1); do cp -r "$src/runs/$p" "$work/s/runs/"; done
check "the small sweep folder has 6 rows" test "$(tail -n +2 "$work/s/results.csv" | wc -l)" -eq 6
check "the intact folder reports" "$nb" report "$work/s" --out "$work/ok.html" > /dev/null

variant() {  # NAME SED: a copy of the folder with results.csv edited
  rm -rf "$work/$1"; cp -r "$work/s" "$work/$1"; sed -i "$2" "$work/$1/results.csv"
}
variant typo 's/^\(300_adamw_2e-3_2bw_1,.*\),done,0$/\1,Done,0/'
expect_error "report: an unknown status" "results.csv:[0-9]*: point '300_adamw_2e-3_2bw_1': status 'Done', expected done" \
  "$nb" report "$work/typo" --out "$work/x.html"
variant swap 's/^300_adamw_2e-3_2bw_1,300,adamw,2e-3,2bw,1,/300_adamw_2e-3_2bw_1,300,adamw,2e-3,sync,1,/'
expect_error "report: labels that are not the point's" "point '300_adamw_2e-3_2bw_1' has the labels of '300_adamw_2e-3_sync_1'" \
  "$nb" report "$work/swap" --out "$work/x.html"

# ---- claims.py on a tree holding that table as results/scaling
claims_on() {  # FOLDER: claims.py with FOLDER as the scaling study
  rm -rf "$work/res"; mkdir -p "$work/res"; cp -r "$1" "$work/res/scaling"
  python3 "$claims" --results "$work/res" > /dev/null
}
check "claims.py: the intact table" claims_on "$work/s"
variant nan 's/^\(300_adamw_2e-3_2bw_1,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*\),[^,]*,/\1,NaN,/'
expect_error "claims.py: a done row with a NaN loss" "scaling/results.csv:[0-9]*: point '300_adamw_2e-3_2bw_1' is done but its final_val_loss 'NaN'" \
  claims_on "$work/nan"
variant nanl 's/^\(300_adamw_2e-3_2bw_1,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*\),[^,]*,/\1,nan,/'
expect_error "claims.py: a done row with a nan loss" "final_val_loss 'nan' is not a finite number" claims_on "$work/nanl"
expect_error "claims.py: an unknown status" "point '300_adamw_2e-3_2bw_1': status 'Done'" claims_on "$work/typo"
expect_error "claims.py: labels that are not the point's" "has the labels of '300_adamw_2e-3_sync_1'" claims_on "$work/swap"
variant dup '$p'
expect_error "claims.py: a point twice" "is listed twice" claims_on "$work/dup"
variant short 's/^\(300_adamw_2e-3_sync_1,300,adamw,2e-3,sync,1,\)[^,]*,/\1/'
expect_error "claims.py: a row with a field missing" "results.csv:[0-9]*: 12 fields, expected 13" claims_on "$work/short"
# a failed run leaves a cell two seeds: a row whose text says "3 paired seeds" refuses to state it
variant failed 's/^300_adamw_2e-3_2bw_1,300,adamw,2e-3,2bw,1,.*$/300_adamw_2e-3_2bw_1,300,adamw,2e-3,2bw,1,,,,,,failed,1/'
expect_error "claims.py: a row that says 3 paired seeds over a cell of 2" "says 3 paired seeds, but its cells were computed on 2" \
  claims_on "$work/failed"

# ---- a when line naming one axis twice
printf 'axis a: 1 2\naxis b: x y\nwhen a=1 a=2: --steps 3\n' > "$work/g.txt"
expect_error "sweep: when naming an axis twice" "g.txt:3: when: axis a is named in two conditions" \
  "$nb" sweep "$work/g.txt" --out "$work/sw" --dry-run
printf 'axis a: 1 2\naxis b: x y\nskip b=x a=1 a=2\n' > "$work/g.txt"
expect_error "sweep: skip naming an axis twice" "g.txt:3: skip: axis a is named in two conditions" \
  "$nb" sweep "$work/g.txt" --out "$work/sw" --dry-run

# ---- a point's final_eval.json (the pre-registered studies' outcome) without a finite val_loss: the studies'
# scripts stop naming it (a NaN entered a mean, a tuned rate and the next phase's grid)
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$work/fe"
for v in '{"val_loss": NaN}' '{"val_loss": "3.2"}' '{"loss": 3.2}' '{"val_loss": 3.'; do
  printf '%s\n' "$v" > "$work/fe/final_eval.json"
  expect_error "final_eval.json $v" "fe/final_eval.json: .*expected" \
    python3 -c "import sys; sys.path.insert(0, '$here/experiments'); import studylib; studylib.final_eval_loss('$work/fe/final_eval.json')"
done
printf '{"val_loss": 3.25}\n' > "$work/fe/final_eval.json"
[ "$(python3 -c "import sys; sys.path.insert(0, '$here/experiments'); import studylib; print(studylib.final_eval_loss('$work/fe/final_eval.json'))")" = 3.25 ] \
  && ok || fail "a finite val_loss is read"
finish
