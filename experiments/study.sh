#!/usr/bin/env bash
# What every study's run.sh does before, between and after its sweeps (experiments/claim_10k, moe, size_axis):
#
#   bash experiments/study.sh start NAME NOBUBBLE   the corpus prepared, the points saved in results/NAME
#                                                   restored into runs/NAME, and this machine's CPU, flags
#                                                   and the binary's hash added to runs/NAME/machines.log
#   bash experiments/study.sh save NAME NOBUBBLE    each finished point evaluated on the whole validation
#                                                   split (evaluate_whole.sh), the points saved into
#                                                   results/NAME (scripts/results.sh), the sweep's log and
#                                                   machines.log merged into results/NAME's (every line of
#                                                   both, in time order: `start` merges the other way) and,
#                                                   where the study has one, rates.json;
#                                                   then RESULTS.md's claims table recomputed from results/
#                                                   (experiments/claims.py), to be committed with them
#
#   bash experiments/study.sh phases NAME NOBUBBLE JOBS SAVE_EVERY PHASE...
#                                                   a study that tunes as it goes: per phase, its tune.py's
#                                                   grid swept and saved until the grid stops changing
#   bash experiments/study.sh merge-log FROM INTO   that merge alone (tests/cli_study_logs.sh)
#   bash experiments/study.sh binary COMMIT ARTIFACT OUT [CMAKE_OPTION...]
#                                                   a study's pinned binary, where OUT is missing: COMMIT
#                                                   checked out in a worktree (/tmp/nobubble-COMMIT), its own
#                                                   scripts/setup.sh (the libraries that commit needs), a
#                                                   Release build of the CLI with the options the study's
#                                                   README names, build/ARTIFACT copied to OUT
#
# The sweep's log and machines.log together say which machine ran which point.
set -euo pipefail
cd "$(dirname "$0")/.."

# Every line of two logs (TIME EVENT ...), each once, in time order (stable within a second): a log is
# history, so neither side may overwrite the other (a fresh runs/ on a new machine has only its own lines).
merge_log() {  # FROM INTO
  [ -f "$1" ] || return 0
  [ -f "$2" ] || : > "$2"
  local tmp="$2.merge.$$"
  cat "$2" "$1" | awk '!seen[$0]++' | sort -s -n -k1,1 > "$tmp"
  mv "$tmp" "$2"
}
if [ "${1:-}" = merge-log ] && [ $# -eq 3 ]; then merge_log "$2" "$3"; exit 0; fi  # what start and save do, alone

# A machine of a new session has none of the studies' binaries: each run.sh builds its own, from the
# commit its plan pins, so that a later change to the engine cannot move a result.
build_binary() {  # COMMIT ARTIFACT OUT [CMAKE_OPTION...]
  local commit=$1 artifact=$2 out=$3; shift 3
  [ -x "$out" ] && return 0
  local tree=/tmp/nobubble-$commit
  if [ ! -d "$tree" ]; then
    git worktree prune
    git worktree add --detach "$tree" "$commit" > /dev/null || { echo "study.sh: cannot check out $commit" >&2; return 1; }
  fi
  bash "$tree/scripts/setup.sh"
  echo "study.sh: building $out from $commit ($tree/build/build.log)" >&2
  mkdir -p "$tree/build" "$(dirname "$out")"
  if ! { cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=Release "$@" \
         && cmake --build "$tree/build" --target nobubble_cli -j"$(nproc)"; } > "$tree/build/build.log" 2>&1; then
    tail -n 30 "$tree/build/build.log" >&2
    echo "study.sh: the build of $commit failed (log: $tree/build/build.log)" >&2
    return 1
  fi
  cp "$tree/build/$artifact" "$out.tmp" && mv "$out.tmp" "$out"
}
if [ "${1:-}" = binary ] && [ $# -ge 4 ]; then shift; build_binary "$@"; exit $?; fi
usage="usage: bash experiments/study.sh start|save NAME NOBUBBLE | phases NAME NOBUBBLE JOBS SAVE_EVERY PHASE... | merge-log FROM INTO | binary COMMIT ARTIFACT OUT [CMAKE_OPTION...]"

start_study() {  # NAME NOBUBBLE
  local name=$1 bin=$2 f
  [ -f data/bible-gcide/manifest.json ] || "$bin" prepare --corpus bible+gcide
  [ -d "results/$name/runs" ] && bash scripts/results.sh restore "$name"
  mkdir -p "runs/$name"
  for f in sweep.log machines.log; do merge_log "results/$name/$f" "runs/$name/$f"; done
  printf '%s start %s | %s | binary %s\n' "$(date +%s)" "$(lscpu | sed -n 's/^Model name: *//p')" \
    "$(grep -o 'avx512_bf16\|amx_bf16\|avx512f \|avx2 ' /proc/cpuinfo | sort -u | tr -d ' ' | tr '\n' ' ')" \
    "$(sha256sum "$bin" | cut -c1-16)" >> "runs/$name/machines.log"
}

save_study() {  # NAME NOBUBBLE
  local name=$1 bin=$2 f
  bash experiments/evaluate_whole.sh "$name" "$bin"
  bash scripts/results.sh save "$name"
  for f in sweep.log machines.log; do merge_log "runs/$name/$f" "results/$name/$f"; done
  if [ -f "runs/$name/rates.json" ]; then cp "runs/$name/rates.json" "results/$name/"; fi
  # a phase that completes changes the claims table; tests/cli_claims.sh fails until it is rewritten.
  # Never fatal: the results are saved by now, and a sweep's run.sh goes on to its next phase.
  python3 experiments/claims.py --write RESULTS.md \
    || echo "study.sh: RESULTS.md's claims table was not rewritten; run python3 experiments/claims.py --write RESULTS.md" >&2
}

# A study that tunes as it goes (experiments/moe, experiments/size_axis): for each phase in order, its tune.py
# writes the grid that runs next (runs/NAME/grid_PHASE.txt), the sweep runs it at the lowest priority and the
# finished points are saved; a phase ends when its grid ran to the end (done_PHASE) and tune.py, asked again,
# writes the same grid. A sweep stopped by SIGTERM (its points checkpointed) is saved, then its status returned.
run_phases() {  # NAME NOBUBBLE JOBS SAVE_EVERY PHASE...
  local name=$1 bin=$2 jobs=$3 every=$4 phase rc dir=runs/$1
  shift 4
  for phase in "$@"; do
    while :; do
      python3 "experiments/$name/tune.py" "$phase" > "$dir/grid_$phase.next"
      if [ -f "$dir/grid_$phase.txt" ] && cmp -s "$dir/grid_$phase.next" "$dir/grid_$phase.txt" \
         && [ -f "$dir/done_$phase" ]; then
        rm -f "$dir/grid_$phase.next"
        break  # the grid ran to the end and its results changed nothing
      fi
      mv "$dir/grid_$phase.next" "$dir/grid_$phase.txt"
      rm -f "$dir/done_$phase"
      rc=0
      nice -n 19 "$bin" sweep "$dir/grid_$phase.txt" --out "$dir" --jobs "$jobs" --save-every "$every" --quiet || rc=$?
      save_study "$name" "$bin"
      [ $rc -eq 0 ] || return $rc
      touch "$dir/done_$phase"
    done
  done
}

case "${1:-}" in
  start|save) [ $# -eq 3 ] || { echo "$usage" >&2; exit 2; }; "$1_study" "$2" "$3" ;;
  phases) [ $# -ge 6 ] || { echo "$usage" >&2; exit 2; }; shift; run_phases "$@" ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
