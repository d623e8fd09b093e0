#!/usr/bin/env bash
# The long studies that run in the background across sessions (each resumes from results/ and its own
# checkpoints), started, paused and stopped together:
#
#   bash experiments/studies.sh start [NAME[:JOBS]...]
#                                                 each study's run.sh at the lowest priority, one run at a
#                                                 time each (NAME:JOBS: JOBS at a time, e.g. moe:2 to give
#                                                 one study both cores), in the background (log:
#                                                 runs/NAME.run.out); one already running is left alone;
#                                                 without names, all three, but size_axis (bf16) only on a
#                                                 CPU with AVX-512 BF16 or AMX
#   bash experiments/studies.sh status            per study: running or not, finished points, the running one
#   bash experiments/studies.sh pause | continue  SIGSTOP / SIGCONT to every process of every study (for a
#                                                 benchmark: nothing else may run during a measurement)
#   bash experiments/studies.sh stop              SIGTERM to each sweep: its running points checkpoint, its
#                                                 run.sh evaluates and saves what is finished into results/NAME
#                                                 and rewrites RESULTS.md's claims table; waits for them.
#                                                 Commit results/ and RESULTS.md afterwards.
#
# NAME: claim_10k, moe, size_axis (when none is named: as said under start). Each run.sh builds its pinned binary where
# this machine lacks it (experiments/study.sh binary).
set -euo pipefail
cd "$(dirname "$0")/.."
ALL=(claim_10k moe size_axis)

here=$(pwd -P)
runner() {  # the study's run.sh, if running from this checkout (its working folder is this one)
  local pid
  for pid in $(pgrep -f "^bash experiments/$1/run.sh" || true); do
    [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$here" ] && echo "$pid"
  done
  return 0
}
tree() {  # PID and all its descendants
  local p
  echo "$1"
  for p in $(pgrep -P "$1" || true); do tree "$p"; done
}
signal_all() {
  local name pid
  for name in "${ALL[@]}"; do
    for pid in $(runner "$name"); do
      for p in $(tree "$pid"); do kill "-$1" "$p" 2>/dev/null || true; done
    done
  done
}

action=${1:-}
[ $# -ge 1 ] && shift
case "$action" in
  start)
    names=("$@")
    if [ ${#names[@]} -eq 0 ]; then
      names=(claim_10k moe)
      # the size axis trains in bf16, which only AVX-512 BF16 or AMX makes fast (about 4.5x an AVX2 machine's
      # rate; experiments/size_axis/README.md, Amendment 1): elsewhere the fp32 studies get the cores
      if grep -qw 'avx512_bf16\|amx_bf16' "${NB_CPUINFO:-/proc/cpuinfo}"; then names+=(size_axis)
      else echo "studies.sh: size_axis not started: this CPU has no AVX-512 BF16 or AMX (name it to start it anyway)"; fi
    fi
    mkdir -p runs
    for entry in "${names[@]}"; do
      name=${entry%%:*} jobs=1
      [ "$entry" != "$name" ] && jobs=${entry#*:}
      [ -f "experiments/$name/run.sh" ] || { echo "studies.sh: '$name': expected one of ${ALL[*]}" >&2; exit 2; }
      [[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "studies.sh: '$entry': JOBS must be a whole number >= 1" >&2; exit 2; }
      if [ -n "$(runner "$name")" ]; then echo "studies.sh: $name is already running"; continue; fi
      nohup bash "experiments/$name/run.sh" "$jobs" > "runs/$name.run.out" 2>&1 < /dev/null &
      echo "studies.sh: $name started, $jobs run(s) at a time (log: runs/$name.run.out)"
    done
    ;;
  status)
    for name in "${ALL[@]}"; do
      state="stopped"; [ -n "$(runner "$name")" ] && state="running"
      done_here=$( (ls runs/"$name"/runs/*/summary.json 2>/dev/null || true) | wc -l)
      saved=$( (ls results/"$name"/runs/*/summary.json 2>/dev/null || true) | wc -l)
      now=$(awk '$2 == "start" || $2 == "resume" { r[$3] = 1 } $2 == "done" || $2 == "failed" || $2 == "interrupted" { delete r[$3] }
                 END { for (p in r) printf "%s ", p }' "runs/$name/sweep.log" 2>/dev/null || true)
      echo "$name: $state; $done_here finished in runs/, $saved saved in results/; running now: ${now:-none}"
    done
    ;;
  pause) signal_all STOP; echo "studies.sh: paused (bash experiments/studies.sh continue)" ;;
  continue) signal_all CONT; echo "studies.sh: continued" ;;
  stop)
    signal_all CONT
    for name in "${ALL[@]}"; do   # each run.sh's sweep (a child or grandchild): SIGTERM checkpoints and ends it
      for pid in $(runner "$name"); do
        for p in $(tree "$pid"); do
          tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q " sweep " && kill -TERM "$p" 2>/dev/null || true
        done
      done
    done
    for name in "${ALL[@]}"; do
      while [ -n "$(runner "$name")" ]; do sleep 5; done
      echo "studies.sh: $name stopped and saved (runs/$name.run.out)"
    done
    echo "studies.sh: commit results/ and RESULTS.md (git add results RESULTS.md docs/figures)"
    ;;
  *) echo "usage: bash experiments/studies.sh start [NAME[:JOBS]...] | status | pause | continue | stop" >&2; exit 2 ;;
esac
