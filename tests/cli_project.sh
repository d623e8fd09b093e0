#!/usr/bin/env bash
# nobubble project: the cluster projection's table (every row's numbers within what the layout allows,
# 2BW's tokens/s against the best synchronous schedule), its JSON rows, a run's step time predicted from
# its own measured costs and from another run's, and bad input refused with a clear message.
set -u
bin=${1:?usage: cli_project.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"

"$bin" project --help | grep -q "usage: nobubble project" && ok || fail "project --help"
"$bin" --help | grep -q "project" && ok || fail "nobubble --help lists project"

# The projection of smollm-360m: one summary row per (bandwidth, P, D) that fits.
"$bin" project --shape smollm-360m --stages 4,8 --data-parallel 1,64 --bandwidth-gbps 25,400 >"$work/p.txt" \
  2>"$work/err" || fail "projection: $(cat "$work/err")"
check "header names the shape's parameters" grep -q "361.8M parameters" "$work/p.txt"
check "8 summary rows" test "$(grep -cE '^ +(25|400) +[48] ' "$work/p.txt")" -eq 8
# The ratio column is 2bw tokens/s over the best synchronous tokens/s of the same row.
awk '$1 ~ /^[0-9]/ && NF == 13 { r = $8 / $6; if (r - $10 > 0.001 || $10 - r > 0.001) bad = 1 }
     END { exit bad }' "$work/p.txt" && ok || fail "ratio column is 2bw / sync: $(cat "$work/p.txt")"
# More bandwidth never makes a layout slower (same P and D, 2bw tokens/s).
awk '$1 == 25 && NF == 13 { slow[$2 " " $3] = $8 } $1 == 400 && NF == 13 { fast[$2 " " $3] = $8 }
     END { for (k in slow) if (fast[k] < slow[k]) exit 1 }' "$work/p.txt" && ok || fail "400 Gb/s slower than 25"

# JSON rows: every kind per point (4 synchronous at most and 2bw), each with its numbers.
"$bin" project --shape smollm-360m --stages 4 --data-parallel 16 --bandwidth-gbps 100 --json >"$work/p.json" \
  2>"$work/err" || fail "projection json: $(cat "$work/err")"
check "json rows of 5 kinds" test "$(grep -c '"pipeline"' "$work/p.json")" -eq 5
check "json has 2bw" grep -q '"pipeline": "2bw"' "$work/p.json"
check "json has fits" grep -q '"fits": true' "$work/p.json"
# A device with 1 GiB fits nothing at this size.
"$bin" project --shape smollm-360m --stages 4 --data-parallel 1 --bandwidth-gbps 100 --memory-gib 1 >"$work/m.txt" \
  2>&1 && grep -q "no pipeline fits in the memory" "$work/m.txt" && ok || fail "1 GiB fits nothing: $(cat "$work/m.txt")"

# A real run predicted: tiny, 2 stages on threads, 1f1b and 2bw; each from its own costs and from the other's.
small_corpus "$bin" "$work/data" 80 && ok || fail "prepare"
for k in 1f1b 2bw; do
  "$bin" train --data "$work/data" --model tiny --steps 6 --batch 8 --seq 32 --stages 2 --microbatches 4 \
    --pipeline "$k" --eval-batches 1 --threads-per-stage 1 --quiet --force --out "$work/$k" >/dev/null 2>"$work/err" \
    || fail "train $k: $(cat "$work/err")"
done
"$bin" project --run "$work/2bw" --json >"$work/r.json" 2>"$work/err" || fail "project --run: $(cat "$work/err")"
check "prediction names the run's kind" grep -q '"pipeline": "2bw"' "$work/r.json"
awk -F'[:,]' '{ for (i = 1; i < NF; i++) { if ($i ~ /predicted_step_s/) p = $(i + 1); if ($i ~ /measured_step_s/) m = $(i + 1) } }
     END { exit !(p > 0 && m > 0) }' "$work/r.json" && ok || fail "predicted and measured step times > 0: $(cat "$work/r.json")"
"$bin" project --run "$work/2bw" --costs-from "$work/1f1b" >"$work/r.txt" 2>"$work/err" \
  || fail "project --costs-from: $(cat "$work/err")"
check "prediction text" grep -q "costs from $work/1f1b" "$work/r.txt"

# Bad input: named flag or file, and what was expected.
expect_error "neither shape nor run" "expected one of --shape" "$bin" project
expect_error "both shape and run" "expected one of --shape" "$bin" project --shape tiny --run "$work/2bw"
expect_error "unknown shape" "expected dense-10b or a preset" "$bin" project --shape huge
expect_error "mixture of experts" "dense models only" "$bin" project --shape moe-tiny
expect_error "bad stages list" "--stages '4,x'" "$bin" project --shape tiny --stages 4,x
expect_error "a repeated --stages" "--stages '2,2': 2 given twice" "$bin" project --shape tiny --stages 2,2
expect_error "a repeated bandwidth" "--bandwidth-gbps '100,100': 100 given twice" "$bin" project --shape tiny --bandwidth-gbps 100,100
# nothing projected (tiny has 4 blocks): an error, not a table of skipped rows (nor, with --json, nothing) and exit 0
expect_error "no layout projected" "no layout of shape tiny could be projected" "$bin" project --shape tiny --stages 8
expect_error "no layout projected, --json" "no layout of shape tiny could be projected" \
  "$bin" project --shape tiny --stages 8 --json
expect_error "zero bandwidth" "--bandwidth-gbps '0'" "$bin" project --shape tiny --bandwidth-gbps 0
expect_error "bad --set" "n_layers = 0" "$bin" project --shape tiny --set n_layers=0
expect_error "missing run" "summary.json" "$bin" project --run "$work/none"
for f in "--stages 4" "--data-parallel 4" "--tflops 1" "--seq 7" "--memory-gib 1" "--all"; do
  expect_error "--run with ${f%% *}" "${f%% *} goes with --shape: --run $work/2bw predicts from the run's own" \
    "$bin" project --run "$work/2bw" $f
done

expect_error "costs without run" "go with --run" "$bin" project --shape tiny --costs-from "$work/2bw"
"$bin" train --data "$work/data" --model tiny --steps 6 --batch 8 --seq 32 --stages 2 --microbatches 2 \
  --pipeline 1f1b --eval-batches 1 --threads-per-stage 1 --quiet --force --out "$work/m2" >/dev/null 2>&1
expect_error "costs of another M" "run.microbatches = 2, --run $work/2bw has 4: expected the same model" \
  "$bin" project --run "$work/2bw" --costs-from "$work/m2"
# Every model field and cost-changing setting is compared (only P, M, the batch and d_model were: a deeper model's or
# a MoE model's costs predicted the dense run's step 88% off, silently)
for v in "n_layers=3|--set n_layers=3|model.n_layers = 3" "moe|--set n_experts=2 --set experts_per_token=1 --set moe_every=1|model.n_experts = 2" \
         "muon|--optimizer muon|run.optimizer = 'muon'"; do
  IFS='|' read -r name flags want <<< "$v"
  "$bin" train --data "$work/data" --model tiny --steps 6 --batch 8 --seq 32 --stages 2 --microbatches 4 $flags \
    --pipeline 1f1b --eval-batches 1 --threads-per-stage 1 --quiet --force --out "$work/c_$name" >/dev/null 2>&1 ||
    fail "train $name"
  expect_error "costs of another model or optimizer ($name)" "--costs-from $work/c_$name: $want, --run $work/2bw has" \
    "$bin" project --run "$work/2bw" --costs-from "$work/c_$name"
done
expect_error "run without a pipeline" "summary.json" "$bin" project --run "$work/data"

# An interleaved run (2 workers x 2 chunks): its costs are its workers' (each worker's 2 virtual stages
# summed); on the same costs the simulator's interleaved step is shorter than 1F1B's (bubble (P - 1) / v
# micro-batches against P - 1), and the run's summary reports each worker.
"$bin" train --data "$work/data" --model tiny --steps 6 --batch 8 --seq 32 --stages 2 --microbatches 4 \
  --pipeline interleaved --eval-batches 1 --threads-per-stage 1 --quiet --force --out "$work/il" >/dev/null 2>&1
"$bin" project --run "$work/il" --json >"$work/il.json" 2>"$work/err" || fail "project --run interleaved: $(cat "$work/err")"
check "interleaved prediction names its 2 chunks" grep -q '"pipeline": "interleaved", "stages": 2, "replicas": 1, "chunks": 2' "$work/il.json"
"$bin" project --run "$work/il" --pipeline 1f1b --json >"$work/il1.json" 2>"$work/err" || fail "il as 1f1b: $(cat "$work/err")"
step_of() { sed -n 's/.*"predicted_step_s": \([0-9.e+-]*\).*/\1/p' "$1"; }
awk -v a="$(step_of "$work/il.json")" -v b="$(step_of "$work/il1.json")" 'BEGIN { exit !(a > 0 && a < b) }' && ok \
  || fail "interleaved predicted $(step_of "$work/il.json") s, 1F1B on its costs $(step_of "$work/il1.json") s: expected less"
python3 - "$work/il/summary.json" <<'PY' && ok || fail "summary.json's workers of the interleaved run"
import json, sys
p = json.load(open(sys.argv[1]))["pipeline"]
w, s = p["workers"], p["stages"]
assert [x["stages"] for x in w] == [[0, 2], [1, 3]], w
for k, x in enumerate(w):  # a worker's busy time is its two virtual stages'
    assert abs(x["busy_s"] - s[k]["busy_s"] - s[k + 2]["busy_s"]) < 2e-6 and 0 <= x["idle_fraction"] < 1, (x, s)
PY
finish
