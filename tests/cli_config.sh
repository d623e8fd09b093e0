#!/usr/bin/env bash
# train --config FILE (issue 17): JSON (or YAML, written by hand) keyed by the settings table's names; flags override the file;
# every run writes its resolved settings to OUT/train_config.json, and --config of that file gives the
# same weights bitwise; unknown keys, wrong types and out-of-range values are refused naming the file,
# the key and what was expected (exit 2).
set -u
bin=$(realpath "${1:?usage: cli_config.sh path/to/nobubble}")
source "$(dirname "$0")/support/cli_harness.sh"
small_corpus "$bin" "$work/data" && ok || fail "prepare small text"
cd "$work"   # the saved shard globs are relative, as given
hash_of() { sed -n 's/.*"weights_hash": "\([0-9a-f]*\)".*/\1/p' "$1/summary.json"; }
expect_usage() {
  local what=$1 pattern=$2; shift 2
  "$@" >"$work/out" 2>"$work/err"; local rc=$?
  if [ $rc -ne 2 ]; then fail "$what: exit $rc, expected 2: $(cat "$work/err")"; return; fi
  if grep -qF -- "$pattern" "$work/err"; then ok; else fail "$what: stderr lacks '$pattern': $(cat "$work/err")"; fi
}

# ---- the round trip: a run with many settings away from their defaults, then --config of its file
flags=(--data data --set n_layers=2 --set context=16 --set tied=0 --set rope_theta=500 --batch 2 --microbatches 2
       --steps 3 --optimizer muon --lr 0.015 --aux-lr 0.002 --no-nesterov --wd 0.05 --ef 0.5 --stages 2
       --seed 5 --data-seed 3 --clip 1.5 --warmup 1 --eval-batches 1 --quiet)
check "a run" "$bin" train "${flags[@]}" --delay 2bw --out A > /dev/null
check "it saved its settings" test -s A/train_config.json
check "a run from A/train_config.json" "$bin" train --config A/train_config.json --out B > /dev/null
want=$(hash_of A); got=$(hash_of B)
[ -n "$want" ] && [ "$want" = "$got" ] && ok || fail "--config A/train_config.json: weights '$got', the run's '$want'"
check "B's saved settings are A's but for --out" diff <(grep -v '"out"' A/train_config.json) <(grep -v '"out"' B/train_config.json)
# ---- the same settings written by hand in YAML: the same weights (a quoted value is a string, a plain one a
# number or true/false where it reads as one, comments allowed)
cat > A.yaml <<'EOF'
# the run above, by hand (its data by --data)
n_layers: 2
context: 16
tied: false
rope_theta: 500
batch: 2
microbatches: 2
steps: 3
optimizer: muon
lr: 0.015
aux-lr: 0.002
nesterov: false
wd: 0.05
ef: 0.5
stages: 2
seed: 5
data-seed: 3
clip: 1.5
warmup: 1
eval-batches: 1
delay: "2bw"
quiet: true
EOF
check "a run from A.yaml" "$bin" train --config A.yaml --data data --out Y > /dev/null 2> "$work/yaml.err"
got=$(hash_of Y)
[ -n "$want" ] && [ "$want" = "$got" ] && ok || fail "--config A.yaml: weights '$got', the run's '$want': $(cat "$work/yaml.err")"
cp A.yaml A2.YAML
check "a .YAML name (upper case) is YAML too" "$bin" train --config A2.YAML --data data --out Y2 > /dev/null 2> "$work/yaml2.err"
[ "$(hash_of Y2)" = "$want" ] && ok || fail "--config A2.YAML: $(cat "$work/yaml2.err")"
printf 'steps: 3\nmodel:\n  n_layers: 2\n' > nested.yaml
expect_usage "a nested YAML mapping" "nested.yaml: line 3: a nested mapping" "$bin" train --config nested.yaml
printf 'steps: [1, 2]\n' > list.yaml
expect_usage "a YAML list" "list.yaml: line 1: a list" "$bin" train --config list.yaml
printf 'steps: "three"\n' > word.yaml
expect_usage "a quoted number" "word.yaml" "$bin" train --config word.yaml
printf 'steps: 2\nlr: 0.001\nwarmup: 1\nlr: 0.002\n' > dup.yaml
expect_usage "a YAML key given twice, named by its lines" 'dup.yaml: line 4: the key "lr" given twice (first on line 2)' \
  "$bin" train --config dup.yaml
printf 'steps: 3\n  lr: [\n' > broken.yaml
expect_usage "not YAML" "broken.yaml: line" "$bin" train --config broken.yaml

# and the same under --pipeline (threads)
check "a pipeline run" "$bin" train "${flags[@]}" --pipeline 2bw --threads-per-stage 1 --out P > /dev/null
check "a pipeline run from its file" "$bin" train --config P/train_config.json --out P2 > /dev/null
[ "$(hash_of P)" = "$(hash_of P2)" ] && [ "$(hash_of P)" = "$want" ] && ok || fail "pipeline round trip: $(hash_of P) $(hash_of P2)"

# ---- a file written by hand: the same run as the same flags; flags given override the file
cat > hand.json <<'JSON'
{"data-seed": 3, "train": "data/*_train_*.bin", "val": "data/*_val_*.bin", "n_layers": 2, "context": 16,
 "vocab_size": 300, "batch": 2, "steps": 9, "lr": 0.004, "optimizer": "adamw", "nesterov": true,
 "eval_batches": 1, "quiet": true, "delay": "fixed:1", "seed": "5"}
JSON
check "flags only" "$bin" train --data data --set n_layers=2 --set context=16 --batch 2 --steps 2 --lr 0.004 \
  --data-seed 3 --eval-batches 1 --delay fixed:1 --seed 5 --quiet --out F > /dev/null
