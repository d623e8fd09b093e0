#!/usr/bin/env bash
# ThreadSanitizer on the tests that run threads: a pipeline's stage threads over the threads transport
# (tests/test_link.c, test_executor, test_pipeline, cli_pipeline, cli_zbh1, cli_interleaved), the signal
# thread (cli_signals*), checkpoints saved while stages run (cli_checkpoint), data parallelism in one process,
# a sweep's children, and OpenMP's regions (test_gemm_threads, test_optim_threads, test_moe, cli_threads).
# Builds with -DNB_TSAN=ON into build-tsan/ and runs those tests there with ctest. Each report goes to a file
# of build-tsan/tsan-reports/ (not to the tests' stderr, which some of them read), and TSan leaves every exit
# status as it was (exitcode=0: cli_signals checks 130 and 143); fails when a test fails or any report is
# written, printing their summaries. The tests take 28 min on a 2-core machine shared with two other runs.
#
# OpenMP: libgomp is not instrumented, so TSan does not see its fork, join and barriers and reports every
# parallel loop (a value written before the loop, read in it), and so slowly that a run of --threads 2 made
# no step in 12 minutes. LLVM's OpenMP runtime (libomp, which has libgomp's GOMP_* entry points) with its
# TSan tool Archer tells TSan that ordering: it replaces libgomp here (LD_PRELOAD), for the product's own
# loops and oneDNN's and OpenBLAS's alike (not instrumented themselves: ignore_noninstrumented_modules). The
# tests' bitwise checks hold on it. Debian: apt-get install libomp-14-dev.
# Usage: tools/ci/tsan.sh [ctest -R regex]
set -euo pipefail
cd "$(dirname "$0")/../.."
tests=${1:-'^(test_(link|executor|signals|pipeline|train|train_api|resume|init_from|stages|moe|gemm_threads|optim_threads)|cli_(pipeline|zbh1|interleaved|data_parallel|signals|signals_early|checkpoint|device|moe|threads|sweep|train))$'}
archer=$(ls /usr/lib/llvm-*/lib/libarcher.so 2>/dev/null | sort -V | tail -1)
if [ -z "$archer" ] || [ ! -e "$(dirname "$archer")/libomp.so" ]; then
  echo "tsan.sh: needs LLVM's OpenMP runtime and Archer (Debian: apt-get install libomp-14-dev)" >&2
  exit 1
fi
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNB_NATIVE=OFF -DNB_TSAN=ON >/dev/null
cmake --build build-tsan -j"$(nproc)"
reports=$PWD/build-tsan/tsan-reports
rm -rf "$reports" && mkdir -p "$reports"
export LD_PRELOAD=$(dirname "$archer")/libomp.so OMP_TOOL_LIBRARIES=$archer
export TSAN_OPTIONS="ignore_noninstrumented_modules=1 halt_on_error=0 second_deadlock_stack=1 history_size=4 exitcode=0 log_path=$reports/tsan"
rc=0
(cd build-tsan && ctest -R "$tests" --output-on-failure) || rc=1
unset LD_PRELOAD
n=$(cat "$reports"/tsan.* 2>/dev/null | grep -c '^WARNING: ThreadSanitizer' || true)
if [ "$n" -gt 0 ]; then
  echo "tsan.sh: $n report(s) in $reports:" >&2
  cat "$reports"/tsan.* | grep '^SUMMARY: ThreadSanitizer' | sort | uniq -c >&2
  rc=1
fi
exit $rc
