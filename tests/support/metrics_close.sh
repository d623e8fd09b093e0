# Sourced by tests/cli_data_parallel*.sh. metrics_close A B TOL: metrics.jsonl files A and B have the same
# steps, and each step's train_loss, grad_norm, update_norm and val_loss (where A has one) agree to TOL
# relative; prints the first disagreement. Two runs that add the same numbers in another order (the
# replicas' groups of --data-parallel) differ by float rounding, not by more.
metrics_close() {
  awk -v tol="$3" '
    function field(line, key,   m) {
      if (match(line, "\"" key "\": [-0-9.eE+naif]+")) { m = substr(line, RSTART, RLENGTH); sub(/.*: /, "", m); return m }
      return ""
    }
    NR == FNR { a[FNR] = $0; n = FNR; next }
    {
      if (FNR > n) { print "more steps in " FILENAME; bad = 1; exit }
      split("train_loss grad_norm update_norm val_loss", keys, " ")
      for (k = 1; k <= 4; k++) {
        x = field(a[FNR], keys[k]); y = field($0, keys[k])
        if (x == "" && y == "") continue
        if (x == "" || y == "") { printf "step %d: %s only in one file\n", FNR, keys[k]; bad = 1; exit }
        d = x - y; if (d < 0) d = -d; s = x < 0 ? -x : x
        if (!(d <= tol * s)) { printf "step %d: %s %s against %s (tolerance %g relative)\n", FNR, keys[k], x, y, tol; bad = 1; exit }
      }
      m = FNR
    }
    END { if (!bad && m != n) { print "steps: " n " against " m; bad = 1 } exit bad }
  ' "$1" "$2"
}
