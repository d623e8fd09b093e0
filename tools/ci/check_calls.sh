#!/usr/bin/env bash
# No two files of a part call each other, directly or round a longer loop: within each static library
# (one per src/ folder), the calls between its object files, read from their symbol tables, must form
# no cycle (tsort finds one). usage: tools/ci/check_calls.sh LIBRARY.a...
set -euo pipefail
status=0
for lib in "$@"; do
  lib=$(realpath "$lib")
  dir=$(mktemp -d)
  (cd "$dir" && ar x "$lib")
  edges=$dir/edges
  : > "$edges"
  for o in "$dir"/*.o; do
    nm --defined-only "$o" | awk -v f="$(basename "$o" .o)" '$2 ~ /^[TDBR]$/ {print $3, f}'
  done > "$dir/defs"
  for o in "$dir"/*.o; do
    from=$(basename "$o" .o)
    nm -u "$o" | awk '{print $2}' | sort -u | join - <(sort "$dir/defs") | awk -v f="$from" '$2 != f {print f, $2}'
  done | sort -u > "$edges"
  if ! out=$(tsort "$edges" 2>&1 >/dev/null) || [ -n "$out" ]; then
    echo "$(basename "$lib"): its files call each other in a loop: $(echo "$out" | grep -v 'input contains a loop' | sed 's/^tsort: //' | tr '\n' ' ')"
    status=1
  fi
  rm -rf "$dir"
done
exit $status
