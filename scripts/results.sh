#!/usr/bin/env bash
# A study's finished runs, kept in the repository: a new checkout (a new machine, a new session)
# otherwise starts with an empty runs/ (it is not tracked), and a sweep of many hours would start over.
#
#   bash scripts/results.sh save NAME      runs/NAME -> results/NAME: every complete point's command.txt
#                                          and summary.json (and final_eval.json where a study wrote one),
#                                          its metrics.jsonl thinned (below), and results.csv; points
#                                          already saved are refreshed
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
    [ -f "$runs/results.csv" ] && cp "$runs/results.csv" "$saved/results.csv"
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
