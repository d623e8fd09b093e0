#!/usr/bin/env bash
# A stop signal in the first milliseconds (issue 36): a SIGTERM that arrived, before this change, while the
# dynamic loader was still loading the binary's libraries met the default disposition and killed it: exit
# 143, no message. Now the launcher (src/cli/launcher/) blocks the stop signals before anything is loaded
# and the signal waits, pending, for the command's signal thread: train stops through its stop path (exit
# 1, "stopped on request after step N"); a command without a clean stop exits 143 saying so. The test
# signals each run as soon as its stop signals show as blocked, and checks that this happens before
# oneDNN is mapped in at least one try (on the code before: in none).
set -u
bin=${1:?usage: cli_signals_early.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
export OMP_WAIT_POLICY=passive
# Under the sanitizers the launcher cannot be static (their runtimes are shared libraries), so the
# dynamic loader's window is back before its first instruction: what this test measures does not exist
# there. Skipped (ctest's skip code); the normal build runs it.
if ldd "$bin" 2>/dev/null | grep -q 'libasan\|libubsan'; then
  echo "skipped: $bin is a sanitizer build, whose launcher is not static"
  exit 77
fi
small_corpus "$bin" "$work/data" && ok || fail "prepare"

# early PID: waits (shell builtins only, no fork) until PID runs nobubble (its comm changes at exec) with
# its stop signals blocked (SIGTERM, bit 14 of /proc/PID/status's SigBlk), then sends SIGTERM at once. Before this change that happened only in
# train's main, after the dynamic loader had mapped every library; now the launcher blocks them first
# thing, so the signal usually lands while nobubble-core's libraries are still being loaded. Whether it
# did is read from /proc/PID/maps at that moment (oneDNN not mapped yet): *loading is set to 1 then.
# Sending only once the signals are blocked keeps the test deterministic on a loaded machine: the
# microseconds between exec and the launcher's first instruction, which no program can cover, are
# never hit on purpose.
early() {
  local pid=$1 line mask=0 k=0 maps comm=""
  loading=0
  while [ $k -lt 2000000 ]; do
    k=$((k + 1))
    # the shell's child blocks signals around its own work before exec: only nobubble's mask counts
    read -r comm < "/proc/$pid/comm" 2>/dev/null || break
    case $comm in nobubble*) ;; *) continue ;; esac
    mask=0
    while read -r line; do
      case $line in SigBlk:*) mask=$((16#${line##*[[:space:]]})); break ;; esac
    done < "/proc/$pid/status" 2>/dev/null || break
    [ $((mask & 0x4000)) -ne 0 ] && break
  done
  mapfile -t maps < "/proc/$pid/maps" 2>/dev/null
  kill -TERM "$pid" 2>/dev/null
  case "${maps[*]}" in *libdnnl*) ;; *) loading=1 ;; esac
}

tries=${NB_EARLY_TRIES:-20}
bad=0 report="" during_load=0 i=0
# At least $tries tries; more (up to 40 times as many, about 50 s) until one signal lands during the loading (on a
# loaded 2-core AMD EPYC, 2026-12-05, none of 60 did while another test ran beside it, and once none of 200 with a
# study and another ctest beside it; alone, one of the first 20 to 50 does).
while [ $i -lt "$tries" ] || { [ $during_load -eq 0 ] && [ $i -lt $((40 * tries)) ]; }; do
  i=$((i + 1))
  "$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 2 --steps 1000 --threads 1 --quiet \
    > "$work/t$i.log" 2>&1 &
  pid=$!
  early $pid
  during_load=$((during_load + loading))
  wait $pid; rc=$?
  if [ $rc -eq 1 ] && grep -q "SIGTERM: stopping at the end of a step" "$work/t$i.log" &&
     grep -q "stopped on request after step" "$work/t$i.log"; then :; else
    bad=$((bad + 1)); report="$report [try $i: rc $rc: $(head -c 120 "$work/t$i.log" | tr '\n' ' ')]"
  fi
done
[ $bad -eq 0 ] && ok || fail "train: $bad of $i early SIGTERMs did not end through the stop path:$report"
# The signals are blocked before the libraries are loaded (on the code before, never: they were blocked in
# main). One try is proof; a machine too loaded to catch the loader's milliseconds in any of 800 is unlikely.
[ $during_load -gt 0 ] && ok || fail "train: in none of $i tries were the stop signals blocked before oneDNN was mapped"
echo "signals blocked while loading in $during_load of $i tries"

# A command without a clean stop (bench): exit 143, saying so.
bad=0 report=""
for i in $(seq 1 5); do
  "$bin" bench --models tiny --threads 1 --steps 10000 --seq 16 --batch 1 > "$work/b$i.log" 2>&1 &
  pid=$!
  early $pid
  wait $pid; rc=$?
  [ $rc -eq 143 ] && grep -q "nobubble bench: SIGTERM: exiting" "$work/b$i.log" ||
    { bad=$((bad + 1)); report="$report [try $i: rc $rc: $(head -c 120 "$work/b$i.log" | tr '\n' ' ')]"; }
done
[ $bad -eq 0 ] && ok || fail "bench: $bad of 5 early SIGTERMs did not exit with 143 and a message:$report"
finish
