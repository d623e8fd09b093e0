#!/usr/bin/env bash
# nobubble schedule: the text timeline and numbers, a well-formed SVG with one box per action,
# JSON, a P = 1024 projection, the lowered lists (text, JSON, SVG), and bad input refused with a clear message and a non-zero exit.
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
for kind in gpipe 1f1b 2bw pipedream sequential; do
  a=$("$bin" schedule --kind $kind --stages 3 --microbatches 4 --steps 2 --comm-cost 0.5 --update-cost 0.25 | sed -n 's/^makespan \([0-9.]*\);.*/\1/p')
  b=$("$bin" schedule --kind $kind --stages 3 --microbatches 4 --steps 2 --comm-cost 0.5 --update-cost 0.25 --lowered | sed -n 's/^makespan //p')
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

# Bad input.
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
