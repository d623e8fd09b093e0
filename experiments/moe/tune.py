#!/usr/bin/env python3
"""Step 2 of the MoE study's plan (README.md beside this file): picks each (length, model, optimizer)'s
rate from its synchronous runs and writes the grid that runs what comes next.

For each length up to LENGTH, model and optimizer: the synchronous runs of seeds 1-3 at the plan's rates
(2e-3 to 1.6e-2) are compared by their mean whole-split validation loss (final_eval.json, written by
experiments/evaluate_whole.sh). Where the best is the edge of the rates run so far, the next factor of 2
on that side is added and nothing else runs for that configuration until it has been measured. Once the
best is inside, it is the configuration's rate: 2BW and 2BW + EF run at it.

Prints the grid (experiments/moe/grid.txt plus the skip lines) to stdout and writes the state to
RUNS/rates.json. Exit status 0; `--check` exits 3 when some configuration up to LENGTH has no rate yet.

    python3 experiments/moe/tune.py LENGTH [--runs runs/moe] [--check] > runs/moe/grid_LENGTH.txt
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import studylib  # noqa: E402  (experiments/studylib.py)
LENGTHS = ["1000", "3000"]
SEEDS = ["1", "2", "3"]
MODELS = ["tiny", "moe-tiny"]
OPTIMIZERS = ["adamw", "muon"]
LADDER = ["5e-4", "1e-3", "2e-3", "4e-3", "8e-3", "1.6e-2", "3.2e-2", "6.4e-2"]  # grid.txt's lr axis
PLAN = ["2e-3", "4e-3", "8e-3", "1.6e-2"]
DELAYS = "2bw,2bw+ef"


def sync_loss(runs, length, seed, model, opt, lr):
    return studylib.final_eval_loss(os.path.join(runs, "runs", f"{length}_{seed}_{model}_{opt}_{lr}_sync",
                                                  "final_eval.json"))


def tune(runs, length, model, opt):
    """The rates to run (a contiguous run of the ladder) and the chosen one (None while pending)."""
    return studylib.ladder_tune(lambda lr: [sync_loss(runs, length, s, model, opt, lr) for s in SEEDS],
                                LADDER, PLAN[0], PLAN[-1], f"{length} {model} {opt}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("length", choices=LENGTHS)
    ap.add_argument("--runs", default="runs/moe")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    phases = LENGTHS[:LENGTHS.index(a.length) + 1]
    state, lines, pending = {}, [], []
    for length in LENGTHS:
        if length not in phases:
            lines.append(f"skip length={length}")
        for model in MODELS:
            for opt in OPTIMIZERS:
                # rates.json holds every length, so that a later phase's state survives an earlier phase's
                # grid being written again (a new machine's run.sh does so)
                rates, chosen, means = tune(a.runs, length, model, opt)
                state.setdefault(length, {}).setdefault(model, {})[opt] = {
                    "rates_run": rates, "chosen": chosen, "sync_means": means}
                if length not in phases:
                    continue
                lines += studylib.tuning_skips(f"length={length} model={model} optimizer={opt}", LADDER, rates,
                                               chosen, DELAYS)
                if chosen is None:
                    pending.append(f"{length} {model} {opt}")
    studylib.write_grid(os.path.join(HERE, "grid.txt"), a.length, lines, state, a.runs, pending, a.check)


if __name__ == "__main__":
    main()
