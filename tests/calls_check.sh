#!/usr/bin/env bash
# The call check (tools/ci/check_calls.sh): within each part's library no two files call each other,
# round any loop; the built libraries pass, and a library of two files that call each other (or three
# round a loop) fails, naming them.
# Usage: calls_check.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: calls_check.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
check=$root/tools/ci/check_calls.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }

if bash "$check" "$build"/libnb_*.a > "$work/out" 2>&1; then ok "no part's files call each other in a loop"
else bad "a loop in the built libraries:"; cat "$work/out"; fi

# lib NAME FILE:CALLS... : a library of files, FILE defining FILE_fn that calls each of CALLS' _fn.
lib() {
  local name=$1; shift
  local objs=()
  for spec in "$@"; do
    local f=${spec%%:*} calls=${spec#*:} body=""
    for c in ${calls//,/ }; do body="$body void ${c}_fn(void); ${c}_fn();"; done
    echo "void ${f}_fn(void) {$body}" > "$work/$f.c"
    cc -c "$work/$f.c" -o "$work/$f.o" || return 1
    objs+=("$work/$f.o")
  done
  rm -f "$work/$name.a"
  ar rc "$work/$name.a" "${objs[@]}"
}
expect_loop() {  # expect_loop WHAT PATTERN NAME FILE:CALLS...
  local what=$1 pattern=$2; shift 2
  lib "$@" || { bad "$what: could not build"; return; }
  if bash "$check" "$work/$1.a" > "$work/out" 2>&1; then bad "$what: not caught"
  elif grep -qE "$pattern" "$work/out"; then ok "$what: $(cat "$work/out")"
  else bad "$what: message does not name the files: $(cat "$work/out")"; fi
}
expect_loop "two files calling each other" "libpair.a: .*(alpha.*beta|beta.*alpha)" libpair alpha:beta beta:alpha
expect_loop "three files round a loop" "libring.a: .*(one|two|three)" libring one:two two:three three:one
lib libchain first:second second:third third: && bash "$check" "$work/libchain.a" > "$work/out" 2>&1 &&
  ok "a chain of calls is no loop" || bad "a chain of calls taken for a loop: $(cat "$work/out")"
[ $fails -eq 0 ] && echo "calls_check: all passed" || echo "calls_check: $fails failed"
exit $((fails != 0))
