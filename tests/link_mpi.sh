#!/usr/bin/env bash
# The MPI transport with a coordinator endpoint on rank 0 (tests/link_mpi.c), on 2 and 3 ranks; then the ranks as
# replicas of one stage, summing in buckets.
# Skipped (exit 77) when Open MPI's mpirun is absent or nobubble was built without MPI.
set -u
bin=${1:?usage: link_mpi.sh path/to/link_mpi}
command -v mpirun >/dev/null || { echo "skipped: no mpirun (scripts/setup.sh installs openmpi-bin)"; exit 77; }
"$bin" --available || { echo "skipped: nobubble was built without MPI"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failed=0
for np in 2 3; do
  # Open MPI's plugins leak at exit (see cli_pipeline.sh): no leak checks under AddressSanitizer.
  out=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 120 \
        mpirun --oversubscribe --bind-to none -np "$np" "$bin" "$np" 2>&1)
  rc=$?
  echo "$out" | sed "s/^/np $np: /"
  # (each rank's two summaries: the protocol's, then the replicas' sums')
  if [ "$rc" -ne 0 ] || [ "$(echo "$out" | grep -c ' 0 failed')" -ne $((2 * np)) ]; then
    echo "FAIL: mpirun -np $np exited $rc, or not every rank passed"
    failed=1
  fi
done
[ "$failed" -eq 0 ] && echo "link_mpi: ok"
exit "$failed"
