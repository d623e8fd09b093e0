#!/usr/bin/env bash
# Runs the size axis's plan (README.md beside this file, with Amendment 1) with its pinned binary at the
# lowest priority, resumably: builds the binary where this machine lacks it, restores the finished points
# from results/size_axis, records this machine's CPU, then for each phase of tune.py in order (tiny: rule 1
# and 2 for `tiny`; small: the same for `small`; fp32: rule 5's check; seeds: rule 4's extra seeds) runs the
# grid tune.py writes, evaluates each finished point on the whole validation split, saves into
# results/size_axis, and asks tune.py again, until the grid stops changing. Stop it with SIGTERM to the
# sweep (`pkill -TERM -f "nobubble-size-e2f5d37 sweep"`): the running points checkpoint, and this script
# saves what is finished and exits. Commit results/size_axis (and RESULTS.md, whose claims table the save
# rewrites) afterwards.
#
#   bash experiments/size_axis/run.sh [JOBS (1)]     NB_SIZE_BIN overrides /work/bin/nobubble-size-e2f5d37
set -euo pipefail
cd "$(dirname "$0")/../.."
want=e2f5d37
bin=${NB_SIZE_BIN:-/work/bin/nobubble-size-$want}
jobs=${1:-1}
# built where missing (README.md, Amendment 1: commit e2f5d37, Release, its default -march=native, nobubble-core)
bash experiments/study.sh binary $want nobubble-core "$bin"
bash experiments/study.sh start size_axis "$bin"
for phase in tiny small fp32 seeds; do
  while :; do
    python3 experiments/size_axis/tune.py $phase > runs/size_axis/grid_$phase.next
    if [ -f runs/size_axis/grid_$phase.txt ] && cmp -s runs/size_axis/grid_$phase.next runs/size_axis/grid_$phase.txt \
       && [ -f runs/size_axis/done_$phase ]; then
      break  # the grid ran to the end and its results changed nothing
    fi
    mv runs/size_axis/grid_$phase.next runs/size_axis/grid_$phase.txt
    rm -f runs/size_axis/done_$phase
    rc=0
    nice -n 19 "$bin" sweep runs/size_axis/grid_$phase.txt --out runs/size_axis --jobs "$jobs" --save-every 500 --quiet || rc=$?
    bash experiments/study.sh save size_axis "$bin"
    [ $rc -eq 0 ] || exit $rc
    touch runs/size_axis/done_$phase
  done
done
python3 experiments/size_axis/tune.py seeds --check > /dev/null
echo "run.sh: the size axis is complete (python3 experiments/size_axis/analyze.py)"
