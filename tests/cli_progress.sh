#!/usr/bin/env bash
# train's progress lines and --tensorboard at the command line: the fp32 peak line at the start, and
# on every progress line MFU (GFLOP/s over that peak, checked against the two printed numbers),
# elapsed time and ETA in their documented form (0:00 on the last step; no timing is asserted);
# --quiet measures nothing; --tensorboard writes one new events file per run, and a folder
# that cannot be made is refused naming the flag.
set -u
bin=${1:?usage: cli_progress.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
small_corpus "$bin" "$work/data" || fail "prepare"
small=(--data "$work/data" --set n_layers=2 --set context=16 --batch 2 --threads 1)

"$bin" train "${small[@]}" --steps 6 --log-every 2 --eval-every 3 > "$work/out" 2>&1 || fail "train: $(cat "$work/out")"
peak=$(sed -n 's/^fp32 peak \([0-9.]*\) GFLOP\/s (\(avx512\|avx2\|scalar\) FMAs on 1 thread(s), measured in \([0-9.]*\) s): MFU is against it$/\1 \3/p' "$work/out")
[ -n "$peak" ] && ok || fail "no peak line: $(head -5 "$work/out")"
read -r peak_gflops peak_s <<< "$peak"
lines=$(grep -c '^step ' "$work/out")
[ "$lines" -eq 4 ] && ok || fail "$lines progress lines, expected 4 (steps 1, 3 with val, 5, 6)"
re='^step +[0-9]+/6 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| +[0-9]+ tok/s \| +[0-9.]+ GFLOP/s \| MFU +[0-9.]+% \| [0-9]+:[0-9][0-9] elapsed \| ETA [0-9]+:[0-9][0-9]( \| val [0-9.]+)?$'
bad=$(grep '^step ' "$work/out" | grep -Ev "$re")
[ -z "$bad" ] && ok || fail "progress lines not in the documented form: $bad"
grep -q '^step     6/6 .*| ETA 0:00' "$work/out" && ok || fail "the last step's ETA is not 0:00: $(grep '^step     6/6' "$work/out")"
# MFU = GFLOP/s / peak, to the printed precision: GFLOP/s, the peak and MFU each have one decimal, so
# the printed MFU lies between 100 (g - 0.05) / (p + 0.05) and 100 (g + 0.05) / (p - 0.05), each side
# widened by MFU's own rounding (0.05). (The peak's rounding matters where the peak is small, as under
# the sanitizers: 3.5 / 6.9 printed as 51.5%.)
mfu_bad=$(grep '^step ' "$work/out" | awk -v p="$peak_gflops" '{
  for (i = 1; i <= NF; i++) { if ($i == "GFLOP/s") g = $(i - 1); if ($i == "MFU") m = $(i + 1) }
  sub("%", "", m); m += 0; lo = 100 * (g - 0.05) / (p + 0.05) - 0.05; hi = 100 * (g + 0.05) / (p - 0.05) + 0.05
  if (m < lo || m > hi) print "MFU " m "% against " g " / " p }')
[ -z "$mfu_bad" ] && ok || fail "MFU does not equal GFLOP/s over the peak: $mfu_bad"

"$bin" train "${small[@]}" --steps 2 --quiet > "$work/quiet" 2>&1 || fail "quiet train"
grep -q 'peak' "$work/quiet" && fail "--quiet measured the peak: $(cat "$work/quiet")" || ok

# --tensorboard: a folder made, one new file per run (the second run's does not replace the first's)
for k in 1 2; do
  "$bin" train "${small[@]}" --steps 2 --quiet --tensorboard "$work/tb/deep" > /dev/null 2>&1 || fail "train --tensorboard ($k)"
done
n=$(ls "$work/tb/deep" | grep -c '^events\.out\.tfevents\.[0-9]*\..*\.nobubble$')
[ "$n" -eq 2 ] && ok || fail "$n event files after two runs, expected 2: $(ls "$work/tb/deep")"
touch "$work/file"
expect_error "--tensorboard under a file" "--tensorboard" "$bin" train "${small[@]}" --steps 1 --quiet --tensorboard "$work/file/tb"
finish
