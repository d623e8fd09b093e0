#!/usr/bin/env bash
# What every study's run.sh does before and after its sweeps (experiments/claim_10k, experiments/moe):
#
#   bash experiments/study.sh start NAME NOBUBBLE   the corpus prepared, the points saved in results/NAME
#                                                   restored into runs/NAME, and this machine's CPU, flags
#                                                   and the binary's hash added to runs/NAME/machines.log
#   bash experiments/study.sh save NAME NOBUBBLE    each finished point evaluated on the whole validation
#                                                   split (evaluate_whole.sh), the points saved into
#                                                   results/NAME (scripts/results.sh), with the sweep's log,
#                                                   machines.log and, where the study has one, rates.json;
#                                                   then RESULTS.md's claims table recomputed from results/
#                                                   (experiments/claims.py), to be committed with them
#
# The sweep's log and machines.log together say which machine ran which point.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 3 ] || { echo "usage: bash experiments/study.sh start|save NAME NOBUBBLE" >&2; exit 2; }
action=$1 name=$2 bin=$3
case "$action" in
  start)
    [ -f data/bible-gcide/manifest.json ] || "$bin" prepare --corpus bible+gcide
    [ -d "results/$name/runs" ] && bash scripts/results.sh restore "$name"
    mkdir -p "runs/$name"
    printf '%s start %s | %s | binary %s\n' "$(date +%s)" "$(lscpu | sed -n 's/^Model name: *//p')" \
      "$(grep -o 'avx512_bf16\|amx_bf16\|avx512f \|avx2 ' /proc/cpuinfo | sort -u | tr -d ' ' | tr '\n' ' ')" \
      "$(sha256sum "$bin" | cut -c1-16)" >> "runs/$name/machines.log"
    ;;
  save)
    bash experiments/evaluate_whole.sh "$name" "$bin"
    bash scripts/results.sh save "$name"
    for f in sweep.log machines.log rates.json; do
      if [ -f "runs/$name/$f" ]; then cp "runs/$name/$f" "results/$name/"; fi
    done
    # a phase that completes changes the claims table; tests/cli_claims.sh fails until it is rewritten.
    # Never fatal: the results are saved by now, and a sweep's run.sh goes on to its next phase.
    python3 experiments/claims.py --write RESULTS.md \
      || echo "study.sh: RESULTS.md's claims table was not rewritten; run python3 experiments/claims.py --write RESULTS.md" >&2
    ;;
  *) echo "study.sh: '$action': expected start or save" >&2; exit 2 ;;
esac
