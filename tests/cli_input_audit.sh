#!/usr/bin/env bash
# Bad input found by the input audit of the newer features (each check fails on the code before its fix):
# - an export into a folder of prepared data or a checkpoint is refused even with --force (--force used to
#   remove the data's tokenizer.json, or the checkpoint's model.safetensors and config.json beside its state);
# - a --config file giving one setting under both its names ("aux-lr" and "aux_lr") is refused (the second
#   silently won);
# - the train_config.json of an --init-from run runs again under --config (its model fields repeat the
#   folder's; it was refused), and a field that contradicts the folder is refused naming both;
# - --split takes as many counts as --stages allows (past 256 it said "expected 300 counts" to 300 counts);
# - an unknown --device is named as such before what a device lacks (a MoE model said "not on a device yet").
set -u
bin=${1:?usage: cli_input_audit.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
small_corpus "$bin" "$work/data" 30 && ok || fail "prepare"
run=(--data "$work/data" --set n_layers=2 --batch 2 --seq 16 --steps 2 --quiet --threads 1)

# ---- exports into folders that are not an export's
cp "$work/data/tokenizer.json" "$work/tokenizer.saved"
expect_error "train --export into prepared data, --force" "--export $work/data holds prepared data (manifest.json)" \
  "$bin" train "${run[@]}" --export "$work/data" --force
expect_error "export --out prepared data, --force" "--out $work/data holds prepared data (manifest.json)" \
  "$bin" export --set n_layers=1 --set vocab_size=300 --out "$work/data" --force
cmp -s "$work/data/tokenizer.json" "$work/tokenizer.saved" && test ! -e "$work/data/model.safetensors" && ok ||
  fail "the data folder changed: $(ls "$work/data")"
"$bin" train "${run[@]}" --save-dir "$work/ck" > "$work/ck.log" 2>&1 || fail "checkpoint run: $(tail -3 "$work/ck.log")"
cp "$work/ck/step_000002/model.safetensors" "$work/model.saved"
expect_error "train --export into a checkpoint, --force" "--export $work/ck/step_000002 holds a checkpoint" \
  "$bin" train "${run[@]}" --export "$work/ck/step_000002" --force
expect_error "export --out a checkpoint, --force" "holds a checkpoint (state.safetensors)" \
  "$bin" export --set n_layers=1 --out "$work/ck/step_000002" --force
cmp -s "$work/ck/step_000002/model.safetensors" "$work/model.saved" && ok || fail "the checkpoint's model changed"

# ---- one setting under both its names in a --config file
printf '{"aux-lr": 0.001, "aux_lr": 0.002, "optimizer": "muon"}\n' > "$work/twice.json"
expect_error "aux-lr and aux_lr in one JSON file" '"aux_lr": the setting --aux-lr is given twice in the file' \
  "$bin" train "${run[@]}" --config "$work/twice.json"
printf 'aux_lr: 0.001\naux-lr: 0.002\n' > "$work/twice.yaml"
expect_error "aux_lr and aux-lr in one YAML file" '"aux-lr": the setting --aux-lr is given twice in the file' \
  "$bin" train "${run[@]}" --config "$work/twice.yaml"

# ---- an --init-from run's own train_config.json
"$bin" export --set n_layers=2 --set vocab_size=300 --seed 5 --out "$work/hf" > /dev/null 2>&1 || fail "export"
"$bin" train "${run[@]}" --init-from "$work/hf" --out "$work/a" > "$work/a.log" 2>&1 || fail "a: $(tail -3 "$work/a.log")"
"$bin" train --config "$work/a/train_config.json" --out "$work/b" > "$work/b.log" 2>&1 && ok ||
  fail "--config of an --init-from run's train_config.json: $(tail -3 "$work/b.log")"
same_run "the --init-from run again from its train_config.json" "$work/a" "$work/b"
printf '{"n_layers": 3}\n' > "$work/layers.json"
expect_error "a model field of --config contradicting --init-from" \
  "--config $work/layers.json: model field n_layers=3: $work/hf/config.json gives n_layers = 2" \
  "$bin" train "${run[@]}" --init-from "$work/hf" --config "$work/layers.json"

# ---- --split past 256 stages: the counts are read (the model then refuses 300 stages for 2 blocks)
split=$(printf '1,%.0s' $(seq 1 299))1
expect_error "--split of 300 counts" "stages = 300: expected 1 <= stages <= n_layers (2)" \
  "$bin" train "${run[@]}" --stages 300 --split "$split"

# ---- an unknown --device, with a MoE model
moe=(--set n_experts=4 --set experts_per_token=2 --set moe_every=1)
expect_error "train --device nope on a MoE model" "device 'nope': expected cpu or guarded" \
  "$bin" train "${run[@]}" "${moe[@]}" --device nope
"$bin" train "${run[@]}" "${moe[@]}" --save-dir "$work/moeck" > "$work/moe.log" 2>&1 || fail "MoE run: $(tail -3 "$work/moe.log")"
expect_error "eval --device nope on a MoE checkpoint" "device 'nope': expected cpu or guarded" \
  "$bin" eval --checkpoint "$work/moeck/step_000002" --data "$work/data" --batch 2 --seq 16 --batches 1 --device nope
finish
