#!/usr/bin/env python3
"""The pre-registered analysis of experiments/claim_10k (README.md beside this file, "What is measured").

Reads results/claim_10k/runs/*/ (final_eval.json: the whole-split loss, the primary outcome;
summary.json: the 8-batch loss, secondary) and prints the tables as Markdown: the bit-for-bit check of
seeds 1-3 against results/scaling, the paired gaps per optimizer and rate with 95% t intervals and the
equivalence tests, AdamW minus Muon per seed, error feedback, and the leave-one-seed-out headline.
Python 3 standard library only; Student's t and the paired statistics are experiments/studylib.py's.

    python3 experiments/claim_10k/analyze.py [--results results] [--partial]

Without --partial it refuses to compute while a configuration lacks one of the plan's eight seeds; with
it, the tables use the seeds that every configuration of the table has (said in each heading).
"""
import argparse
import json
import os
import sys

SEEDS = list(range(1, 9))
RATES = ["4e-3", "8e-3"]
OPTIMIZERS = ["adamw", "muon"]
MARGINS = [0.012, 0.05]


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from studylib import Paired, final_eval_loss, fmt_gap, point_machines  # noqa: E402  (experiments/studylib.py)

# ---------------------------------------------------------------- the runs
def load_runs(root):
    """{(seed, optimizer, rate, delay): {"full": loss or None, "batch8": loss}} from results/claim_10k."""
    runs = {}
    base = os.path.join(root, "claim_10k", "runs")
    if not os.path.isdir(base):
        return runs
    for point in sorted(os.listdir(base)):
        parts = point.split("_")
        if len(parts) != 4 or not parts[0].isdigit():
            sys.exit(f"{os.path.join(base, point)}: expected a point SEED_OPTIMIZER_RATE_DELAY (the sweep's folders)")
        seed, opt, rate, delay = int(parts[0]), parts[1], parts[2], parts[3]
        folder = os.path.join(base, point)
        with open(os.path.join(folder, "summary.json")) as f:
            summary = json.load(f)
        full = final_eval_loss(os.path.join(folder, "final_eval.json"))
        runs[(seed, opt, rate, delay)] = {"full": full, "batch8": summary["final_val_loss"]}
    return runs


def metrics_lines(path):
    out = {}
    with open(path) as f:
        for line in f:
            v = json.loads(line)
            out[v["step"]] = v
    return out


TWIN_CPU = "AMD EPYC"   # the scaling study's 10,000-step runs were made on a Zen 5 (README.md, Amendment 1)


def reproduction_check(root):
    """Seeds 1-3 against the scaling study's 10,000-step runs: every common step's training loss and every
    common validation loss equal, where the point ran on the twins' kind of CPU only (elsewhere the
    difference is reported, without a verdict). Returns (rows, mismatches)."""
    rows, bad = [], 0
    base = os.path.join(root, "claim_10k", "runs")
    old_base = os.path.join(root, "scaling", "runs")
    machines = point_machines(os.path.join(root, "claim_10k"))
    if not os.path.isdir(base):
        return rows, bad
    for point in sorted(os.listdir(base)):
        parts = point.split("_")
        if len(parts) != 4 or int(parts[0]) > 3:
            continue
        seed, opt, rate, delay = parts
        twin = os.path.join(old_base, f"10000_{opt}_{rate}_{delay}_{seed}", "metrics.jsonl")
        if not os.path.exists(twin):
            continue
        new, old = metrics_lines(os.path.join(base, point, "metrics.jsonl")), metrics_lines(twin)
        steps = sorted(set(new) & set(old))
        losses = sum(1 for s in steps if new[s]["train_loss"] == old[s]["train_loss"])
        vals = [s for s in steps if "val_loss" in new[s] and "val_loss" in old[s]]
        val_eq = sum(1 for s in vals if new[s]["val_loss"] == old[s]["val_loss"])
        ok = losses == len(steps) and val_eq == len(vals) and len(steps) > 0
        cpus = machines.get(point, set())
        same_cpu = bool(cpus) and all(c.startswith(TWIN_CPU) for c in cpus)
        if ok:
            verdict = "equal"
        elif same_cpu or not machines:
            verdict, bad = "DIFFERENT", bad + 1
        else:
            last = max(steps)
            verdict = (f"another CPU ({', '.join(sorted(cpus))}): final training loss "
                       f"{new[last]['train_loss'] - old[last]['train_loss']:+.2e} from its twin's")
        rows.append(f"| {point} | {len(steps)} | {losses} | {len(vals)} | {val_eq} | {verdict} |")
    return rows, bad


# ---------------------------------------------------------------- the tables
def seeds_with(runs, configs, key):
    return [s for s in SEEDS if all((s,) + c in runs and runs[(s,) + c][key] is not None for c in configs)]


def gap(runs, seeds, opt, rate, delay, key):
    return Paired(runs[(s, opt, rate, delay)][key] - runs[(s, opt, rate, "sync")][key] for s in seeds)


def loso_picks(runs, seeds, opt, key):
    """For each seed, the rate with the lowest mean synchronous loss over the other seeds."""
    picks = {}
    for held in seeds:
        others = [s for s in seeds if s != held]
        means = {r: sum(runs[(s, opt, r, "sync")][key] for s in others) / len(others) for r in RATES}
        picks[held] = min(RATES, key=lambda r: (means[r], RATES.index(r)))
    return picks


def verdict_equiv(p):
    parts = []
    for m in MARGINS:
        eq, pv = p.tost(m)
        parts.append(f"{'equivalent' if eq else 'not shown equivalent'} within {m} (p = {pv:.3f})")
    return "; ".join(parts)


