#!/usr/bin/env bash
# nobubble report on one run's folder (train --out): the page's results row carries exactly the numbers
# of summary.json and metrics.jsonl (recomputed here from the files: the best validation loss, the
# last line's tokens and step), the loss chart one dot per metrics line plus one per evaluation, the
# summary verbatim; folders with nothing to report are refused naming what was expected; the page
# renders in headless chromium when it is installed (cli_sweep.sh requires it).
set -u
bin=${1:?usage: cli_report_run.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
json_field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1" | head -1; }
small_corpus "$bin" "$work/data" || fail "prepare"
"$bin" train --data "$work/data" --set n_layers=2 --set context=16 --batch 2 --threads 1 --steps 7 --eval-every 3 \
  --delay 2bw --ef 0.5 --quiet --out "$work/run" > /dev/null 2>&1 || fail "train"

"$bin" report "$work/run" > "$work/log" 2>&1 && ok || fail "report of a run: $(cat "$work/log")"
html=$work/run/report.html
check "the page is written" test -s "$html"
s=$work/run/summary.json m=$work/run/metrics.jsonl
best=$(sed -n 's/.*"val_loss": \([^,}]*\).*/\1/p' "$m" | sort -g | head -1)
evals=$(grep -c '"val_loss"' "$m")
lines=$(wc -l < "$m")
tokens=$(tail -1 "$m" | sed -n 's/.*"tokens": \([0-9]*\).*/\1/p')
want=$(printf '<tr><td>adamw</td><td>2bw</td><td>yes</td><td>7</td><td>%.4f</td><td>%.4f</td><td>%.4f</td><td>%s</td><td>%.3f</td><td>%.1f</td></tr>' \
  "$(json_field "$s" final_train_loss)" "$(json_field "$s" final_val_loss)" "$best" "$tokens" "$(json_field "$s" seconds)" \
  "$(json_field "$s" tokens_per_s)")
row=$(grep '^<tr><td>adamw' "$html")
[ "$row" = "$want" ] && ok || fail "results row: $row, want $want"
[ "$evals" -eq 3 ] && [ "$lines" -eq 7 ] && ok || fail "$lines metrics lines and $evals evaluations, expected 7 and 3"
dots=$(sed -n '/id="run-loss"/,/<\/svg>/p' "$html" | grep -o '<circle' | wc -l)
[ "$dots" -eq $((lines + evals)) ] && ok || fail "the loss chart has $dots dots, expected $lines + $evals"
for id in run-table run-loss run-time summary; do
  grep -q "id=\"$id\"" "$html" && ok || fail "the page lacks #$id"
done
grep -q "&quot;final_train_loss&quot;" "$html" && ok || fail "the summary is not on the page"

# --out elsewhere; nothing to report; a summary without metrics
"$bin" report "$work/run" --out "$work/page.html" > /dev/null 2>&1 && test -s "$work/page.html" && ok || fail "report --out"
mkdir -p "$work/empty"
expect_error "an empty folder" "no results.csv (a sweep's folder) and no summary.json (a run's folder" "$bin" report "$work/empty"
mkdir -p "$work/half" && cp "$s" "$work/half/"
expect_error "a summary without metrics" "half/metrics.jsonl" "$bin" report "$work/half"
check "a refused report writes nothing" test ! -e "$work/half/report.html"

if render_dom "$html"; then
  dom_has_ids run-table run-loss run-time summary
fi
finish
