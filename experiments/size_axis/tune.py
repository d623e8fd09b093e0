#!/usr/bin/env python3
"""The size axis's decision rules 1 to 5 (README.md beside this file), as the grid that runs next.

Every number is a point's whole-split validation loss (final_eval.json, experiments/evaluate_whole.sh;
Amendment 1). run.sh calls this once per phase, in order, until the grid it prints stops changing:

  tiny    rule 1 for `tiny` (AdamW, Muon): the synchronous bf16 runs of seeds 1-3 at the plan's rates; a
          best at an edge adds the next factor of 2 beyond it, and nothing else of that configuration runs
          until it is measured; once the best is inside, rule 2: 2BW and 2BW + EF at it (seeds 1-3)
  small   the same for `small`
  fp32    rule 5: `small` Muon's synchronous and 2BW runs at its pick again in fp32 (seeds 1-3)
  seeds   seeds 4-6 at a pick (synchronous, 2BW, 2BW + EF; bf16) where an interval on seeds 1-3 covers 0
          while its half-width is less than twice its mean's distance from 0 ("near deciding"): the pick's
          own paired gap (Amendment 1's addition to rule 3), or, for both sizes of an optimizer, the
          between-size interval (rule 4: Welch, `small`'s gap less `tiny`'s)

Prints experiments/size_axis/grid.txt plus the skip lines to stdout and writes the state (rates run,
3-seed means, picks, the rule-3 and rule-4 intervals and whether they added seeds) to RUNS/rates.json. `--check`
exits 3 while some configuration of the phases up to PHASE has no pick yet. Python 3 standard library.

    python3 experiments/size_axis/tune.py PHASE [--runs runs/size_axis] [--check] > runs/size_axis/grid_PHASE.txt
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import studylib  # noqa: E402  (experiments/studylib.py: Student's t, Paired, Welch, the ladder, the grid)

PHASES = ["tiny", "small", "fp32", "seeds"]
SIZES = ["tiny", "small"]
OPTIMIZERS = ["adamw", "muon"]
LADDER = ["5e-4", "1e-3", "2e-3", "4e-3", "8e-3", "1.6e-2", "3.2e-2", "6.4e-2"]  # grid.txt's lr axis
PLAN = {("tiny", "adamw"): ("2e-3", "1.6e-2"), ("tiny", "muon"): ("2e-3", "1.6e-2"),   # the plan's table
        ("small", "adamw"): ("1e-3", "8e-3"), ("small", "muon"): ("2e-3", "1.6e-2")}
SEEDS = ["1", "2", "3"]
EXTRA_SEEDS = ["4", "5", "6"]
DELAYS = "2bw,2bw+ef"


def point(size, opt, lr, delay, seed, precision="bf16"):
    """A point's name: grid.txt's axes in order."""
    return f"{size}_{opt}_{lr}_{delay}_{precision}_{seed}"


def loss(runs, name):
    return studylib.final_eval_loss(os.path.join(runs, "runs", name, "final_eval.json"))


def tune(runs, size, opt):
    """Rule 1: the rates to run (a contiguous stretch of the ladder), the pick (None while pending), the means."""
    return studylib.ladder_tune(lambda lr: [loss(runs, point(size, opt, lr, "sync", s)) for s in SEEDS],
                                LADDER, *PLAN[(size, opt)], f"{size} {opt}")


def gaps(runs, size, opt, lr, seeds, precision="bf16", delay="2bw"):
    """Rule 3: {seed: the delayed run's loss less the synchronous run's}, or None while a seed lacks either."""
    out = {}
    for s in seeds:
        a, b = (loss(runs, point(size, opt, lr, d, s, precision)) for d in ("sync", delay))
        if a is None or b is None:
            return None
        out[s] = b - a
    return out


def near_deciding(lo, hi, mean):
    """An interval that covers 0 while its half-width is less than twice its mean's distance from 0."""
    return lo <= 0 <= hi and (hi - lo) / 2 < 2 * abs(mean)


