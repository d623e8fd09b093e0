#!/usr/bin/env bash
# experiments/studies.sh, which starts, pauses and stops the three background studies together, on a copy
# in a scratch tree whose run.sh scripts are stand-ins: each logs its sweep's points to its sweep.log, runs
# a stand-in sweep (a process with " sweep " in its command line, as the real binary's) that ends on
# SIGTERM with status 143, then "saves" (a file) and exits with the sweep's status, as the real run.sh
# does. Checked: start starts each once (NAME:JOBS with JOBS runs at a time) (the bf16 size axis only on a CPU with AVX-512 BF16 or AMX); status names the running point; pause stops every process of a
# study (state T) and continue resumes it; stop sends SIGTERM to each sweep (a child, or a grandchild as
# with study.sh phases), waits for each run.sh to save and exit; bad names are refused. Only the studies
# run from the scratch tree are touched (studies.sh picks its run.sh processes by their working folder),
# so the test is safe beside real studies.
# ($1, the nobubble binary, is not used.)
set -u
source "$(dirname "$0")/support/cli_harness.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
t=$work/tree
mkdir -p "$t/experiments" "$t/runs"
cp "$root/experiments/studies.sh" "$t/experiments/"
cat > "$t/sweep" <<'EOF'
#!/usr/bin/env bash
# the stand-in sweep: SIGTERM ends it with 143 (the real one checkpoints its points first)
trap 'exit 143' TERM
while :; do sleep 0.1; done
EOF
chmod +x "$t/sweep"
for name in claim_10k moe size_axis; do
  mkdir -p "$t/experiments/$name" "$t/runs/$name"
  if [ $name = moe ]; then  # the sweep a grandchild (study.sh phases runs it for moe and size_axis)
    sweep_line="bash -c '\"\$0\" sweep grid --out runs/$name; exit \$?' ./sweep || rc=\$?"
  else
    sweep_line="./sweep sweep grid --out runs/$name || rc=\$?"
  fi
  cat > "$t/experiments/$name/run.sh" <<EOF
#!/usr/bin/env bash
cd "\$(dirname "\$0")/../.."
echo "1 start point_$name" >> runs/$name/sweep.log
echo "jobs \$1" > runs/$name/jobs
rc=0
$sweep_line
echo "saved \$rc" > runs/$name/saved
exit \$rc
EOF
done
studies() { (cd "$t" && bash experiments/studies.sh "$@"); }
t=$(cd "$t" && pwd -P)
mine() {  # the PIDs matching a pattern whose working folder is the scratch tree (never a real study's)
  local pid
  for pid in $(pgrep -f "$1"); do [ "$(readlink "/proc/$pid/cwd")" = "$t" ] && echo "$pid"; done
}

# without names: the size axis (bf16) only where the CPU has AVX-512 BF16 or AMX (NB_CPUINFO stands for
# /proc/cpuinfo here)
printf 'flags\t\t: fpu sse avx avx2 fma\n' > "$work/cpuinfo.avx2"
printf 'flags\t\t: fpu sse avx avx2 avx512f avx512_bf16\n' > "$work/cpuinfo.bf16"
NB_CPUINFO=$work/cpuinfo.avx2 studies start > "$work/start.log" 2>&1 && ok || fail "start: $(cat "$work/start.log")"
check "on AVX2 alone, the two fp32 studies start" test "$(grep -c ' started, 1 run(s) at a time (log: runs/' "$work/start.log")" = 2
check "and the size axis is left, said" grep -q "size_axis not started: this CPU has no AVX-512 BF16 or AMX" "$work/start.log"
NB_CPUINFO=$work/cpuinfo.bf16 studies start > "$work/start.log" 2>&1 && ok || fail "start: $(cat "$work/start.log")"
check "with AVX-512 BF16 the size axis starts too" grep -q "^studies.sh: size_axis started" "$work/start.log"
sleep 1
studies start moe > "$work/start2.log" 2>&1
check "a running study is not started twice" grep -q "moe is already running" "$work/start2.log"
studies status > "$work/status.log" 2>&1
check "status: running, and the running point" grep -q "^moe: running; 0 finished in runs/, 0 saved in results/; running now: point_moe" "$work/status.log"
studies pause > /dev/null 2>&1
sleep 0.5
state=$(ps -o stat= -p "$(mine "^bash experiments/size_axis/run.sh")" | cut -c1)
sweep_state=$(ps -o stat= -p "$(mine "sweep grid --out runs/size_axis")" | cut -c1)
check "pause stops run.sh and its sweep ($state, $sweep_state)" test "$state$sweep_state" = TT
studies continue > /dev/null 2>&1
sleep 0.5
sweep_state=$(ps -o stat= -p "$(mine "sweep grid --out runs/size_axis")" | cut -c1)
check "continue resumes them ($sweep_state)" test "$sweep_state" != T
timeout 60 bash -c "cd '$t' && bash experiments/studies.sh stop" > "$work/stop.log" 2>&1 && ok || fail "stop: $(cat "$work/stop.log")"
for name in claim_10k moe size_axis; do
  check "stop: $name's sweep ended by SIGTERM and saved" grep -qx "saved 143" "$t/runs/$name/saved"
  check "stop: $name's run.sh has exited" test -z "$(mine "^bash experiments/$name/run.sh")"
done
studies status > "$work/status2.log" 2>&1
check "status after stop" test "$(grep -c ': stopped;' "$work/status2.log")" = 3
# NAME:JOBS: that study's run.sh given JOBS (runs at a time)
studies start moe:2 > "$work/start3.log" 2>&1 && ok || fail "start moe:2: $(cat "$work/start3.log")"
sleep 0.5
check "moe:2 starts moe with 2 runs at a time: $(cat "$work/start3.log")" grep -qx "jobs 2" "$t/runs/moe/jobs"
timeout 60 bash -c "cd '$t' && bash experiments/studies.sh stop" > "$work/stop.log" 2>&1 && ok || fail "stop: $(cat "$work/stop.log")"
check "the first start gave each study 1" grep -qx "jobs 1" "$t/runs/claim_10k/jobs"
expect_error "JOBS of 0" "JOBS must be a whole number >= 1" studies start moe:0
expect_error "an unknown study" "expected one of claim_10k moe size_axis" studies start nosuch
expect_error "an unknown action" "usage" studies restart
finish
