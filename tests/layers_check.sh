#!/usr/bin/env bash
# The layer check (tools/ci/check_layers.sh, run by the build before any library compiles): the tree
# as committed passes; a copy of src/ and include/ with a forbidden include fails, naming the file,
# the line and the arrow, between parts and between the folders of a grouped part (src/train/*/);
# README.md's "Dependencies go one way" and docs/architecture.md state the table word for word.
# Usage: layers_check.sh TABLE   (the build folder's layers.txt, written from CMakeLists.txt's NB_LAYERS and NB_GROUPS)
set -uo pipefail
table=${1:?usage: layers_check.sh TABLE}
root=$(cd "$(dirname "$0")/.." && pwd)
check=$root/tools/ci/check_layers.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }

if bash "$check" "$table" "$root" > "$work/out" 2>&1; then ok "the tree follows the table"
else bad "the tree breaks the table:"; cat "$work/out"; fi

# expect_arrow NAME FILE LINE PATTERN: FILE (relative to a fresh copy) gets LINE added at its top; the
# check must fail with a message matching PATTERN.
expect_arrow() {
  local name=$1 file=$2 line=$3 pattern=$4 copy=$work/copy
  rm -rf "$copy" && mkdir -p "$copy" && cp -r "$root/src" "$root/include" "$copy/"
  { echo "$line"; cat "$copy/$file"; } > "$copy/$file.new" && mv "$copy/$file.new" "$copy/$file"
  if bash "$check" "$table" "$copy" > "$work/out" 2>&1; then bad "$name: the check passed"; return; fi
  if grep -q -- "$pattern" "$work/out"; then ok "$name"; else bad "$name: no '$pattern' in:"; cat "$work/out"; fi
}
expect_arrow "layers -> train (internal header)" src/layers/linear.c '#include "train/run/run.h"' \
  'src/layers/linear.c:1: #include "train/run/run.h": the arrow layers -> train is not allowed (layers may use: backend util)'
expect_arrow "layers -> train (public header)" src/layers/rope.c '#include "nobubble/train.h"' \
  'src/layers/rope.c:1: .*the arrow layers -> train is not allowed'
expect_arrow "a public header's arrow (model -> optim)" include/nobubble/model.h '#include "nobubble/optim.h"' \
  'include/nobubble/model.h:1: .*the arrow model -> optim is not allowed'
expect_arrow "runtime -> cli" src/runtime/link.h '#include "cli/args.h"' 'src/runtime/link.h:1: .*runtime -> cli'
expect_arrow "util -> data (angle brackets)" src/util/fs.c '#include <nobubble/data.h>' 'src/util/fs.c:1: .*util -> data'
expect_arrow "no ../ around the table" src/model/model.c '#include "../train/run/run.h"' 'src/model/model.c:1: .*no "../"'
expect_arrow "a folder of train upward (run -> exec)" src/train/run/fault.c '#include "train/exec/exec.h"' \
  'src/train/run/fault.c:1: #include "train/exec/exec.h": the arrow train/run -> train/exec is not allowed (train/run may use: train/settings)'
expect_arrow "a folder of train sideways (outputs -> run)" src/train/outputs/metrics.c '#include "train/run/state.h"' \
  'src/train/outputs/metrics.c:1: .*the arrow train/outputs -> train/run is not allowed'

# A new folder that the table does not name fails too.
rm -rf "$work/copy" && mkdir -p "$work/copy" && cp -r "$root/src" "$root/include" "$work/copy/"
mkdir "$work/copy/src/executor" && echo 'int x;' > "$work/copy/src/executor/x.c"
if ! bash "$check" "$table" "$work/copy" > "$work/out" 2>&1 && grep -q 'src/executor/x.c: part "executor" is not in the layer table' "$work/out"
then ok "a folder outside the table"; else bad "a folder outside the table:"; cat "$work/out"; fi

# A grouped part's files live in the folders its lines name.
for stray in src/train/x.c src/train/misc/x.c; do
  rm -rf "$work/copy" && mkdir -p "$work/copy" && cp -r "$root/src" "$root/include" "$work/copy/"
  mkdir -p "$(dirname "$work/copy/$stray")" && echo 'int x;' > "$work/copy/$stray"
  if ! bash "$check" "$table" "$work/copy" > "$work/out" 2>&1 && grep -q "^$stray: " "$work/out"
  then ok "a file of train outside its folders ($stray)"; else bad "a file of train outside its folders ($stray):"; cat "$work/out"; fi
done

# README.md and docs/architecture.md state the table itself (whitespace aside).
sentence=$(bash "$check" --sentence "$table")
for doc in README.md docs/architecture.md; do
  if tr -s ' \n' '  ' < "$root/$doc" | grep -qF -- "$sentence"; then ok "$doc states the table"
  else bad "$doc does not state the table; it should read: $sentence"; fi
done

[ "$fails" -eq 0 ] && echo "layers_check: all passed" || { echo "layers_check: $fails failed"; exit 1; }
