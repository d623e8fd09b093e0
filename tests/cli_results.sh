#!/usr/bin/env bash
# scripts/results.sh: a sweep's complete points saved into results/NAME and restored into a new
# checkout's empty runs/NAME; the sweep then runs only the points not saved, the report reads the
# restored runs, the saved metrics are thinned as documented (validation lines, the first and the
# last, one training line in ceil(steps / 100)), interrupted points are not saved, and bad names are
# refused.
set -u
bin=${1:?usage: cli_results.sh path/to/nobubble}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
source "$(dirname "$0")/support/cli_harness.sh"
script=$(cd "$(dirname "$0")/.." && pwd)/scripts/results.sh

small_corpus "$bin" "$work/data" && ok || fail "prepare small text"
export NB_RUNS_ROOT=$work/runs NB_RESULTS_ROOT=$work/results
results() { bash "$script" "$@"; }

# Three points, 250 steps each (eval every 100): thinning keeps one training line in 3.
cat > "$work/g.grid" <<EOF
fixed: --data $work/data --set n_layers=1 --set context=16 --batch 2 --eval-batches 1 --steps 250 --eval-every 100
axis delay: sync 2bw
axis seed: 1 2
skip delay=2bw seed=2
EOF
"$bin" sweep "$work/g.grid" --out "$work/runs/g" --jobs 2 --quiet > "$work/sweep1.log" 2>&1 \
  && ok || fail "first sweep: $(cat "$work/sweep1.log")"
# An interrupted point (no summary.json): never saved.
mkdir -p "$work/runs/g/runs/broken" && echo "train --steps 1" > "$work/runs/g/runs/broken/command.txt"

results save g > "$work/save.log" 2>&1 && grep -q "saved 3 complete points" "$work/save.log" && ok \
  || fail "save: $(cat "$work/save.log")"
check "interrupted point not saved" test ! -e "$work/results/g/runs/broken"
check "results.csv saved" test -f "$work/results/g/results.csv"
p=$work/results/g/runs/sync_1
check "command.txt and summary.json saved as they are" cmp -s "$p/command.txt" "$work/runs/g/runs/sync_1/command.txt"
check "summary.json saved as it is" cmp -s "$p/summary.json" "$work/runs/g/runs/sync_1/summary.json"
check "no checkpoints, no train.log" test ! -e "$p/train.log" -a ! -e "$p/checkpoints"
# Thinning: every validation line, first and last, steps divisible by 3; nothing else.
full=$work/runs/g/runs/sync_1/metrics.jsonl
want=$(awk '{ match($0, /"step": *[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7) + 0 }
            NR == 1 || /"val_loss"/ || s % 3 == 0 { print } END { }' "$full"; tail -1 "$full")
want=$(printf '%s\n' "$want" | awk '!seen[$0]++')
got=$(cat "$p/metrics.jsonl")
check "thinned metrics: validation lines, first, last, every 3rd step" test "$got" = "$want"
nval_full=$(grep -c '"val_loss"' "$full"); nval_kept=$(grep -c '"val_loss"' "$p/metrics.jsonl")
check "every validation line kept ($nval_kept of $nval_full)" test "$nval_full" -ge 3 -a "$nval_kept" = "$nval_full"
nlines=$(wc -l < "$p/metrics.jsonl")
check "thinned to about a third ($nlines of 250 lines)" test "$nlines" -ge 84 -a "$nlines" -le 90

# A new checkout: no runs at all. Restore, then the sweep has nothing to run.
mv "$work/runs" "$work/runs.old"
results restore g > "$work/restore.log" 2>&1 && grep -q "restored 3 points" "$work/restore.log" && ok \
  || fail "restore: $(cat "$work/restore.log")"
"$bin" sweep "$work/g.grid" --out "$work/runs/g" --jobs 2 --quiet > "$work/sweep2.log" 2>&1 \
  && grep -q "3 of 3 points complete (0 run now)" "$work/sweep2.log" && ok \
  || fail "sweep after restore ran points again: $(cat "$work/sweep2.log")"
check "restored final loss equals the original" cmp -s "$work/runs/g/runs/2bw_1/summary.json" "$work/runs.old/g/runs/2bw_1/summary.json"
"$bin" report "$work/runs/g" > "$work/report.log" 2>&1 && ok || fail "report of restored runs: $(cat "$work/report.log")"

# A grid grown by one point: only that one runs, the restored ones count as complete.
sed -i 's/^skip delay=2bw seed=2$//' "$work/g.grid"
"$bin" sweep "$work/g.grid" --out "$work/runs/g" --jobs 2 --quiet > "$work/sweep3.log" 2>&1 \
  && grep -q "4 of 4 points complete (1 run now)" "$work/sweep3.log" && ok \
  || fail "grown grid: $(cat "$work/sweep3.log")"

# Restore never touches a complete run; it replaces an interrupted one.
echo '{"tampered": 1}' > "$work/runs/g/runs/sync_1/marker.json"
rm "$work/runs/g/runs/sync_2/summary.json"
results restore g > "$work/restore2.log" 2>&1 && grep -q "restored 1 points" "$work/restore2.log" && ok \
  || fail "second restore: $(cat "$work/restore2.log")"
check "complete run left as it was" test -f "$work/runs/g/runs/sync_1/marker.json"
check "interrupted run replaced" test -f "$work/runs/g/runs/sync_2/summary.json"

# A sweep of another phase's grid lists only its own points in results.csv: saving it keeps every point the
# saved table has done (a row the sweep has as not done is the saved one; a row it lacks goes after its rows).
csv=$work/runs/g/results.csv
cp "$work/results/g/results.csv" "$work/csv.before"
col=$(head -n 1 "$csv" | tr ',' '\n' | grep -nx status | cut -d: -f1)
awk -F, -v OFS=, -v c="$col" 'NR == 1 || $1 == "sync_1" { print; next } $1 == "sync_2" { $c = "interrupted"; print }' \
  "$csv" > "$csv.new" && mv "$csv.new" "$csv"
results save g > "$work/save3.log" 2>&1 && ok || fail "save of a smaller table: $(cat "$work/save3.log")"
for p in sync_1 sync_2 2bw_1; do
  check "results.csv keeps $p done" \
    test "$(awk -F, -v c="$col" -v p=$p '$1 == p && $c == "done"' "$work/results/g/results.csv" | wc -l)" = 1
done
check "the saved rows unchanged, each once" \
  test "$(sort "$work/results/g/results.csv" | md5sum)" = "$(sort "$work/csv.before" | md5sum)"
check "the sweep's order first, the kept rows after" \
  test "$(cut -d, -f1 "$work/results/g/results.csv" | tr '\n' ' ')" = "point sync_1 sync_2 $(cut -d, -f1 "$work/csv.before" | grep -vx 'point\|sync_1\|sync_2' | tr '\n' ' ')"
# a table of other columns (another grid) replaces the saved one, and says so
cp "$work/runs/g/results.csv" "$work/csv.keep"
sed -i '1s/^point,/name,/' "$csv"
results save g > "$work/save4.log" 2>&1 && grep -q "other columns" "$work/save4.log" && head -n 1 "$work/results/g/results.csv" | grep -q '^name,' \
  && ok || fail "a table of other columns: $(cat "$work/save4.log")"
cp "$work/csv.keep" "$csv"

expect_error "a name with a slash" "plain folder name" results save ../g
expect_error "nothing saved under a name" "nothing saved" results restore nosuch
expect_error "no runs to save" "nothing to save" results save nosuch
expect_error "an unknown action" "usage" results copy g
finish
