#!/usr/bin/env bash
# Numbers from flags and files are decimal only: hexadecimal ("0x10", which strtod reads as 16),
# "inf" and "nan" are refused naming the flag or field; a grid's axis values are compared as numbers
# (`1e-3 -1e-3` are two points, `1e-3 0.001` the same value twice); a --config file cannot carry the
# command line's decisions (--force, --resume, --override).
set -u
bin=${1:?usage: cli_numbers.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"

# ---- flags
for v in 0x10 0X1p-4 inf nan " 1e-3"; do
  expect_error "train --lr '$v'" "--lr '$v': expected a decimal number" "$bin" train --lr "$v" --steps 1
done
expect_error "train --set rope_theta=0x10" "rope_theta: '0x10' is not a decimal number" \
  "$bin" train --set rope_theta=0x10 --steps 1
expect_error "train --set d_model=0x40" "d_model: '0x40' is not an integer" "$bin" train --set d_model=0x40 --steps 1
expect_error "export --set rope_theta=inf" "rope_theta: 'inf' is not a decimal number" \
  "$bin" export --set rope_theta=inf --out "$work/x"
expect_error "sample --temperature 0x1" "--temperature '0x1': expected a decimal number" \
  "$bin" sample --checkpoint "$work/none" --prompt a --temperature 0x1
expect_error "eval --batches 0x2" "--batches '0x2': expected an integer" "$bin" eval --checkpoint "$work/none" --batches 0x2
expect_error "schedule --backward-cost 0x2" "'0x2' is not a decimal number" \
  "$bin" schedule --kind gpipe --stages 2 --microbatches 2 --backward-cost 0x2
expect_error "prepare --val-fraction 0x0.1" "--val-fraction needs a decimal number, got '0x0.1'" \
  "$bin" prepare --input "$work/none.txt" --val-fraction 0x0.1 --out "$work/p"
# decimal forms stay accepted (the run stops at its missing data, after the flags)
expect_error "train --lr 1.5e-3 is read" "no shard files match" "$bin" train --lr 1.5e-3 --beta1 .9 --data "$work/none" --steps 1
grep -q "expected a decimal number" "$work/err" && fail "a decimal --lr refused: $(cat "$work/err")" || ok

# ---- --config: the command line's decisions are not a file's
for kv in '"force": true' '"resume": "runs/a/ckpt/step_000010"' '"override": true'; do
  key=${kv%%:*}
  echo "{\"steps\": 1, $kv}" > "$work/c.json"
  expect_error "--config with $key" "$key: --${key//\"/} is a decision of the command line" \
    "$bin" train --config "$work/c.json"
done
echo '{"lr": "0x10"}' > "$work/c.json"
expect_error "--config \"lr\": \"0x10\"" '"lr" is a string: expected a number' "$bin" train --config "$work/c.json"

# ---- grid values: numbers compared as numbers
printf 'fixed: --steps 2\naxis x: 1e-3 -1e-3\n' > "$work/neg.grid"
"$bin" sweep "$work/neg.grid" --out "$work/neg" --dry-run > "$work/neg.out" 2> "$work/err" && ok ||
  fail "axis x: 1e-3 -1e-3 refused: $(cat "$work/err")"
check "1e-3 -1e-3: two points, 1e-3 and neg1e-3: $(cat "$work/neg.out")" \
  test "$(cut -d: -f1 "$work/neg.out" | tr '\n' ' ')" = "1e-3 neg1e-3 "
grep -q -- "^neg1e-3: .* --x -1e-3\$" "$work/neg.out" && ok || fail "the negative point's flags: $(cat "$work/neg.out")"
for pair in "1e-3 0.001" "2 +2" "0.5 5e-1"; do
  printf 'axis x: %s\n' "$pair" > "$work/same.grid"
  expect_error "axis x: $pair" "value '${pair#* }' is the same number as the value labelled '${pair%% *}'" \
    "$bin" sweep "$work/same.grid" --out "$work/same" --dry-run
done
# words C's strtod reads as numbers and no setting does: refused when the grid is read, not by its runs
for v in 0x10 nan inf -Infinity 0x1p4; do
  printf 'axis lr: 16 %s\n' "$v" > "$work/c.grid"
  expect_error "axis lr: 16 $v" "axis lr: value '$v' is no decimal number" \
    "$bin" sweep "$work/c.grid" --out "$work/c" --dry-run
done
printf 'axis delay: 2bw 1e nano\n' > "$work/words.grid"
"$bin" sweep "$work/words.grid" --out "$work/words" --dry-run > "$work/words.out" 2> "$work/err" && ok ||
  fail "axis delay: 2bw 1e nano (words, not numbers) refused: $(cat "$work/err")"
finish
