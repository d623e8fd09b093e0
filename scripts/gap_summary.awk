# The main job's summary (scripts/run.sh): from a sweep's results.csv with `optimizer` and `delay`
# columns (delays 1f1b, 2bw, 2bw+ef), one line per optimizer: the three final validation losses,
# the gaps to 1F1B without and with error feedback, EF's recovery (1 - gap with EF / gap), and at
# the end the ratio of the first optimizer's gap to each other's. Run with awk -F,.
NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
$col["status"] == "done" { val[$col["optimizer"], $col["delay"]] = $col["final_val_loss"]
                           if (!(($col["optimizer"]) in seen)) { seen[$col["optimizer"]] = 1; order[++n] = $col["optimizer"] } }
END {
  printf "%-10s %8s %8s %8s %10s %14s %12s\n", "optimizer", "1F1B", "2BW", "2BW+EF", "gap 2BW", "gap 2BW+EF", "EF recovery"
  for (k = 1; k <= n; k++) {
    o = order[k]
    if (!((o, "1f1b") in val) || !((o, "2bw") in val)) { printf "%-10s (runs missing)\n", o; continue }
    gap[o] = val[o, "2bw"] - val[o, "1f1b"]
    ef = ((o, "2bw+ef") in val) ? sprintf("%8.4f", val[o, "2bw+ef"]) : sprintf("%8s", "-")
    efgap = ((o, "2bw+ef") in val) ? sprintf("%+14.4f", val[o, "2bw+ef"] - val[o, "1f1b"]) : sprintf("%14s", "-")
    rec = ((o, "2bw+ef") in val) && gap[o] > 0 ? sprintf("%11.0f%%", 100 * (1 - (val[o, "2bw+ef"] - val[o, "1f1b"]) / gap[o])) : sprintf("%12s", "-")
    printf "%-10s %8.4f %8.4f %s %+10.4f %s %s\n", o, val[o, "1f1b"], val[o, "2bw"], ef, gap[o], efgap, rec
  }
  first = order[1]
  for (k = 2; k <= n; k++)
    if ((first in gap) && (order[k] in gap) && gap[order[k]] > 0)
      printf "%s's gap is %.1fx %s's\n", first, gap[first] / gap[order[k]], order[k]
}
