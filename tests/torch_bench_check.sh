#!/usr/bin/env bash
# tools/bench/torch_bench.py's model against the float64 reference fixtures (torch_bench_check.py),
# when a Python with torch >= 2 is found: $NB_TORCH_VENV or bench/vs_torch.sh's default venv. PyTorch is
# never a dependency of the tests: without it this test is skipped (exit 77), as CI has none.
set -u
cd "$(dirname "$0")/.."
py=${NB_TORCH_VENV:-/tmp/nobubble-torch-venv}/bin/python
if ! "$py" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null; then
  echo "skipped: no torch >= 2 at $py (bench/vs_torch.sh installs one)"
  exit 77
fi
"$py" -W ignore tools/bench/torch_bench_check.py
