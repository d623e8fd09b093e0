#!/usr/bin/env bash
# nobubble schedule: the text timeline and numbers, a well-formed SVG with one box per action,
# JSON, a P = 1024 projection, the lowered lists (text, JSON, SVG), the schedule-only kinds (interleaved,
# zbh1) and --compare, and bad input refused with a clear message and a non-zero exit.
set -u
bin=${1:?usage: cli_schedule.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
count() { grep -o -- "$1" "$2" | wc -l | tr -d ' '; }

"$bin" schedule --help | grep -q "usage: nobubble schedule" && ok || fail "schedule --help"
"$bin" --help | grep -q "schedule" && ok || fail "nobubble --help lists schedule"

# Text: 1F1B, P = 4, M = 8, f = b: bubble (P-1)/(M+P-1) = 3/11.
"$bin" schedule --kind 1f1b --stages 4 --microbatches 8 --forward-cost 1 --backward-cost 1 >"$work/t.txt" 2>"$work/err" \
  || fail "1f1b text run: $(cat "$work/err")"
check "1f1b bubble 3/11" grep -q "bubble fraction 0.2727" "$work/t.txt"
check "4 grid rows" test "$(grep -c '^stage [0-9]' "$work/t.txt")" -eq 4
check "grid shows forwards and idle" grep -q '^stage 3  \.\.\.F' "$work/t.txt"
check "peak table" grep -q "peak versions" "$work/t.txt"
# the table row of stage 0: busy 16, idle 6, peak activations 4 (P - s), 1 version
check "stage 0 row" grep -Eq '^0 +16 +6 +27\.3% +4 +1$' "$work/t.txt"

# SVG: GPipe P = 3, M = 4, S = 2: 24 forward, 24 backward, 6 update boxes, idle boxes, 4 legend boxes.
"$bin" schedule --kind gpipe --stages 3 --microbatches 4 --steps 2 --update-cost 0.5 --comm-cost 0.25 \
  --svg "$work/g.svg" >"$work/g.txt" 2>"$work/err" || fail "gpipe svg run: $(cat "$work/err")"
check "svg starts with <svg" test "$(head -c 4 "$work/g.svg")" = "<svg"
check "svg ends with </svg>" test "$(tail -n 1 "$work/g.svg")" = "</svg>"
check "24 forward boxes" test "$(count 'class="fwd"' "$work/g.svg")" -eq 24
check "24 backward boxes" test "$(count 'class="bwd"' "$work/g.svg")" -eq 24
check "6 update boxes" test "$(count 'class="upd"' "$work/g.svg")" -eq 6
check "4 legend boxes" test "$(count 'class="legend"' "$work/g.svg")" -eq 4
idle=$(count 'class="idle"' "$work/g.svg")
check "idle boxes" test "$idle" -gt 0
check "every <rect> is an action, idle or legend box" test "$(count '<rect' "$work/g.svg")" -eq $((24 + 24 + 6 + 4 + idle))
check "svg title has the bubble fraction" grep -q "<title>gpipe: 3 stages.*bubble fraction 0\.[0-9]*" "$work/g.svg"
check "micro-batch numbers in boxes" grep -q '>7</text>' "$work/g.svg"
check "text mentions the svg" grep -q "wrote $work/g.svg" "$work/g.txt"
if command -v xmllint >/dev/null; then check "svg is well-formed XML" xmllint --noout "$work/g.svg"; fi

# JSON: PipeDream P = 4 holds P - s versions at stage s.
"$bin" schedule --kind pipedream --stages 4 --microbatches 4 --steps 2 --json >"$work/p.json" 2>"$work/err" \
  || fail "pipedream json: $(cat "$work/err")"
check "json object" test "$(head -c 1 "$work/p.json")" = "{"
check "json braces balance" test "$(count '{' "$work/p.json")" -eq "$(count '}' "$work/p.json")"
check "json has the bubble fraction" grep -q '"bubble_fraction": 0\.' "$work/p.json"
check "json: 8 optimizer steps" grep -q '"optimizer_steps": 8' "$work/p.json"
check "json peak versions P - s" test "$(grep -o '"peak_versions": [0-9]*' "$work/p.json" | awk '{printf "%s", $2}')" = "4321"
check "json has no grid" bash -c "! grep -q '^stage' '$work/p.json'"
if command -v python3 >/dev/null && python3 -c 'import json' 2>/dev/null; then
  check "json parses" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["per_stage"]) == 4' "$work/p.json"
