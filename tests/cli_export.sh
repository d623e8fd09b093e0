#!/usr/bin/env bash
# nobubble export: a fresh model as a Hugging Face folder; bad input refused with a clear message.
set -u
bin=${1:?usage: cli_export.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"

"$bin" export --help | grep -q "usage: nobubble export" && ok || fail "export --help"
"$bin" --help | grep -q "export" && ok || fail "nobubble --help lists export"

"$bin" export --model tiny --set n_layers=2 --seed 3 --out "$work/hf/a" >"$work/out" 2>"$work/err" \
  || fail "export run: $(cat "$work/err")"
check "model.safetensors written" test -s "$work/hf/a/model.safetensors"
check "config.json written" grep -q '"model_type": "llama"' "$work/hf/a/config.json"
check "two layers" grep -q '"num_hidden_layers": 2' "$work/hf/a/config.json"
check "tied" grep -q '"tie_word_embeddings": true' "$work/hf/a/config.json"
check "generation_config.json: eos is the last id" grep -q '"eos_token_id": 2047' "$work/hf/a/generation_config.json"
check "no temporary left" test "$(ls "$work/hf/a" | wc -l)" -eq 3
# tiny with 2 layers, tied: 2048*128 + 2*(2*128 + 4*128*128 + 3*384*128) + 128 floats
params=$((2048 * 128 + 2 * (2 * 128 + 4 * 128 * 128 + 3 * 384 * 128) + 128))
size=$(stat -c %s "$work/hf/a/model.safetensors")
hlen=$(od -An -t u8 -N 8 "$work/hf/a/model.safetensors" | tr -d ' ')
check "file size = 8 + header + 4 x params" test "$size" -eq $((8 + hlen + 4 * params))
check "header padded to 8" test $((hlen % 8)) -eq 0
"$bin" export --model tiny --set n_layers=2 --seed 3 --out "$work/hf/b" >/dev/null 2>&1
check "same seed, same bytes" cmp -s "$work/hf/a/model.safetensors" "$work/hf/b/model.safetensors"

expect_error "missing --out" "--out DIR is required" "$bin" export --model tiny
expect_error "bad preset" "huge" "$bin" export --model huge --out "$work/x"
expect_error "bad override" "n_layers" "$bin" export --set n_layers=-1 --out "$work/x"
# sample with a Hugging Face tokenizer.json (GPT-2's kind; 600 tokens, end-of-text id 0)
fix=$(dirname "$0")/fixtures/tokenizers
"$bin" export --model tiny --set n_layers=1 --set vocab_size=600 --out "$work/hf/v600" >/dev/null 2>&1
text=$("$bin" sample --checkpoint "$work/hf/v600" --tokenizer "$fix/gpt2.json" --prompt "Café, it's" --tokens 4 --seed 2 2>"$work/err")
case "$text" in "Café, it's"*) ok ;; *) fail "sample --tokenizer gpt2.json: '$text' $(cat "$work/err")" ;; esac
printf '{"model": {"type": "WordPiece", "vocab": {}}}' > "$work/wp.json"
expect_error "sample with a WordPiece tokenizer" "wp.json: model.type WordPiece is not supported" \
  "$bin" sample --checkpoint "$work/hf/v600" --tokenizer "$work/wp.json" --prompt "x"
touch "$work/file"
expect_error "out is a file" "$work/file" "$bin" export --set n_layers=1 --out "$work/file/sub"
# ---- a folder that holds a model: refused (nothing changes); --force replaces every file of the old export
# (a tokenizer of the old vocabulary would outlive it) and nothing else
"$bin" export --set n_layers=1 --out "$work/occ" > /dev/null 2>&1 || fail "export into a fresh folder"
echo '{"model": "old"}' > "$work/occ/tokenizer.json"; echo mine > "$work/occ/notes.txt"
( cd "$work" && md5sum occ/* > occ.md5 )
expect_error "export into a folder holding a model" "--out $work/occ already holds a model" \
  "$bin" export --set n_layers=1 --set vocab_size=300 --out "$work/occ"
check "... leaves it as it was" bash -c "cd '$work' && md5sum --quiet -c occ.md5"
"$bin" export --set n_layers=1 --set vocab_size=300 --out "$work/occ" --force > /dev/null 2>&1 \
  && grep -q '"vocab_size": 300' "$work/occ/config.json" && [ ! -e "$work/occ/tokenizer.json" ] \
  && [ "$(cat "$work/occ/notes.txt")" = mine ] && ok || fail "export --force: $(ls "$work/occ")"
expect_error "export --out a file" "--out $work/file: exists and is not a folder" "$bin" export --out "$work/file"

# a model that has no Hugging Face architecture is refused before any file is written
expect_error "export of a MoE with moe_every 2" "has no architecture to export to" \
  "$bin" export --out "$work/moe2" --set n_layers=2 --set n_experts=4 --set experts_per_token=2 --set moe_every=2
check "... wrote nothing" test ! -e "$work/moe2"
# a config.json with a key twice: transformers keeps the last value, the reader the first; refused, named
"$bin" export --set n_layers=1 --out "$work/dupk" > /dev/null 2>&1 || fail "export for the duplicate key"
sed -i 's/"rope_theta": \([^,]*\),/"rope_theta": \1, "rope_theta": 500000.0,/' "$work/dupk/config.json"
expect_error "config.json with a key twice" "config.json: invalid JSON at line [0-9]*: the key \"rope_theta\" given twice" \
  "$bin" eval --checkpoint "$work/dupk" --batches 1
expect_error "eval --checkpoint ''" "--checkpoint DIR is required" "$bin" eval --checkpoint ''
expect_error "sample --checkpoint ''" "--checkpoint DIR (not empty)" "$bin" sample --checkpoint '' --prompt x

finish
