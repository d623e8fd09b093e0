#!/usr/bin/env bash
# The pre-registered primary measurement (README.md, "What is measured"): each finished point's final
# model evaluated on the whole validation split (experiments/evaluate_whole.sh says how).
#
#   bash experiments/claim_10k/evaluate.sh [NOBUBBLE]     (default /work/bin/nobubble-study)
set -euo pipefail
exec bash "$(dirname "$0")/../evaluate_whole.sh" claim_10k "${1:-/work/bin/nobubble-study}"
