#!/usr/bin/env bash
# A FIFO (named pipe) in place of a file a command reads is refused at once, naming it, instead of
# waiting for ever for a writer: one check per kind of reader (a Hugging Face folder's config.json, a
# model part named by model.safetensors.index.json, --init-from's model.safetensors, train --config, a
# training shard, sample --tokenizer, report's results.csv, sweep's grid file). Each command runs under
# `timeout -k 5 20` (a blocked `train` takes SIGTERM as a stop request and waits on), so that a reader
# that blocks fails the check instead of hanging the suite.
set -u
bin=${1:?usage: cli_fifo.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"

# refused WHAT PATH COMMAND...: the command ends by itself, non-zero, and its stderr names PATH as a FIFO.
refused() {
  local what=$1 path=$2; shift 2
  timeout -k 5 20 "$@" > "$work/out" 2> "$work/err" < /dev/null
  local rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then fail "$what: still waiting on the FIFO after 20 s"; return; fi
  if [ $rc -eq 0 ]; then fail "$what: exit 0"; return; fi
  grep -qF -- "$path is a FIFO (named pipe), not a regular file" "$work/err" && ok ||
    fail "$what (exit $rc): stderr does not name $path as a FIFO: $(cat "$work/err")"
}
# hf_copy SRC DST FILE: a copy of the folder SRC whose FILE is a FIFO.
hf_copy() {
  cp -r "$1" "$2" && rm -f "$2/$3" && mkfifo "$2/$3"
}

small_corpus "$bin" "$work/data" 30 || fail "prepare"
hf=tests/fixtures/hf5_untied

# a Hugging Face folder's config.json
hf_copy "$hf" "$work/cfg" config.json
refused "eval: config.json" "$work/cfg/config.json" "$bin" eval --checkpoint "$work/cfg" --data "$work/data" --batches 1

# a model part named by the index
hf_copy tests/fixtures/hf5_untied_sharded "$work/part" model-00002-of-00004.safetensors
refused "eval: a part named by the index" "$work/part/model-00002-of-00004.safetensors" \
  "$bin" eval --checkpoint "$work/part" --data "$work/data" --batches 1

# model.safetensors for --init-from
hf_copy "$hf" "$work/init" model.safetensors
refused "train --init-from: model.safetensors" "$work/init/model.safetensors" \
  "$bin" train --init-from "$work/init" --train "$work/data/*_train_*.bin" --steps 1 --batch 1 --seq 8 --quiet

# train --config
mkfifo "$work/config.json"
refused "train --config" "$work/config.json" "$bin" train --config "$work/config.json" --steps 1

# a training shard (the pattern matches a FIFO beside the real shards)
mkfifo "$work/data/fifo_train_000009.bin"
refused "train --data: a shard" "$work/data/fifo_train_000009.bin" \
  "$bin" train --data "$work/data" --set n_layers=1 --set context=16 --batch 1 --steps 1 --quiet
rm -f "$work/data/fifo_train_000009.bin"

# sample --tokenizer
"$bin" export --model tiny --set vocab_size=300 --set n_layers=1 --set context=16 --out "$work/model" > /dev/null 2>&1 ||
  fail "export"
mkfifo "$work/tokenizer.json"
refused "sample --tokenizer" "$work/tokenizer.json" \
  "$bin" sample --checkpoint "$work/model" --tokenizer "$work/tokenizer.json" --prompt "In the" --tokens 1

# report's results.csv
mkdir -p "$work/sweep" && mkfifo "$work/sweep/results.csv"
refused "report: results.csv" "$work/sweep/results.csv" "$bin" report "$work/sweep"

# sweep's grid file
mkfifo "$work/grid.txt"
refused "sweep: the grid file" "$work/grid.txt" "$bin" sweep "$work/grid.txt" --out "$work/swept" --dry-run

# a folder where a file is expected is refused too, naming what it is
mkdir "$work/config_dir.json"
expect_error "train --config of a folder" "$work/config_dir.json is a folder, not a regular file" \
  timeout -k 5 20 "$bin" train --config "$work/config_dir.json" --steps 1
finish
