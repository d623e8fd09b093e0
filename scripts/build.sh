#!/usr/bin/env bash
# Builds nobubble (Release) into build/; the compiler's output goes to build/build.log and is
# shown only when the build fails. Usage: scripts/build.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p build
if ! { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" && cmake --build build -j"$(nproc)"; } > build/build.log 2>&1; then
  cat build/build.log >&2
  echo "build failed (log: build/build.log)" >&2
  exit 1
fi
