#!/usr/bin/env bash
# TensorBoard's own reader against nobubble's event files (--tensorboard DIR): tools/reference/
# tensorboard_read.py loads them with tensorboard's EventAccumulator and compares every scalar with
# metrics.jsonl of the same run (one process with --clip, and a 2-stage 2BW pipeline with evaluations
# and --taylor, for delay/taylor_ratio).
# Run by .ci/run; installs the tensorboard package (pip, --break-system-packages) when it is missing,
# and skips saying so when it cannot.
# Usage: tools/ci/tensorboard_check.sh path/to/nobubble   (NB_TB_PYTHON: another python, e.g. a venv's)
set -euo pipefail
bin=${1:?usage: tensorboard_check.sh path/to/nobubble}
py=${NB_TB_PYTHON:-/usr/bin/python3}
if ! "$py" -c "import tensorboard" 2>/dev/null; then
  if ! "$py" -m pip install -q --break-system-packages tensorboard >/dev/null 2>&1; then
    echo "tensorboard_check: skipped (could not install the tensorboard package with pip)"
    exit 0
  fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 30); do
  printf 'In the beginning God created the heaven and the earth. Verse %d.\n\nAnd the earth was without form. %d\n\n' "$i" "$((i * 3))"
done > "$work/text.txt"
"$bin" prepare --input "$work/text.txt" --vocab 300 --val-fraction 0.1 --out "$work/data" > /dev/null 2>&1
small=(--data "$work/data" --set context=32 --set d_model=64 --set d_ffn=128 --set n_layers=2 --batch 2 --steps 8
       --eval-every 3 --quiet)
"$bin" train "${small[@]}" --clip 1 --out "$work/one" --tensorboard "$work/one_tb" > /dev/null
"$bin" train "${small[@]}" --stages 2 --pipeline 2bw --microbatches 2 --taylor 1 --out "$work/pipe" --tensorboard "$work/pipe_tb" > /dev/null
here=$(dirname "$0")
"$py" "$here/../reference/tensorboard_read.py" "$work/one_tb" "$work/one/metrics.jsonl"
"$py" "$here/../reference/tensorboard_read.py" "$work/pipe_tb" "$work/pipe/metrics.jsonl"
echo "tensorboard_check: passed"
