#!/usr/bin/env bash
# A study's finished runs, kept in the repository: a new checkout (a new machine, a new session)
# otherwise starts with an empty runs/ (it is not tracked), and a sweep of many hours would start over.
#
#   bash scripts/results.sh save NAME      runs/NAME -> results/NAME: every complete point's command.txt
#                                          and summary.json (and final_eval.json where a study wrote one),
#                                          its metrics.jsonl thinned (below), and results.csv (merged:
#                                          a point done in the saved table stays); points already
#                                          saved are refreshed
#   bash scripts/results.sh restore NAME   results/NAME -> runs/NAME: every saved point that runs/NAME
#                                          lacks or has not completed (an interrupted point's folder is
#                                          replaced; a complete one is never touched), and results.csv
#                                          where runs/NAME has none
#
# After `restore`, `nobubble sweep GRID --out runs/NAME` counts the saved points as complete (complete =
# summary.json plus the same command.txt, src/experiments/sweep.c) and runs only the rest, and
# `nobubble report runs/NAME` draws every table from them. Checkpoints, train.log and Hugging Face
# exports stay out.
#
# Thinning: metrics.jsonl has one line per step (1.5 MB for 10,000 steps). The saved copy keeps every
# line with a validation loss, the first and the last line, and one training line in every
# ceil(steps / 100); the report's tables read only summary.json and the validation lines, its curves get
# about 100 training points per run.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: bash scripts/results.sh save|restore NAME (runs/NAME <-> results/NAME)" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1 name=$2
case "$name" in ''|*/*|.*) echo "results.sh: NAME '$name' must be a plain folder name, e.g. scaling" >&2; exit 2 ;; esac
# NB_RUNS_ROOT and NB_RESULTS_ROOT move the two folders (the tests use them).
runs=${NB_RUNS_ROOT:-runs}/$name saved=${NB_RESULTS_ROOT:-results}/$name

complete() { [ -f "$1/summary.json" ] && [ -f "$1/command.txt" ] && [ -f "$1/metrics.jsonl" ]; }

thin() {  # metrics.jsonl on stdin -> the kept lines on stdout
  awk 'function step_of(l,  s) { if (!match(l, /"step": *[0-9]+/)) return ""; s = substr(l, RSTART, RLENGTH); sub(/.*: */, "", s); return s }
       { line[NR] = $0 }
       END {
         if (NR == 0) exit
         every = int((step_of(line[NR]) + 99) / 100); if (every < 1) every = 1
         for (i = 1; i <= NR; i++) {
           s = step_of(line[i])
           if (i == 1 || i == NR || line[i] ~ /"val_loss"/ || (s != "" && s % every == 0)) print line[i]
         }
       }'
}

# results.csv lists the points of the grid the sweep last ran: a study that sweeps one phase's grid at a
# time (experiments/moe/run.sh) once saved a table without the points of its other phases. A saved row
# whose point is done therefore stays, in place of the sweep's row for that point where the sweep's is
# not done, else after the sweep's rows; a table whose columns differ (another grid) is replaced, said.
merge_csv() {  # FROM INTO
  if [ ! -f "$2" ] || ! cmp -s <(head -n 1 "$1") <(head -n 1 "$2"); then
    [ -f "$2" ] && echo "results.sh: $2 has other columns than $1: replaced by it" >&2
    cp "$1" "$2"
    return
  fi
  awk -F, 'FNR == 1 { for (i = 1; i <= NF; i++) if ($i == "status") col = i; if (FILENAME == ARGV[2]) print; next }
           FILENAME == ARGV[1] { if (col && $col == "done") { kept[$1] = $0; order[++n] = $1 }; next }
           { if (col && $col != "done" && ($1 in kept)) { print kept[$1]; delete kept[$1] }
             else { print; if (col && $col == "done") delete kept[$1] } }
           END { for (i = 1; i <= n; i++) if (order[i] in kept) print kept[order[i]] }' "$2" "$1" > "$2.tmp"
  mv "$2.tmp" "$2"
}

case "$action" in
  save)
    [ -d "$runs/runs" ] || { echo "results.sh: $runs/runs does not exist: nothing to save (run the sweep with --out $runs)" >&2; exit 1; }
    n=0
    for dir in "$runs"/runs/*/; do
      dir=${dir%/}; point=$(basename "$dir")
      complete "$dir" || continue
      mkdir -p "$saved/runs/$point"
      cp "$dir/command.txt" "$dir/summary.json" "$saved/runs/$point/"
      # A study's own measurement of the final model (experiments/evaluate_whole.sh), where there is one.
      [ -f "$dir/final_eval.json" ] && cp "$dir/final_eval.json" "$saved/runs/$point/"
      thin < "$dir/metrics.jsonl" > "$saved/runs/$point/metrics.jsonl.tmp"
      mv "$saved/runs/$point/metrics.jsonl.tmp" "$saved/runs/$point/metrics.jsonl"
      n=$((n + 1))
    done
    [ -f "$runs/results.csv" ] && merge_csv "$runs/results.csv" "$saved/results.csv"
    echo "results.sh: saved $n complete points of $runs into $saved"
    ;;
  restore)
    [ -d "$saved/runs" ] || { echo "results.sh: $saved/runs does not exist: nothing saved under the name '$name'" >&2; exit 1; }
    n=0
    for dir in "$saved"/runs/*/; do
      dir=${dir%/}; point=$(basename "$dir")
      complete "$dir" || { echo "results.sh: $dir is incomplete (needs command.txt, summary.json, metrics.jsonl); skipped" >&2; continue; }
      target=$runs/runs/$point
      complete "$target" && continue
      if [ -e "$target" ]; then
        # An interrupted point of an earlier sweep here: the saved, complete run replaces it. Only a folder
        # the sweep made (command.txt) is removed, as the sweep itself would.
        [ -f "$target/command.txt" ] || { echo "results.sh: $target exists and is not a sweep's run folder; left alone" >&2; continue; }
        rm -rf "$target"
      fi
      mkdir -p "$target"
      cp "$dir/command.txt" "$dir/summary.json" "$dir/metrics.jsonl" "$target/"
      [ -f "$dir/final_eval.json" ] && cp "$dir/final_eval.json" "$target/"
      n=$((n + 1))
    done
    [ -f "$runs/results.csv" ] || { [ -f "$saved/results.csv" ] && cp "$saved/results.csv" "$runs/results.csv"; }
    echo "results.sh: restored $n points from $saved into $runs (the sweep resumes after them)"
    ;;
  *) usage ;;
esac
