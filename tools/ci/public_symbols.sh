#!/usr/bin/env bash
# The public API's symbols: every global symbol that the library's objects define and that a public
# header (include/nobubble/*.h, comments stripped) names. Written one per line to OUT, and, with --map,
# also as a linker version script OUT.map that exports them and makes every other symbol local.
# CMakeLists.txt runs it before linking libnobubble.so (the version script) and libnobubble.a (objcopy
# keeps these global in the one prelinked object), so that a program's own `rmsnorm_forward` can neither
# replace the library's nor collide with it (docs/library.md, "Exported names").
#
#   public_symbols.sh OUT INCLUDE_DIR OBJECT...
set -euo pipefail
out=$1 include=$2
shift 2
words=$(mktemp)
trap 'rm -f "$words"' EXIT
# The headers' words, comments stripped by the preprocessor (no macro expanded, nothing included).
for h in "$include"/nobubble/*.h; do
  gcc -fpreprocessed -dD -E -P -x c "$h" 2>/dev/null
done | grep -o -E '\bnb_[A-Za-z0-9_]+\b' | sort -u > "$words"
nm --defined-only -g "$@" | awk 'NF == 3 && $2 ~ /^[A-Z]$/ {print $3}' | sort -u | comm -12 - "$words" > "$out"
[ -s "$out" ] || { echo "public_symbols.sh: no public symbol found in $* (headers in $include)" >&2; exit 1; }
{
  echo "{"
  echo "  global:"
  sed 's/.*/    &;/' "$out"
  echo "  local: *;"
  echo "};"
} > "$out.map"
