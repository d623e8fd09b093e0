#!/usr/bin/env bash
# nobubble verify: a save folder of a pipeline (a part per stage), an export and a Python-written file pass,
# one line each; a flipped byte of tensor data, a changed header value, a missing part, a transposed shape in a
# file without the header's checksum, an unsupported config.json, a missing path and an empty folder each fail
# naming the file and the problem, with exit 1; no path is a usage error (2); --quiet prints failures only; a save
# folder's checkpoints are found as a resume finds them; a folder of runs is searched for what they saved.
set -u
bin=${1:?usage: cli_verify.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"

small_corpus "$bin" "$work/data" || fail "prepare"
small=(--data "$work/data" --set n_layers=2 --set context=16 --batch 2 --threads 1 --quiet)
"$bin" train "${small[@]}" --steps 4 --stages 2 --pipeline 2bw --microbatches 2 --save-dir "$work/save" --save-every 2 \
  --export "$work/hf" --out "$work/run" > /dev/null 2>&1 || fail "a 2-stage pipeline's checkpoints"
ls "$work/save/step_000004" > "$work/files"
check "the pipeline saved a part per stage: $(tr '\n' ' ' < "$work/files")" \
  grep -q 'model-00002-of-00002.safetensors' "$work/files"

# verify PATHS...: its output in $work/v.out, its exit status in $rc
verify() { "$bin" verify "$@" > "$work/v.out" 2> "$work/v.err"; rc=$?; }
has() { grep -q -- "$1" "$work/v.out" && ok || fail "$2: no line '$1' in: $(cat "$work/v.out" "$work/v.err")"; }

verify "$work/save" "$work/hf" tests/fixtures/checksums/tiny_xxh3.safetensors
check "verify of good files exits 0 (got $rc): $(cat "$work/v.out" "$work/v.err")" test "$rc" -eq 0
for step in step_000002 step_000004; do
  for f in model-00001-of-00002 model-00002-of-00002 state-00001-of-00002 state-00002-of-00002; do
    has "^$work/save/$step/$f.safetensors: ok: .* with a checksum; the header's checksum matches\$" "$step/$f"
  done
  has "^$work/save/$step: ok: the model loads" "$step loads"
done
has "^$work/hf/model.safetensors: ok: " "the export"
has "^$work/hf/config.json: ok: " "the export's config.json"
has "^tests/fixtures/checksums/tiny_xxh3.safetensors: ok: 2 tensors, 2 with a checksum; no header checksum" \
  "a file written by Python before the header's checksum"

# broken copies: each fails naming the file and the problem
bad() { rm -rf "$work/bad"; cp -r "$work/save/step_000004" "$work/bad"; }
patch() { local at; at=$(grep -obUa -m1 -F -- "$2" "$1" | head -1 | cut -d: -f1)
          [ -n "$at" ] && printf '%s' "$3" | dd of="$1" bs=1 seek="$at" conv=notrunc status=none; }
flip_last() { local at b; at=$(( $(stat -c %s "$1") - 3 )); b=$(od -An -tu1 -j "$at" -N1 "$1" | tr -d ' ')
              printf "\\$(printf '%03o' $(( b ^ 16 )))" | dd of="$1" bs=1 seek="$at" conv=notrunc status=none; }
bad; flip_last "$work/bad/state-00002-of-00002.safetensors"
verify "$work/bad"
check "a flipped byte of tensor data: exit 1 (got $rc)" test "$rc" -eq 1
has "^$work/bad/state-00002-of-00002.safetensors: FAILED: .*data checksum mismatch" "a flipped byte of tensor data"
has "^$work/bad/state-00001-of-00002.safetensors: ok" "the other part still checked"
has "^verify: 1 failure\$" "the count of failures"
bad; patch "$work/bad/model-00001-of-00002.safetensors" '"next_step":"4"' '"next_step":"5"'
verify "$work/bad"
has "^$work/bad/model.safetensors: FAILED: $work/bad/model-00001-of-00002.safetensors: header checksum mismatch" \
  "a header value changed"
has "^verify: 1 failure\$" "one failure, not the model's load too"
bad; rm "$work/bad/model-00002-of-00002.safetensors"
verify "$work/bad"
has "^$work/bad/model.safetensors: FAILED: .*model-00002-of-00002.safetensors" "a missing part"
bad; python3 - "$work/bad/model-00001-of-00002.safetensors" <<'PY' || fail "the shape editor"
# the embedding [V, d] read as [d, V]: same bytes, same header length, and the header's checksum dropped (renamed),
# so that only the model's load can tell
import json, struct, sys
path = sys.argv[1]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
text = raw[8:8 + n].decode()
h = json.loads(text)
shape = h["model.embed_tokens.weight"]["shape"]
old = '"model.embed_tokens.weight":{"dtype":"F32","shape":[%d,%d]' % tuple(shape)
new = '"model.embed_tokens.weight":{"dtype":"F32","shape":[%d,%d]' % tuple(shape[::-1])
assert old in text and len(old) == len(new)
text = text.replace(old, new).replace('"nobubble.header_checksum"', '"nobubble.header_checksuX"')
open(path, "wb").write(raw[:8] + text.encode() + raw[8 + n:])
PY
verify "$work/bad"
has "^$work/bad/model-00001-of-00002.safetensors: ok: .*no header checksum" "a file without the header's checksum"
has "^$work/bad: FAILED: .*model.embed_tokens.weight" "a transposed shape found by the model's load"
bad; patch "$work/bad/config.json" '"hidden_act": "silu"' '"hidden_act": "gelu"'
verify --quiet "$work/bad"
has "^$work/bad/config.json: FAILED: .*hidden_act" "an unsupported config.json"
check "--quiet prints the failures only: $(cat "$work/v.out")" test "$(grep -c ': ok: ' "$work/v.out")" -eq 0
mkdir -p "$work/empty"
verify "$work/empty" "$work/none"
check "an empty folder and a missing path: exit 1 (got $rc)" test "$rc" -eq 1
has "^$work/empty: FAILED: holds no .safetensors file" "an empty folder"
has "^$work/none: FAILED: no such file or folder" "a missing path"
has "^verify: 2 failures\$" "two failures counted"
# a save folder's checkpoints are those a resume finds (step_ and the step in six digits): a copy named otherwise
# is not walked (a resume would not open it either)
cp -r "$work/save/step_000002" "$work/save/step_0000002"
verify "$work/save"
check "a save folder with a copy named step_0000002: exit 0 (got $rc)" test "$rc" -eq 0
check "step_0000002 is not walked: $(grep -c step_0000002 "$work/v.out") lines" test "$(grep -c step_0000002 "$work/v.out")" -eq 0
has "^$work/save/step_000002: ok: the model loads" "the checkpoints still verified"
rm -r "$work/save/step_0000002"
# an empty checkpoint folder in a save folder (a save cut short) is a failure, not passed over
cp -r "$work/save" "$work/save_cut"; mkdir "$work/save_cut/step_000006"
verify "$work/save_cut"
check "an empty step_000006: exit 1 (got $rc)" test "$rc" -eq 1
has "^$work/save_cut/step_000006: FAILED: holds no .safetensors file or config.json" "an empty checkpoint folder"
# a folder that is none of these is searched: a run's --out with its export and save folder inside, a folder of runs
mkdir -p "$work/runs/b/inner"
cp -r "$work/save" "$work/runs/b/inner/checkpoints"; cp -r "$work/hf" "$work/runs/b/hf"; cp -r "$work/run" "$work/runs/a"
verify "$work/runs"
check "a folder of runs: exit 0 (got $rc): $(cat "$work/v.out")" test "$rc" -eq 0
has "^$work/runs/b/hf/model.safetensors: ok: " "the export found below"
has "^$work/runs/b/inner/checkpoints/step_000004: ok: the model loads" "the save folder found two levels below"
verify "$work/runs/a"
has "^$work/runs/a: FAILED: holds no .safetensors file, step_NNNNNN folder or config.json, nor does any folder below" \
  "a run's --out without its export or checkpoints"
expect_error "verify with no path" "expected at least one PATH" "$bin" verify
check "no path: exit 2" test "$("$bin" verify > /dev/null 2>&1; echo $?)" -eq 2
finish
