#!/usr/bin/env bash
# experiments/study.sh phases: the loop that runs a study which tunes as it goes (moe, size_axis), on a copy
# of the script in a scratch tree with a stand-in tune.py (its grid changes after each of the first two
# sweeps of a phase, then stays), a stand-in binary (a sweep that logs its grid, or fails once when told)
# and stand-ins for the whole-split evaluation and the claims table. Checked: each phase sweeps until its
# grid stops changing (3 sweeps each), every sweep is followed by a save, a failed sweep (SIGTERM's
# status) is saved and its status returned without marking the phase done, and running again resumes
# the phase that failed and leaves finished phases alone. ($1, the nobubble binary, is not used.)
set -u
source "$(dirname "$0")/support/cli_harness.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
t=$work/tree
mkdir -p "$t/experiments/fake" "$t/scripts" "$t/runs/fake"
cp "$root/experiments/study.sh" "$t/experiments/"
cat > "$t/experiments/fake/tune.py" <<'EOF'
import os, sys
phase = sys.argv[1]
path = f"runs/fake/sweeps_{phase}"
n = int(open(path).read()) if os.path.exists(path) else 0
print(f"grid {phase} v{min(n, 2)}")
EOF
cat > "$t/fake-bin" <<'EOF'
#!/usr/bin/env bash
# sweep GRID --out DIR ...: counts the sweeps of GRID's phase, logs them; fails once where DIR/fail exists
grid=$2 dir=$4
phase=$(cut -d' ' -f2 "$grid")
n=$(cat "$dir/sweeps_$phase" 2>/dev/null || echo 0)
echo $((n + 1)) > "$dir/sweeps_$phase"
echo "sweep $(cat "$grid")" >> "$dir/events"
if [ -f "$dir/fail" ]; then rm "$dir/fail"; exit 143; fi
EOF
chmod +x "$t/fake-bin"
printf '#!/usr/bin/env bash\necho save >> runs/fake/events\n' > "$t/experiments/evaluate_whole.sh"
printf '#!/usr/bin/env bash\nexit 0\n' > "$t/scripts/results.sh"
printf 'import sys\n' > "$t/experiments/claims.py"
mkdir -p "$t/results/fake"

phases() { (cd "$t" && bash experiments/study.sh phases fake "$t/fake-bin" 1 500 a b); }
phases > "$work/p1.log" 2>&1 && ok || fail "phases a b: $(cat "$work/p1.log")"
want='sweep grid a v0|save|sweep grid a v1|save|sweep grid a v2|save|sweep grid b v0|save|sweep grid b v1|save|sweep grid b v2|save|'
check "each phase until its grid stops changing, a save after every sweep" test "$(tr '\n' '|' < "$t/runs/fake/events")" = "$want"
check "both phases marked done" test -f "$t/runs/fake/done_a" -a -f "$t/runs/fake/done_b"
check "no grid left half-written" test -z "$(ls "$t/runs/fake/" | grep '\.next$')"
phases > "$work/p2.log" 2>&1 && ok || fail "phases again: $(cat "$work/p2.log")"
check "a finished study runs nothing again" test "$(tr '\n' '|' < "$t/runs/fake/events")" = "$want"

# a sweep stopped (143) in phase b: saved, its status returned, b not done; the next run resumes b only
rm "$t/runs/fake/done_b" "$t/runs/fake/events"; touch "$t/runs/fake/fail"
phases > "$work/p3.log" 2>&1
rc=$?
check "a stopped sweep's status is returned (143, got $rc)" test $rc -eq 143
check "and saved before returning" test "$(tr '\n' '|' < "$t/runs/fake/events")" = "sweep grid b v2|save|"
check "the phase is not marked done" test ! -f "$t/runs/fake/done_b"
phases > "$work/p4.log" 2>&1 && ok || fail "phases after the stop: $(cat "$work/p4.log")"
check "the rerun sweeps phase b once more, phase a not at all" \
  test "$(tr '\n' '|' < "$t/runs/fake/events")" = "sweep grid b v2|save|sweep grid b v2|save|"
expect_error "phases without a phase" "usage" bash "$t/experiments/study.sh" phases fake "$t/fake-bin" 1 500
finish