fi
"$bin" schedule --kind 2bw --stages 4 --microbatches 4 --steps 64 --json >"$work/b.json" || fail "2bw json"
check "2bw steady idle below 3%" grep -q '"steady_state_idle_fraction": 0\.0[0-2]' "$work/b.json"
check "2bw 2 versions" test "$(count '"peak_versions": 2' "$work/b.json")" -eq 4

# Projection to P = 1024 (per-stage cost list of one value): the grid is skipped with a note.
"$bin" schedule --kind 2bw --stages 1024 --microbatches 1024 --forward-cost 1.5 --comm-cost 0.1 >"$work/l.txt" 2>"$work/err" \
  || fail "P=1024: $(cat "$work/err")"
check "P=1024 grid skipped" grep -q "grid skipped" "$work/l.txt"
check "P=1024 table" test "$(grep -c '^[0-9]' "$work/l.txt")" -eq 1024

# Per-stage cost lists.
"$bin" schedule --kind gpipe --stages 2 --microbatches 4 --forward-cost 1,2 --backward-cost 1,2 --json >"$work/c.json" \
  || fail "cost lists"
check "per-stage costs: makespan 18" grep -q '"makespan": 18,' "$work/c.json"

# Sequential (the one-process order): no overlap, so every stage idles while the others work.
"$bin" schedule --kind sequential --stages 3 --microbatches 2 >"$work/q.txt" 2>"$work/err" || fail "sequential: $(cat "$work/err")"
check "sequential makespan 18" grep -q "^makespan 18;" "$work/q.txt"

# Lowered: the lists a run executes, every message a SEND and its RECV, and the coordinator.
"$bin" schedule --kind 1f1b --stages 2 --microbatches 2 --lowered >"$work/lo.txt" 2>"$work/err" || fail "lowered: $(cat "$work/err")"
check "lowered: stage 0 sends ACT(0)" grep -Eq '^ +1 +1 +SEND ACT\(0\) -> stage 1$' "$work/lo.txt"
check "lowered: stage 1 receives it" grep -Eq '^ +0 +1 +RECV ACT\(0\) <- stage 0$' "$work/lo.txt"
check "lowered: the coordinator's list" grep -q '^coordinator: 6 actions' "$work/lo.txt"
check "lowered: makespan as the schedule's" grep -q '^makespan 9$' "$work/lo.txt"
check "lowered: message table" grep -Eq '^STATS +2 +0$' "$work/lo.txt"
for kind in gpipe 1f1b 2bw pipedream sequential interleaved zbh1; do
  m=4; [ $kind = interleaved ] && m=6  # a multiple of the 3 stages
  a=$("$bin" schedule --kind $kind --stages 3 --microbatches $m --steps 2 --comm-cost 0.5 --update-cost 0.25 | sed -n 's/^makespan \([0-9.]*\);.*/\1/p')
  b=$("$bin" schedule --kind $kind --stages 3 --microbatches $m --steps 2 --comm-cost 0.5 --update-cost 0.25 --lowered | sed -n 's/^makespan //p')
  check "lowered $kind: makespan $b equals the schedule's $a" test -n "$a" -a "$a" = "$b"
done
"$bin" schedule --kind 2bw --stages 2 --microbatches 2 --steps 4 --lowered --tied --clip --eval-every 2 --eval-batches 2 \
  --save-every 2 >"$work/lo2.txt" 2>"$work/err" || fail "lowered with options: $(cat "$work/err")"
for m in 'SEND TIED_GRAD(0) -> stage 0' 'RECV TIED_W(1) <- stage 0' 'SEND NORM(0) -> stage 1' 'RECV EVAL_ACT(1) <- stage 0' \
         'SEND EVAL_LOSS(1) -> coordinator' 'SEND SAVED(3) -> coordinator' 'RECV END(0) <- coordinator' 'COMMIT(3)'; do
  check "lowered with options: $m" grep -qF "$m" "$work/lo2.txt"
done
"$bin" schedule --kind gpipe --stages 3 --microbatches 2 --steps 2 --lowered --clip --act-bytes 100 --bandwidth 50 --json \
  --svg "$work/lo.svg" >"$work/lo.json" 2>"$work/err" || fail "lowered json: $(cat "$work/err")"