def report(runs, key, require_all):
    label = "whole validation split" if key == "full" else "8 batches (the old measure)"
    out = []
    cells = [(o, r) for o in OPTIMIZERS for r in RATES]
    configs = [(o, r, d) for o, r in cells for d in ("sync", "2bw")]
    seeds = seeds_with(runs, configs, key)
    if require_all and seeds != SEEDS:
        sys.exit(f"analyze.py: only seeds {seeds} have every configuration measured on the {label}; "
                 "the plan needs 1-8 (--partial computes on these)")
    if len(seeds) < 2:
        out.append(f"\n(fewer than 2 seeds with every configuration on the {label}: no table yet)\n")
        return out
    out.append(f"\n### The paired gap, 2BW minus synchronous ({label}; seeds {seeds[0]}-{seeds[-1]}, n = {len(seeds)})\n")
    out.append("| optimizer | rate | sync mean | gap (95% interval) | sd | verdict | equivalence (TOST, 90% interval) |")
    out.append("|---|---|---|---|---|---|---|")
    for o, r in cells:
        p = gap(runs, seeds, o, r, "2bw", key)
        sync = sum(runs[(s, o, r, "sync")][key] for s in seeds) / len(seeds)
        lo90, hi90 = p.interval(0.90)
        out.append(f"| {o} | {r} | {sync:.4f} | {fmt_gap(p)} | {p.sd:.4f} | "
                   f"{'resolved' if p.resolved() else 'within noise'} | [{lo90:+.4f}, {hi90:+.4f}]: {verdict_equiv(p)} |")
    # the headline: leave-one-seed-out rate per optimizer
    out.append(f"\n### The headline: each optimizer at its leave-one-seed-out rate ({label})\n")
    out.append("| optimizer | picks (seed: rate) | pick on all seeds | gap (95% interval) | verdict | equivalence |")
    out.append("|---|---|---|---|---|---|")
    headline = {}
    for o in OPTIMIZERS:
        picks = loso_picks(runs, seeds, o, key)
        means = {r: sum(runs[(s, o, r, "sync")][key] for s in seeds) / len(seeds) for r in RATES}
        allpick = min(RATES, key=lambda r: (means[r], RATES.index(r)))
        d = [runs[(s, o, picks[s], "2bw")][key] - runs[(s, o, picks[s], "sync")][key] for s in seeds]
        p = Paired(d)
        headline[o] = (picks, d)
        out.append(f"| {o} | {', '.join(f'{s}: {picks[s]}' for s in seeds)} | {allpick} | {fmt_gap(p)} | "
                   f"{'resolved' if p.resolved() else 'within noise'} | {verdict_equiv(p)} |")
    # AdamW minus Muon, per seed
    out.append(f"\n### AdamW's gap minus Muon's, per seed ({label})\n")
    out.append("| rates | difference (95% interval) | verdict | ratio of mean gaps |")
    out.append("|---|---|---|---|")
    for r in RATES:
        a, m = gap(runs, seeds, "adamw", r, "2bw", key), gap(runs, seeds, "muon", r, "2bw", key)
        p = Paired(x - y for x, y in zip(a.d, m.d))
        ratio = f"{a.mean / m.mean:.1f}x" if a.resolved() and m.resolved() and m.mean > 0 else "not stated (a gap is not resolved)"
        out.append(f"| both at {r} | {fmt_gap(p)} | {'AdamW larger' if p.interval()[0] > 0 else 'not resolved'} | {ratio} |")
    p = Paired(x - y for x, y in zip(headline["adamw"][1], headline["muon"][1]))
    out.append(f"| each at its headline pick | {fmt_gap(p)} | {'AdamW larger' if p.interval()[0] > 0 else 'not resolved'} | |")
    # error feedback (Muon)
    ef_configs = [("muon", r, d) for r in RATES for d in ("sync", "2bw", "2bw+ef")]
    ef_seeds = seeds_with(runs, ef_configs, key)
    if len(ef_seeds) >= 2:
        out.append(f"\n### Muon with error feedback ({label}; n = {len(ef_seeds)})\n")
        out.append("| rate | 2BW + EF gap (95% interval) | verdict | recovery (95% interval) |")
        out.append("|---|---|---|---|")
        for r in RATES:
            ef = gap(runs, ef_seeds, "muon", r, "2bw+ef", key)
            plain = gap(runs, ef_seeds, "muon", r, "2bw", key)
            if plain.resolved() and plain.mean > 0:
                rec = Paired(1 - e / g for e, g in zip(ef.d, plain.d))
                lo, hi = rec.interval()
                recovery = f"{100 * rec.mean:.0f}% [{100 * lo:.0f}%, {100 * hi:.0f}%]"
            else:
                recovery = "not computed: the plain gap is not resolved"
            out.append(f"| {r} | {fmt_gap(ef)} | {'resolved' if ef.resolved() else 'within noise'} | {recovery} |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--partial", action="store_true", help="compute on the seeds measured so far")
    a = ap.parse_args()
    runs = load_runs(a.results)
    lines = [f"# experiments/claim_10k: {len(runs)} of 80 runs"]
    rows, bad = reproduction_check(a.results)
    lines.append("\n### Seeds 1-3 against the scaling study's runs (bit for bit)\n")
    lines.append("| point | common steps | training losses equal | common validation losses | equal | verdict |")
    lines.append("|---|---|---|---|---|---|")
    lines += rows or ["| (none yet) | | | | | |"]
    if bad:
        lines.append(f"\n**{bad} run(s) differ from their twin: the plan stops the analysis here until explained.**")
        print("\n".join(lines))
        return 1
    for key in ("full", "batch8"):
        lines += report(runs, key, require_all=not a.partial)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
