#!/usr/bin/env bash
# train --init-from from the command line: the model comes from DIR/config.json (a contradicting
# --model or --set is refused with 2, an agreeing --set accepted), a refused config.json exits 1 naming
# its field, data tokenized with more tokens than the model has is refused; a run from a folder
# (`nobubble export`) starts from its weights, and with --resume continues the checkpoint; an MPI
# pipeline started from the folder (each rank loading its own layers) ends bitwise equal to the
# one-process run with the same delay.
set -u
bin=${1:?usage: cli_init_from.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
hf=tests/fixtures/hf5_untied

expect_error "--model with --init-from" "--model tiny and --init-from $hf: the model comes from $hf/config.json" \
  "$bin" train --init-from "$hf" --model tiny --steps 1
[ "$("$bin" train --init-from "$hf" --model tiny --steps 1 2>/dev/null; echo $?)" = 2 ] && ok || fail "--model: exit 2"
expect_error "a contradicting --set" "--set n_layers=3: $hf/config.json gives n_layers = 2" \
  "$bin" train --init-from "$hf" --set n_layers=3 --steps 1
[ "$("$bin" train --init-from "$hf" --set tied=1 --steps 1 2>/dev/null; echo $?)" = 2 ] && ok || fail "--set: exit 2"
expect_error "a refused config.json" \
  "--init-from: tests/fixtures/hf_refused/hf5_rope_linear/config.json: \"rope_parameters.rope_type\" is \"linear\"" \
  "$bin" train --init-from tests/fixtures/hf_refused/hf5_rope_linear --steps 1
[ "$("$bin" train --init-from tests/fixtures/hf_refused/hf5_hidden_act --steps 1 2>/dev/null; echo $?)" = 1 ] && ok ||
  fail "a refused config.json: exit 1"
expect_error "no such folder" "--init-from: config $work/none/config.json: cannot open" "$bin" train --init-from "$work/none" --steps 1

small_corpus "$bin" "$work/data" 30 && ok || fail "prepare"
expect_error "data with more tokens than the model" \
  "--data $work/data: its tokenizer has 300 tokens, more than the vocab_size 64 of $hf/config.json" \
  "$bin" train --init-from "$hf" --set n_layers=2 --data "$work/data" --steps 1

# A folder with the data's vocabulary (nobubble's export is a Hugging Face folder like any other).
"$bin" export --model tiny --set vocab_size=300 --set n_layers=2 --set d_model=32 --set n_heads=2 --set n_kv_heads=2 --set d_ffn=64 \
  --set context=32 --seed 7 --out "$work/hf" > /dev/null 2>&1 && ok || fail "export"
run=(--data "$work/data" --batch 2 --seq 16 --eval-batches 2 --quiet)
hash_of() { sed -n 's/^done: .*weights \([0-9a-f]\{16\}\)$/\1/p' "$1"; }
"$bin" train --init-from "$work/hf" "${run[@]}" --steps 2 > "$work/a.log" 2>&1 && ok || fail "run: $(tail -3 "$work/a.log")"
"$bin" train --model tiny --set vocab_size=300 --set n_layers=2 --set d_model=32 --set n_heads=2 --set n_kv_heads=2 --set d_ffn=64 \
  --set context=32 --seed 7 "${run[@]}" --steps 2 > "$work/b.log" 2>&1 && ok || fail "seeded run: $(tail -3 "$work/b.log")"
# the export of seed 7 is the seed-7 init: starting from it is starting from that init
[ -n "$(hash_of "$work/a.log")" ] && [ "$(hash_of "$work/a.log")" = "$(hash_of "$work/b.log")" ] && ok ||
  fail "from the export of seed 7: $(hash_of "$work/a.log"), from seed 7: $(hash_of "$work/b.log")"
"$bin" train --init-from "$work/hf" "${run[@]}" --steps 2 --seed 99 > "$work/c.log" 2>&1
[ "$(hash_of "$work/c.log")" = "$(hash_of "$work/a.log")" ] && ok || fail "--seed does not matter with --init-from"
# --resume with --init-from: the checkpoint's weights, a note saying so
"$bin" train --init-from "$work/hf" "${run[@]}" --steps 4 --save-dir "$work/ck" --save-every 2 > "$work/d.log" 2>&1 ||
  fail "4 steps with checkpoints: $(tail -3 "$work/d.log")"
"$bin" train --init-from "$work/hf" "${run[@]}" --steps 4 --resume "$work/ck/step_000002" > "$work/e.log" 2>&1 ||
  fail "resume: $(tail -3 "$work/e.log")"
grep -q "note: --resume $work/ck/step_000002 continues that run's weights and state; --init-from $work/hf gives only" \
  "$work/e.log" && ok || fail "resume note: $(cat "$work/e.log")"
[ -n "$(hash_of "$work/d.log")" ] && [ "$(hash_of "$work/d.log")" = "$(hash_of "$work/e.log")" ] && ok ||
  fail "resumed run $(hash_of "$work/e.log"), uninterrupted $(hash_of "$work/d.log")"

# MPI: one rank per stage, each loading its own layers
if command -v mpirun > /dev/null && "$bin" train --help 2>&1 | grep -q -- "--transport"; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  OMP_NUM_THREADS=1 "$bin" train --init-from "$work/hf" "${run[@]}" --stages 2 --delay 2bw --microbatches 2 --steps 3 \
    --threads 1 > "$work/ref.log" 2>&1 || fail "one process 2bw: $(tail -3 "$work/ref.log")"
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 120 mpirun --oversubscribe --bind-to none -np 2 \
    "$bin" train --init-from "$work/hf" "${run[@]}" --stages 2 --pipeline 2bw --transport mpi --microbatches 2 --steps 3 \
    --threads-per-stage 1 > "$work/mpi.log" 2>&1 || fail "mpirun: $(tail -5 "$work/mpi.log")"
  a=$(hash_of "$work/ref.log"); b=$(hash_of "$work/mpi.log")
  [ -n "$a" ] && [ "$a" = "$b" ] && ok || fail "MPI from --init-from: $b, one process $a"
fi

# An --init-from run's own train_config.json runs again under --config (its model fields repeat the folder's;
# it was refused), and a field that contradicts the folder is refused naming both.
"$bin" export --set n_layers=2 --set vocab_size=300 --seed 5 --out "$work/hf5" > /dev/null 2>&1 || fail "export"
"$bin" train "${run[@]}" --steps 2 --init-from "$work/hf5" --out "$work/cfa" > "$work/cfa.log" 2>&1 ||
  fail "cfa: $(tail -3 "$work/cfa.log")"
"$bin" train --config "$work/cfa/train_config.json" --out "$work/cfb" > "$work/cfb.log" 2>&1 && ok ||
  fail "--config of an --init-from run's train_config.json: $(tail -3 "$work/cfb.log")"
[ -n "$(hash_of "$work/cfa.log")" ] && [ "$(hash_of "$work/cfa.log")" = "$(hash_of "$work/cfb.log")" ] && ok ||
  fail "the --init-from run again from its train_config.json: weights $(hash_of "$work/cfb.log"), first $(hash_of "$work/cfa.log")"
printf '{"n_layers": 3}\n' > "$work/layers.json"
expect_error "a model field of --config contradicting --init-from" \
  "--config $work/layers.json: model field n_layers=3: $work/hf5/config.json gives n_layers = 2" \
  "$bin" train "${run[@]}" --steps 2 --init-from "$work/hf5" --config "$work/layers.json"
finish