check "lowered json: lowered" grep -q '"lowered": true' "$work/lo.json"
check "lowered json: ACT bytes" grep -q '"ACT": {"count": 8, "bytes": 800}' "$work/lo.json"
if command -v python3 >/dev/null; then
  check "lowered json: P + 1 endpoints, every SEND with its RECV" python3 -c '
import json, sys, collections
d = json.load(open(sys.argv[1])); e = d["endpoints"]; assert len(e) == 4 and e[3]["name"] == "coordinator"
c = collections.Counter()
for i, x in enumerate(e):
    for a in x["actions"]:
        if a["op"] == "SEND": c[(i, a["peer"], a["msg"], a["index"])] += 1
        if a["op"] == "RECV": c[(a["peer"], i, a["msg"], a["index"])] -= 1
assert not any(c.values()), c' "$work/lo.json"
fi
msgs=$(grep -o '"count": [0-9]*' "$work/lo.json" | awk '{n += $2} END {print n}')
check "lowered svg: one arrow per message ($msgs)" test "$(count 'class="msg"' "$work/lo.svg")" -eq "$msgs"
check "lowered svg: coordinator row" grep -q '>coordinator</text>' "$work/lo.svg"
if command -v xmllint >/dev/null; then check "lowered svg is well-formed XML" xmllint --noout "$work/lo.svg"; fi

# ZB-H1, P = 4, M = 8, F = B = W = 1: a third of 1F1B's bubble, (P-1)/(3M+P-1) = 3/27, each stage holding P.
"$bin" schedule --kind zbh1 --stages 4 --microbatches 8 >"$work/z.txt" 2>"$work/err" || fail "zbh1 text: $(cat "$work/err")"
check "zbh1 bubble 3/27" grep -q "^makespan 27; bubble fraction 0.1111" "$work/z.txt"
check "zbh1 legend: B and W" grep -q "B input gradient, W weight gradient" "$work/z.txt"
# the last stage holds back its first 3 W's to the end of the step
check "zbh1 grid: the last stage" grep -q '^stage 3  \.\.\.FBFBFBFBWFBWFBWFBWFBWWWW$' "$work/z.txt"
check "zbh1 grid: stage 0" grep -q '^stage 0  FFFF\.\.\.BWFBWFBWFBWFBWBWBWBW$' "$work/z.txt"
check "zbh1 stage 0 row: P activations" grep -Eq '^0 +24 +3 +11\.1% +4 +1$' "$work/z.txt"
"$bin" schedule --pipeline zbh1 --stages 4 --microbatches 8 >"$work/z2.txt" 2>&1
check "--pipeline is --kind" cmp -s "$work/z.txt" "$work/z2.txt"
"$bin" schedule --kind zbh1 --stages 3 --microbatches 4 --svg "$work/z.svg" >/dev/null 2>"$work/err" || fail "zbh1 svg: $(cat "$work/err")"
check "zbh1 svg: 12 forward, 12 input-gradient, 12 weight-gradient boxes" \
  test "$(count 'class="fwd"' "$work/z.svg") $(count 'class="bwd"' "$work/z.svg") $(count 'class="wgt"' "$work/z.svg")" = "12 12 12"
check "zbh1 svg: 5 legend boxes" test "$(count 'class="legend"' "$work/z.svg")" -eq 5
if command -v xmllint >/dev/null; then check "zbh1 svg is well-formed XML" xmllint --noout "$work/z.svg"; fi
"$bin" schedule --kind zbh1 --stages 2 --microbatches 2 --lowered >"$work/zl.txt" 2>"$work/err" || fail "zbh1 lowered: $(cat "$work/err")"
check "zbh1 lowered: the W's" grep -q "BACKWARD_WEIGHT mb 1 (step 0, version 0)" "$work/zl.txt"
check "zbh1 lowered: the B's" grep -q "BACKWARD_INPUT mb 0 (step 0, version 0)" "$work/zl.txt"
"$bin" schedule --kind zbh1 --stages 4 --microbatches 8 --backward-cost 3 --backward-weight-cost 1 --json >"$work/zw.json" \
  || fail "zbh1 with a W cost"
check "zbh1 F=1 B=2 W=1: makespan (P-1)(F+B-W) + M(F+B+W) = 6 + 32" grep -q '"makespan": 38,' "$work/zw.json"

# Interleaved, P = 4, M = 8, v = 2, f = b: 1F1B's bubble divided by v, (P-1)/(vM+P-1) = 3/19; stage 0 holds
# P + (P-1)/v = 5.5 micro-batches.
"$bin" schedule --kind interleaved --chunks 2 --stages 4 --microbatches 8 --forward-cost 1 --backward-cost 1 >"$work/i.txt" \
  2>"$work/err" || fail "interleaved text: $(cat "$work/err")"
