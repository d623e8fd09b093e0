#!/usr/bin/env bash
# Runs the pre-registered test (README.md): restores the finished points from results/, records this
# machine's CPU in runs/claim_10k/machines.log (the sweep log's times then say which machine ran each
# point), runs the sweep with the study's binary at the lowest priority (it resumes; stop it with
# SIGTERM, which checkpoints the running points), evaluates each finished point on the whole validation
# split, and saves them into results/claim_10k (experiments/study.sh). Commit results/claim_10k afterwards.
#
#   bash experiments/claim_10k/run.sh [JOBS (2)]      NB_STUDY_BIN overrides /work/bin/nobubble-study
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${NB_STUDY_BIN:-/work/bin/nobubble-study}
jobs=${1:-2}
want=dca6a21
# built where missing (README.md, "Amendment 1": commit dca6a21, Release, the CLI target's `nobubble`)
bash experiments/study.sh binary $want nobubble "$bin"
bash experiments/study.sh start claim_10k "$bin"
rc=0
nice -n 19 "$bin" sweep experiments/claim_10k/grid.txt --out runs/claim_10k --jobs "$jobs" --save-every 1000 || rc=$?
bash experiments/study.sh save claim_10k "$bin"
exit $rc
