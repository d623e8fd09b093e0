#!/usr/bin/env python3
"""The delay gap at ONE learning rate across training lengths, by the method of `nobubble report`'s
slope table: per seed the paired gap (2BW's final validation loss minus the synchronous run's, same
seed and data order), then least squares of ln(gap) on ln(tokens) over every (length, seed) point,
with a 95% t interval (n - 2 degrees of freedom). The report fits each length at its own tuned
rate; this holds the rate fixed, which RESULTS.md uses to separate the delay's cost from the tuned
rate's drift.

Usage: python3 experiments/scaling/fixed_rate_slope.py RESULTS_CSV OPTIMIZER LR STEPS [STEPS ...]
  e.g. python3 experiments/scaling/fixed_rate_slope.py runs/scaling/results.csv muon 8e-3 300 3000
"""
import csv
import math
import sys

T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def main(argv):
    if len(argv) < 5:
        sys.exit(__doc__.split("Usage: ")[1].split("\n")[0].join(["usage: ", ""]))
    path, optimizer, lr, lengths = argv[1], argv[2], argv[3], argv[4:]
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f)
                if r["optimizer"] == optimizer and r["lr"] == lr and r["status"] == "done"]
    loss = {(r["steps"], r["delay"], r["seed"]): (float(r["final_val_loss"]), float(r["tokens"])) for r in rows}
    xs, ys = [], []
    for steps in lengths:
        for seed in sorted({k[2] for k in loss if k[0] == steps}):
            if (steps, "sync", seed) not in loss or (steps, "2bw", seed) not in loss:
                continue
            (sync, tokens), (delayed, _) = loss[(steps, "sync", seed)], loss[(steps, "2bw", seed)]
            gap = delayed - sync
            print(f"steps {steps} seed {seed}: gap {gap:+.4f}")
            if gap <= 0:
                sys.exit(f"{path}: the gap is {gap:+.4f} <= 0 at steps={steps}, seed {seed}: no logarithm")
            xs.append(math.log(tokens))
            ys.append(math.log(gap))
    n = len(xs)
    if n < 3 or len(set(xs)) < 2:
        sys.exit(f"{path}: {n} paired points over {len(set(xs))} lengths for {optimizer} at lr {lr}: "
                 "need at least 3 over 2 lengths")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    resid = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys))
    half = T95[n - 2] * math.sqrt(resid / (n - 2) / sxx)
    verdict = "shrinks" if slope + half < 0 else "grows" if slope - half > 0 else "no trend resolved"
    print(f"{n} points: slope of ln(gap) on ln(tokens) {slope:+.3f} [{slope - half:+.3f}, {slope + half:+.3f}] "
          f"{verdict}")


if __name__ == "__main__":
    main(sys.argv)