check "interleaved bubble 3/19" grep -q "^makespan 19; bubble fraction 0.1579" "$work/i.txt"
check "interleaved: a grid row per stage and chunk" test "$(grep -c '^stage [0-9] c[01] ' "$work/i.txt")" -eq 8
check "interleaved: chunk 1 of stage 3 starts after 7 half-units" grep -q '^stage 3 c1    \.\.\.    FBFB' "$work/i.txt"
check "interleaved stage 0 row: 5.5 micro-batches" grep -Eq '^0 +16 +3 +15\.8% +5\.5 +1$' "$work/i.txt"
"$bin" schedule --kind interleaved --stages 2 --microbatches 2 --lowered >"$work/il.txt" 2>"$work/err" || fail "interleaved lowered: $(cat "$work/err")"
check "interleaved lowered: chunk 1 of stage 0 sends on" grep -q "SEND ACT(0, chunk 1) -> stage 1" "$work/il.txt"
check "interleaved lowered: the last stage sends to stage 0" grep -Eq "^ +[0-9]+ +[0-9.]+ +SEND ACT\(1\) -> stage 0$" "$work/il.txt"
check "interleaved lowered: FORWARD of chunk 1" grep -q "FORWARD mb 1 chunk 1 (step 0, version 0)" "$work/il.txt"
"$bin" schedule --kind interleaved --chunks 3 --stages 2 --microbatches 4 --json >"$work/i.json" || fail "interleaved json"
check "interleaved json: 3 chunks" grep -q '"chunks": 3,' "$work/i.json"

# --compare: every kind side by side; interleaved and zbh1 below 1f1b's bubble.
"$bin" schedule --compare --stages 4 --microbatches 8 >"$work/cmp.txt" 2>"$work/err" || fail "compare: $(cat "$work/err")"
bubble_of() { awk -v k="$1" '$1 == k {print $2}' "$work/cmp.txt"; }
check "compare: a row per kind" test "$(grep -cE '^(gpipe|1f1b|pipedream|2bw|interleaved|zbh1) ' "$work/cmp.txt")" -eq 6
check "compare: 1f1b 0.2727, interleaved 0.1579, zbh1 0.1111" \
  test "$(bubble_of 1f1b) $(bubble_of interleaved) $(bubble_of zbh1)" = "0.2727 0.1579 0.1111"
check "compare: interleaved and zbh1 below 1f1b" awk -v a="$(bubble_of interleaved)" -v b="$(bubble_of zbh1)" \
  -v c="$(bubble_of 1f1b)" 'BEGIN { exit !(a < c && b < c) }'
check "compare: gpipe holds M, 1f1b and zbh1 P, interleaved P + (P-1)/v" \
  test "$(awk '$1 ~ /^(gpipe|1f1b|interleaved|zbh1)$/ {printf "%s ", $4}' "$work/cmp.txt")" = "8 4 5.5 4 "
check "compare: pipedream holds P versions, the synchronous kinds 1" \
  test "$(awk '$1 ~ /^(gpipe|1f1b|pipedream|interleaved|zbh1)$/ {printf "%s ", $5}' "$work/cmp.txt")" = "1 1 4 1 1 "
check "compare: every kind trained" test "$(grep -cE '^(gpipe|1f1b|pipedream|2bw|interleaved|zbh1) .* yes$' "$work/cmp.txt")" -eq 6
"$bin" schedule --compare --stages 2 --microbatches 4 --steps 3 --chunks 4 --json >"$work/cmp.json" || fail "compare json"
check "compare json: 6 kinds" test "$(count '"kind":' "$work/cmp.json")" -eq 6
check "compare json: interleaved with 4 chunks" grep -q '"kind": "interleaved", "chunks": 4,' "$work/cmp.json"
if command -v python3 >/dev/null; then
  check "compare json parses; 2bw holds 2 versions" python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); k = {x["kind"]: x for x in d["kinds"]}
assert d["compare"] and len(k) == 6 and k["2bw"]["peak_versions"] == 2
assert k["interleaved"]["bubble_fraction"] < k["1f1b"]["bubble_fraction"] and k["zbh1"]["trained"] and k["interleaved"]["trained"]' "$work/cmp.json"
fi

