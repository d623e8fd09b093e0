#!/usr/bin/env bash
# Hugging Face's own loader against nobubble's output: transformers' LlamaForCausalLM.from_pretrained
# (and MixtralForCausalLM, for a mixture of experts: tools/reference/mixtral_check.py)
# loads a one-process export and a 3-stage pipeline checkpoint (Hugging Face's sharded layout, a part
# per stage), with no weight missing or unexpected and every parameter equal to the file's
# (tools/reference/hf_reference.py --check-folder); and AutoTokenizer and tokenizers load the exported
# tokenizer (tokenizer.json + tokenizer_config.json) and encode every validation document to
# nobubble's ids (--check-tokenizer). Run by .ci/run when transformers 4.31 and
# Debian's torch can be installed; otherwise it says so and skips.
# Also: every tensor's and each header's checksum of those files, recomputed in Python (checksums.py).
# Usage: tools/ci/hf_load_check.sh path/to/nobubble
set -euo pipefail
bin=${1:?usage: hf_load_check.sh path/to/nobubble}
py=/usr/bin/python3
if ! "$py" -c "import transformers, torch" 2>/dev/null; then
  if ! { apt-get install -y -qq python3-torch >/dev/null && "$py" -m pip install -q --break-system-packages transformers==4.31.0; }; then
    echo "hf_load_check: skipped (could not install python3-torch and transformers 4.31)"
    exit 0
  fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 30); do
  printf 'In the beginning God created the heaven and the earth. Verse %d.\n\nAnd the earth was without form. %d\n\n' "$i" "$((i * 3))"
  # UTF-8 written as bytes, so that the text does not depend on the locale
  printf "It's %d o'clock; they're sure we'll see it.  Caf\xc3\xa9\xc2\xa0au\xc2\xa0lait, na\xc3\xafve \xce\x95\xce\xbd \xce\xb1\xcf\x81\xcf\x87\xce\xae %d\xe5\xb9\xb4\t \xc2\xa0!!\n\n" "$i" "$((2000 + i))"
done > "$work/text.txt"
"$bin" prepare --input "$work/text.txt" --vocab 300 --val-fraction 0.3 --out "$work/data" > /dev/null 2>&1
small=(--data "$work/data" --model tiny --set context=32 --set d_model=64 --set d_ffn=128 --set n_heads=4 --set n_kv_heads=2
       --set n_layers=3 --batch 2 --steps 3 --quiet)
"$bin" train "${small[@]}" --set tied=0 --export "$work/export" > /dev/null
"$bin" train "${small[@]}" --stages 3 --pipeline 2bw --microbatches 3 --save-dir "$work/ck" > /dev/null
here=$(dirname "$0")
"$py" "$here/../reference/hf_reference.py" --check-folder "$work/export" 2>/dev/null
"$py" "$here/../reference/hf_reference.py" --check-folder "$work/ck/step_000003" 2>/dev/null
"$py" "$here/../reference/hf_reference.py" --check-tokenizer "$work/export" "$work/data" 2>/dev/null
# Every tensor's checksum and each header's, recomputed in Python (tools/reference/checksums.py: xxhash, its
# own canonical form) on the export and the pipeline checkpoint's parts (model and state, a part per stage).
if "$py" -c "import xxhash" 2>/dev/null || apt-get install -y -qq python3-xxhash > /dev/null; then
  "$py" "$here/../reference/checksums.py" "$work/export/model.safetensors" "$work"/ck/step_000003/*.safetensors \
    > "$work/sums.txt" || { grep -v ': ok$' "$work/sums.txt"; exit 1; }
  headers=$(grep -c ': the header: ok$' "$work/sums.txt" || true)
  files=$(ls "$work"/ck/step_000003/*.safetensors | wc -l)
  [ "$headers" -eq $((files + 1)) ] || { echo "hf_load_check: $headers header checksums checked of $((files + 1)) files"; exit 1; }
  echo "hf_load_check: checksums of $((files + 1)) files ok in Python (every tensor's and each header's)"
else
  echo "hf_load_check: the checksums' check skipped (could not install python3-xxhash)"
fi
# A mixture of experts, exported as Mixtral: transformers has Mixtral from 4.36 on, so 4.36.2 (with the
# tokenizers and hub it needs; Debian's torch) goes into a folder of its own, beside the 4.31 above.
if "$py" -m pip install -q --target "$work/tf436" --no-deps transformers==4.36.2 tokenizers==0.15.2 \
     huggingface_hub==0.20.3 > /dev/null 2>&1; then
  "$bin" train "${small[@]}" --model moe-tiny --set d_ffn=64 --set n_experts=4 --set tied=0 --export "$work/moe" > /dev/null
  loss=$("$bin" eval --checkpoint "$work/moe" --data "$work/data" --batch 2 --seq 32 --batches 2 --json |
         sed 's/.*"val_loss": \([^,]*\),.*/\1/')
  PYTHONPATH="$work/tf436" "$py" "$here/../reference/mixtral_check.py" "$work/moe" "$work/data" --loss "$loss" \
    --batch 2 --seq 32 --batches 2 2>/dev/null
else
  echo "hf_load_check: the Mixtral export's check skipped (could not install transformers 4.36.2)"
fi
