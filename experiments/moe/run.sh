#!/usr/bin/env bash
# Runs the MoE study's plan (README.md) with its pinned binary at the lowest priority, resumably: restores
# the finished points from results/moe, then for each length (1,000 steps, then 3,000) runs the synchronous
# rate grid, evaluates each finished point on the whole validation split, lets tune.py pick the rates (and
# extend the grid at an edge), and runs 2BW and 2BW + EF at them, until the grid stops changing. Saves
# into results/moe after each sweep; commit results/moe afterwards. Stop it with SIGTERM to the sweep
# (`pkill -TERM -f "nobubble-moe-1790e1c sweep"`): the running points checkpoint, and this script saves
# what is finished and exits.
#
#   bash experiments/moe/run.sh [JOBS (1)]     NB_MOE_BIN overrides /work/bin/nobubble-moe-1790e1c
set -euo pipefail
cd "$(dirname "$0")/../.."
want=1790e1c
bin=${NB_MOE_BIN:-/work/bin/nobubble-moe-$want}
jobs=${1:-1}
# built where missing (README.md, "The binary": commit 1790e1c, Release, -DNB_NATIVE=ON, nobubble-core)
bash experiments/study.sh binary $want nobubble-core "$bin" -DNB_NATIVE=ON
bash experiments/study.sh start moe "$bin"
bash experiments/study.sh phases moe "$bin" "$jobs" 500 1000 3000
python3 experiments/moe/tune.py 3000 --check > /dev/null
echo "run.sh: the MoE study is complete (python3 experiments/moe/analyze.py)"