# (Both new kinds train: tests/cli_zbh1.sh, tests/cli_interleaved.sh.)

# Bad input.
expect_error "chunks 0" "--chunks 0: out of range, expected an integer from 1 to 64" "$bin" schedule --kind interleaved --chunks 0 --stages 2 --microbatches 2
expect_error "chunks for 1f1b" "--chunks 2: only --kind interleaved has model chunks" "$bin" schedule --kind 1f1b --chunks 2 --stages 2 --microbatches 2
expect_error "interleaved M not a multiple of P" "--microbatches 6 with --stages 4: interleaved needs M a multiple of P" \
  "$bin" schedule --kind interleaved --stages 4 --microbatches 6
expect_error "M < P for zbh1" "--microbatches 3 with --stages 4: zbh1 needs M >= P" "$bin" schedule --kind zbh1 --stages 4 --microbatches 3
expect_error "compare with M < P" "--microbatches 2 with --stages 4: 1f1b needs M >= P" "$bin" schedule --compare --stages 4 --microbatches 2
expect_error "compare with M not a multiple of P" "--microbatches 6 with --stages 4: interleaved needs M a multiple of P" \
  "$bin" schedule --compare --stages 4 --microbatches 6
expect_error "compare and kind" "leave out --kind" "$bin" schedule --compare --kind 1f1b --stages 2 --microbatches 2
expect_error "W cost not below the backward" "backward weight cost of stage 0 = 2: expected a number > 0 and below the backward's 2" \
  "$bin" schedule --kind zbh1 --stages 2 --microbatches 2 --backward-weight-cost 2
expect_error "W cost for 1f1b" "only --kind zbh1 splits the backward" "$bin" schedule --kind 1f1b --stages 2 --microbatches 2 --backward-weight-cost 1
expect_error "evaluation through chunks" "evaluation through 2 model chunks per stage (interleaved) is not lowered yet" \
  "$bin" schedule --kind interleaved --stages 2 --microbatches 2 --lowered --eval-every 1

expect_error "lowering flag without --lowered" "add --lowered" "$bin" schedule --kind gpipe --stages 2 --microbatches 2 --clip
expect_error "eval batches 0" "--eval-batches 0: out of range" "$bin" schedule --kind gpipe --stages 2 --microbatches 2 --lowered --eval-every 1 --eval-batches 0
expect_error "unknown kind" "expected one of gpipe, 1f1b, pipedream, 2bw" "$bin" schedule --kind zerobubble --stages 2 --microbatches 2
expect_error "missing kind" "--kind is required" "$bin" schedule --stages 2 --microbatches 2
expect_error "P = 0" "--stages 0: out of range, expected an integer from 1 to 1024" "$bin" schedule --kind gpipe --stages 0 --microbatches 2
expect_error "P not a number" "--stages 'four': expected an integer" "$bin" schedule --kind gpipe --stages four --microbatches 2
expect_error "M < P for 1f1b" "1f1b needs M >= P" "$bin" schedule --kind 1f1b --stages 4 --microbatches 3
expect_error "M < P for 2bw" "2bw needs M >= P" "$bin" schedule --kind 2bw --stages 4 --microbatches 2
expect_error "zero forward cost" "--forward-cost '0': 0: expected a cost > 0" "$bin" schedule --kind gpipe --stages 2 --microbatches 2 --forward-cost 0
expect_error "negative backward cost" "--backward-cost '1,-2'" "$bin" schedule --kind gpipe --stages 2 --microbatches 2 --backward-cost 1,-2
expect_error "cost not a number" "'abc' is not a decimal number" "$bin" schedule --kind gpipe --stages 2 --microbatches 2 --backward-cost abc
expect_error "cost list length" "2 values for 4 stages: expected 1 value or 4" "$bin" schedule --kind gpipe --stages 4 --microbatches 4 --forward-cost 1,2
expect_error "negative update cost" "--update-cost '-1'" "$bin" schedule --kind gpipe --stages 2 --microbatches 2 --update-cost -1
expect_error "comm list" "--comm-cost '1,2': 2 values: expected one value" "$bin" schedule --kind gpipe --stages 2 --microbatches 2 --comm-cost 1,2
expect_error "unwritable svg" "cannot write" "$bin" schedule --kind gpipe --stages 2 --microbatches 2 --svg "$work/no/such/dir/x.svg"
expect_error "steps 0" "--steps 0" "$bin" schedule --kind gpipe --stages 2 --microbatches 2 --steps 0

finish
