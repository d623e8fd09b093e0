# Sourced by the pipeline benchmarks (bench/pipeline.sh, schedules.sh, projection.sh): a prepared corpus,
# Open MPI allowed to run as root, and the helpers they share.
[ -f data/bible/manifest.json ] || ./build/nobubble prepare --out data/bible >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The median of the numbers on stdin, one a line.
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
# A JSON number field's value from stdin: field NAME.
field() { grep -o "\"$1\": [-0-9.e+]*" | awk '{print $2}'; }
# Steady tokens/s of a run folder of $steps steps: tokens over time from the middle step to the one before
# the last (whose end drains the pipeline).
steady() {
  awk -v half=$((steps / 2)) -v last=$((steps - 1)) '
    { match($0, /"time_s": [0-9.e+-]+/); t = substr($0, RSTART + 10, RLENGTH - 10) + 0;
      match($0, /"tokens": [0-9.e+-]+/); k = substr($0, RSTART + 10, RLENGTH - 10) + 0;
      match($0, /"step": [0-9]+/); s = substr($0, RSTART + 8, RLENGTH - 8) + 0;
      if (s == half) { t0 = t; k0 = k } if (s == last) { t1 = t; k1 = k } }
    END { printf "%.1f", (k1 - k0) / (t1 - t0) }' "$1/metrics.jsonl"
}
