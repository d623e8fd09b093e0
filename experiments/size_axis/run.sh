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
bash experiments/study.sh phases size_axis "$bin" "$jobs" 500 tiny small fp32 seeds
python3 experiments/size_axis/tune.py seeds --check > /dev/null
echo "run.sh: the size axis is complete (python3 experiments/size_axis/analyze.py)"
