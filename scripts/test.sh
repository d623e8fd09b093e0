#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
bash scripts/build.sh
cd build && ctest --output-on-failure
