#!/usr/bin/env bash
# tools/device/ncu_summary.py (check.sh's profile part) on a small per-kernel summary in ncu's layout: the same
# kernel under two launch shapes is added up (average x invocations, in ms), a name with parentheses of its own
# keeps them, units are converted, the table is sorted, and output without a summary or with a malformed metric
# line is refused with a message.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0; failed=0
ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
block() {  # NAME GRID INVOCATIONS UNIT AVERAGE
  printf '  %s (%s, 1, 1)x(256, 1, 1), Context 1, Stream 13, Device 0, CC 9.0, Invocations %s\n' "$1" "$2" "$3"
  printf '    Section: Command line profiler metrics\n    ---------------------- ----------- ------- ------- -------\n'
  printf '    Metric Name            Metric Unit Minimum Maximum Average\n'
  printf '    gpu__time_duration.sum          %s    1.00    9.00    %s\n\n' "$4" "$5"
}
{ echo "==PROF== Disconnected from process 1"
  block '<unnamed>::adamw_k(float *, float *, unsigned long)' 2 10 us 3.00       # 0.03 ms
  block '<unnamed>::adamw_k(float *, float *, unsigned long)' 512 4 us 5.00      # 0.02 ms: 0.05 ms together
  block 'void (anonymous namespace)::dkv_k<16>(float *, const float *)' 8 2 ms 1.50   # 3 ms
  block 'nvjet_sm90_tss_256x128_64x4_1x2_h_bz_coopA_TNT' 9 100 ns 500.00   # 0.05 ms
} > "$work/ncu.txt"
python3 "$here/tools/device/ncu_summary.py" "$work/ncu.txt" > "$work/out" 2> "$work/err" && ok || fail "ran: $(cat "$work/err")"
grep -q '^ *3.00  96.8%  (anonymous namespace)::dkv_k<16>$' "$work/out" && ok || fail "dkv_k's line: $(cat "$work/out")"
grep -q '^ *0.05   1.6%  <unnamed>::adamw_k$' "$work/out" && ok || fail "adamw_k added over its two shapes: $(cat "$work/out")"
grep -q '^ *3.10 100.0%  all 3 kernels$' "$work/out" && ok || fail "the total: $(cat "$work/out")"
[ "$(sed -n 2p "$work/out" | awk '{print $3}')" = "(anonymous" ] && ok || fail "sorted by time: $(cat "$work/out")"
echo "no summary here" > "$work/none.txt"
python3 "$here/tools/device/ncu_summary.py" "$work/none.txt" > /dev/null 2> "$work/err" && fail "no summary: exit 0" ||
  { grep -q "no per-kernel summary in $work/none.txt" "$work/err" && ok || fail "no summary: $(cat "$work/err")"; }
sed 's/    3.00$/    n\/a/' "$work/ncu.txt" > "$work/bad.txt"
python3 "$here/tools/device/ncu_summary.py" "$work/bad.txt" > /dev/null 2> "$work/err" && fail "n/a: exit 0" ||
  { grep -q "expected 'gpu__time_duration.sum UNIT MIN MAX AVERAGE'" "$work/err" && ok || fail "n/a: $(cat "$work/err")"; }
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