def rule3(runs, picks, size, opt):
    """Amendment 1's addition to rule 3 (the issue's "more seeds where the gap is near the noise"): the paired
    gap on seeds 1-3 at the pick, and whether it adds seeds 4-6 there (near deciding); None until it is in."""
    g = gaps(runs, size, opt, picks[(size, opt)], SEEDS) if picks[(size, opt)] else None
    if g is None:
        return None
    p = studylib.Paired(g.values())
    lo, hi = p.interval()
    return {"gap": p.mean, "low": lo, "high": hi, "adds_seeds": near_deciding(lo, hi, p.mean)}


def rule4(runs, picks, opt):
    """Rule 4 on seeds 1-3: the Welch interval of `small`'s gap less `tiny`'s and whether it adds seeds 4-6
    (it covers 0 and its half-width is less than twice |mean|); None until both gaps are in."""
    g = [gaps(runs, size, opt, picks[(size, opt)], SEEDS) if picks[(size, opt)] else None for size in SIZES]
    if any(x is None for x in g):
        return None
    d, lo, hi = studylib.welch(list(g[0].values()), list(g[1].values()))
    return {"difference": d, "low": lo, "high": hi, "adds_seeds": near_deciding(lo, hi, d)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("phase", choices=PHASES)
    ap.add_argument("--runs", default="runs/size_axis")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    upto = PHASES[:PHASES.index(a.phase) + 1]
    active = [s for s in SIZES if s in upto or "small" in upto]
    state, lines, pending, picks = {}, [], [], {}
    # every configuration's state is computed in every phase, so rates.json always holds all of them
    for size in SIZES:
        for opt in OPTIMIZERS:
            rates, chosen, means = tune(a.runs, size, opt)
            picks[(size, opt)] = chosen
            state.setdefault(size, {})[opt] = {"rates_run": rates, "chosen": chosen, "sync_means": means}
            if size not in active:
                continue
            lines += studylib.tuning_skips(f"size={size} optimizer={opt}", LADDER, rates, chosen, DELAYS)
            if chosen is None:
                pending.append(f"{size} {opt}")
    for size in SIZES:
        if size not in active:
            lines.append(f"skip size={size}")
    # rule 5: fp32 only for `small` Muon at its pick, synchronous and 2BW, seeds 1-3
    pick = picks[("small", "muon")]
    state["fp32_check"] = {"rate": pick, "runs": "fp32" in upto and pick is not None}
    if state["fp32_check"]["runs"]:
        lines += ["skip precision=fp32 size=tiny", "skip precision=fp32 optimizer=adamw",
                  f"skip precision=fp32 lr={','.join(lr for lr in LADDER if lr != pick)}",
                  "skip precision=fp32 delay=2bw+ef", f"skip precision=fp32 seed={','.join(EXTRA_SEEDS)}"]
    else:
        lines.append("skip precision=fp32")
    # seeds 4-6 (rules 3 and 4), decided on seeds 1-3 alone, so that the seeds they add cannot take
    # themselves away: where a pick's own gap is near deciding (rule 3), and at both sizes of an optimizer
    # whose between-size interval is (rule 4)
    state["rule3"], state["rule4"], extra = {}, {}, set()
    for size in SIZES:
        for opt in OPTIMIZERS:
            r = rule3(a.runs, picks, size, opt)
            state["rule3"].setdefault(size, {})[opt] = r
            if r and r["adds_seeds"]:
                extra.add((size, opt))
    for opt in OPTIMIZERS:
        r = rule4(a.runs, picks, opt)
        state["rule4"][opt] = r
        if r and r["adds_seeds"]:
            extra |= {(size, opt) for size in SIZES}
    for size in SIZES:
        for opt in OPTIMIZERS:
            if "seeds" in upto and (size, opt) in extra:
                lines.append(f"skip size={size} optimizer={opt} "
                             f"lr={','.join(lr for lr in LADDER if lr != picks[(size, opt)])} seed={','.join(EXTRA_SEEDS)}")
            else:
                lines.append(f"skip size={size} optimizer={opt} seed={','.join(EXTRA_SEEDS)}")
    studylib.write_grid(os.path.join(HERE, "grid.txt"), a.phase, lines, state, a.runs, pending, a.check)


if __name__ == "__main__":
    main()
