#!/usr/bin/env bash
# experiments/study.sh's log merge (the sweep's log and machines.log of a study, saved into results/NAME and
# restored into runs/NAME): every line of both files, each once, in time order, stable within a second. A
# save once copied runs/NAME's log over results/NAME's, and a fresh runs/ on a new machine then erased the
# record of which machine ran the earlier points. ($1, the nobubble binary, is not used.)
set -u
source "$(dirname "$0")/support/cli_harness.sh"
study=$(cd "$(dirname "$0")/.." && pwd)/experiments/study.sh
printf '100 start Intel Xeon | avx512f | binary a\n150 start p1\n150 done p1 10.0s\n' > "$work/results.log"
printf '300 start AMD EPYC | avx2 | binary b\n310 skip p1\n310 start p2\n' > "$work/runs.log"
bash "$study" merge-log "$work/runs.log" "$work/results.log" && ok || fail "merge-log exits non-zero"
printf '100 start Intel Xeon | avx512f | binary a\n150 start p1\n150 done p1 10.0s\n300 start AMD EPYC | avx2 | binary b\n310 skip p1\n310 start p2\n' > "$work/want"
cmp -s "$work/want" "$work/results.log" && ok || fail "the union in time order: $(cat "$work/results.log")"
# merged again (the other way, as start does, then back): nothing doubles
bash "$study" merge-log "$work/results.log" "$work/runs.log" && bash "$study" merge-log "$work/runs.log" "$work/results.log"
cmp -s "$work/want" "$work/results.log" && cmp -s "$work/want" "$work/runs.log" && ok \
  || fail "a second merge doubled lines: $(cat "$work/results.log")"
# lines of the same second keep their order; an older line from the other side goes before them
printf '150 start p0\n' > "$work/old.log"
bash "$study" merge-log "$work/old.log" "$work/results.log"
sed -n 2,4p "$work/results.log" | tr '\n' '|' | grep -qx '150 start p1|150 done p1 10.0s|150 start p0|' && ok \
  || fail "stable within a second: $(cat "$work/results.log")"
# a destination that does not exist yet takes the source; a source that does not exist changes nothing
bash "$study" merge-log "$work/want" "$work/new.log" && cmp -s "$work/want" "$work/new.log" && ok || fail "a new destination"
bash "$study" merge-log "$work/absent.log" "$work/new.log" && cmp -s "$work/want" "$work/new.log" && ok || fail "an absent source"
finish