check "the file, --steps and --no-nesterov given" "$bin" train --config hand.json --steps 2 --no-nesterov --out H > /dev/null
[ "$(hash_of F)" = "$(hash_of H)" ] && ok || fail "hand-written file: $(hash_of H), the flags' $(hash_of F)"
check "--steps overrode the file's 9" test "$(wc -l < H/metrics.jsonl)" -eq 2
check "--no-nesterov overrode the file's true" grep -q '"nesterov": false' H/train_config.json
printf '{"train": "nowhere/*_train_*.bin", "val": "nowhere/*.bin", "steps": 1, "quiet": true}' > shards.json
check "--data overrides the file's shards" "$bin" train --config shards.json --data data --set n_layers=1 \
  --set context=16 --batch 2 --eval-batches 1 --out D > /dev/null

# ---- a seed past 2^63 is written as a JSON integer and read back exactly (its digits go to --seed's parser)
check "a run with seed 2^64 - 1" "$bin" train --data data --set n_layers=1 --set context=16 --batch 2 --steps 1 \
  --eval-batches 1 --seed 18446744073709551615 --quiet --out S > /dev/null
check "its file writes the seed as an integer" grep -q '"seed": 18446744073709551615' S/train_config.json
check "the same run from its file" "$bin" train --config S/train_config.json --out S2 > /dev/null
[ -n "$(hash_of S)" ] && [ "$(hash_of S)" = "$(hash_of S2)" ] && ok || fail "seed 2^64 - 1 round trip: $(hash_of S) $(hash_of S2)"

# ---- an earlier run's train_config.json makes its --out a run folder
expect_usage "train_config.json alone marks a run" "already holds a run (train_config.json)" \
  bash -c "mkdir -p C && cp A/train_config.json C/ && '$bin' train --config C/train_config.json --out C"

# ---- bad files, each refused naming the file, the key and what was expected
bad() {  # bad WHAT 'JSON' 'expected message'
  printf '%s' "$2" > bad.json
  expect_usage "$1" "$3" "$bin" train --config bad.json --data data --steps 1
}
bad "unknown key" '{"learning_rate": 0.1}' '--config bad.json: unknown key "learning_rate": expected a setting'"'"'s name'
bad "an off flag is not a key" '{"no-nesterov": true}' 'unknown key "no-nesterov"'
bad "a half of --delay is not a key" '{"tau": 2}' 'unknown key "tau"'
bad "a string for an integer" '{"steps": "5"}' '--config bad.json: "steps" is a string: expected an integer'
bad "a real for an integer" '{"steps": 2.0}' '"steps" is a number: expected an integer'
bad "a number for a boolean" '{"nesterov": 1}' '"nesterov" is an integer: expected true or false'
bad "a number for a string" '{"optimizer": 1}' '"optimizer" is an integer: expected a string'
bad "null" '{"lr": null}' '"lr" is null: expected a number'
bad "out of range" '{"batch": 0}' '--config bad.json: "batch": --batch 0: out of range'
bad "a float out of range" '{"lr": 1e30}' '"lr": --lr 1e+30: out of range'
bad "a negative seed" '{"seed": -1}' '"seed": --seed '"'"'-1'"'"': expected a non-negative integer'
bad "a seed string not digits" '{"seed": "12x"}' '"seed" is a string: expected a non-negative integer'
bad "an unknown enum name" '{"optimizer": "adam"}' '"optimizer": --optimizer '"'"'adam'"'"': expected one of'
bad "a bad delay" '{"delay": "late"}' '"delay":'
bad "a model field of the wrong type" '{"n_layers": 2.5}' '"n_layers" is a number: expected an integer'
bad "a model field out of range" '{"n_heads": 3}' '--config bad.json: model: d_model = 128 is not divisible by n_heads = 3'
bad "a duplicate key" '{"lr": 0.1, "lr": 0.2}' 'bad.json:1:13: not valid JSON: the key "lr" given twice in one object'
bad "a duplicate key in a nested value" '{"steps": 2, "x": {"a": 1, "a": 2}}' 'bad.json:1:28: not valid JSON: the key "a" given twice'
bad "a leading zero" '{"steps": 007}' 'bad.json:1:11: not valid JSON: a number with a leading zero'
bad "an integer past the row's range" '{"steps": 99999999999999999999}' '"steps": --steps 99999999999999999999: out of range'
bad "a seed past 2^64 - 1" '{"seed": 18446744073709551616}' '"seed": --seed '"'"'18446744073709551616'"'"': expected a non-negative integer'
bad "a string holding \u0000" '{"optimizer": "muon\u0000x"}' '"optimizer": the string holds \u0000'
bad "not JSON" '{"lr": 0.1,' 'bad.json:1:'
bad "not an object" '[1, 2]' 'the top level is an array: expected an object'
bad "empty" '' 'bad.json:'
expect_usage "a missing file" "--config nowhere.json" "$bin" train --config nowhere.json --steps 1

# One setting under both its names ("aux-lr" and "aux_lr"), which the JSON reader cannot see as one key: refused
# (the second silently won)
printf '{"aux-lr": 0.001, "aux_lr": 0.002, "optimizer": "muon"}\n' > twice.json
bad_file() { "$bin" train "${flags[@]}" --steps 1 --config "$1" > "$work/out" 2> "$work/err" && fail "$1: exit 0" ||
             { grep -qF -- "$2" "$work/err" && ok || fail "$1: stderr lacks '$2': $(cat "$work/err")"; }; }
bad_file twice.json '"aux_lr": the setting --aux-lr is given twice in the file'
printf 'aux_lr: 0.001\naux-lr: 0.002\n' > twice.yaml
bad_file twice.yaml '"aux-lr": the setting --aux-lr is given twice in the file'
finish
