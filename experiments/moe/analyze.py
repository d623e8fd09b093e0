#!/usr/bin/env python3
"""The MoE study's pre-registered analysis (README.md beside this file, "What is reported").

Reads results/moe/runs/*/ (final_eval.json: the whole-split loss, the outcome; metrics.jsonl: the
auxiliary loss, each block's largest and smallest expert load, the router's staleness) and prints, per
length, as Markdown: the rates each (model, optimizer) was tuned to, the paired gaps 2BW - sync and
2BW + EF - sync with 95% t intervals and the equivalence test against 0.01, MoE's gap minus the dense
twin's per seed, error feedback's share, and the MoE runs' routing statistics. Python 3 standard library.

    python3 experiments/moe/analyze.py [--results results] [--partial]

Without --partial it refuses a table while one of its configurations lacks one of the seeds 1-3; with it,
each table uses the seeds every one of its configurations has (said in its heading).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import studylib  # noqa: E402  (experiments/studylib.py)
from studylib import Paired, fmt_gap  # noqa: E402

tune = studylib.load("moe_tune", os.path.join(HERE, "tune.py"))
SEEDS = [1, 2, 3]
MARGIN = 0.01  # the equivalence margin: the paper's Muon gap at 360M


def final_loss(root, point):
    return studylib.final_eval_loss(os.path.join(root, "moe", "runs", point, "final_eval.json"))


def point(length, seed, model, opt, lr, delay):
    return f"{length}_{seed}_{model}_{opt}_{lr}_{delay}"


def routing_stats(root, name):
    """From a MoE run's metrics.jsonl: the last line's aux loss and loads, the mean staleness."""
    path = os.path.join(root, "moe", "runs", name, "metrics.jsonl")
    if not os.path.exists(path):
        return None
    last, stale = None, []
    with open(path) as f:
        for line in f:
            v = json.loads(line)
            if "aux_loss" in v:
                last = v
            if "router_staleness" in v:
                stale.append(v["router_staleness"])
    if last is None:
        return None
    return {"aux": last["aux_loss"], "max": max(last["expert_load_max"]), "min": min(last["expert_load_min"]),
            "stale": sum(stale) / len(stale) if stale else None}


def seeds_with(root, cells, partial):
    """The seeds every cell (a function seed -> point name) has; None (with a reason) when a seed is missing
    without --partial."""
    have = [s for s in SEEDS if all(final_loss(root, c(s)) is not None for c in cells)]
    if len(have) < len(SEEDS) and not partial:
        return None
    return have


def section(root, length, partial):
    out = [f"## {length} steps", ""]
    rates = {}
    out += ["### Rates (synchronous runs, 3-seed mean whole-split loss; the chosen one in bold)", "",
            "| model | optimizer | " + " | ".join(tune.LADDER) + " |", "|---|---|" + "---|" * len(tune.LADDER)]
    for model in tune.MODELS:
        for opt in tune.OPTIMIZERS:
            run, chosen, means = tune.tune(os.path.join(root, "moe"), length, model, opt)
            rates[(model, opt)] = chosen
            cells = []
            for lr in tune.LADDER:
                if lr in means:
                    cells.append(("**%.4f**" if lr == chosen else "%.4f") % means[lr])
                else:
                    cells.append("pending" if lr in run else "")
            out.append(f"| {model} | {opt} | " + " | ".join(cells) + " |")
    out += ["", "### Gaps (paired per seed, 95%% t interval; TOST against +-%g)" % MARGIN, ""]
    out += ["| model | optimizer | rate | seeds | sync | 2BW - sync | 2BW + EF - sync | EF's share | equivalent to 0 (2BW) |",
            "|---|---|---|---|---|---|---|---|---|"]
    gaps = {}
    for model in tune.MODELS:
        for opt in tune.OPTIMIZERS:
            lr = rates[(model, opt)]
            if lr is None:
                out.append(f"| {model} | {opt} | pending | | | | | | |")
                continue
            cell = {d: (lambda s, d=d: point(length, s, model, opt, lr, d)) for d in ("sync", "2bw", "2bw+ef")}
            have = seeds_with(root, cell.values(), partial)
            if not have:
                out.append(f"| {model} | {opt} | {lr} | {len(have) if have is not None else 'incomplete'} | | | | | |")
                continue
            loss = {d: [final_loss(root, cell[d](s)) for s in have] for d in cell}
            if len(have) < 2:  # (--partial) one seed: its losses, no interval and no verdict
                one = {d: loss[d][0] - loss["sync"][0] for d in ("2bw", "2bw+ef")}
                out.append(f"| {model} | {opt} | {lr} | 1 | {loss['sync'][0]:.4f} | {one['2bw']:+.4f} (one seed: no "
                           f"interval) | {one['2bw+ef']:+.4f} (one seed) | pending | pending |")
                continue
            g = Paired(b - a for a, b in zip(loss["sync"], loss["2bw"]))
            e = Paired(b - a for a, b in zip(loss["sync"], loss["2bw+ef"]))
            gaps[(model, opt)] = dict(zip(have, g.d))
            share = "undefined (no gap to recover)"
            if g.resolved() and g.mean > 0:
                share = "%.0f%%" % (100 * (g.mean - e.mean) / g.mean)
            eq, p = g.tost(MARGIN)
            verdict = lambda q: fmt_gap(q) + ("" if q.resolved() else " (within noise)")
            out.append(f"| {model} | {opt} | {lr} | {len(have)} | {sum(loss['sync']) / len(have):.4f} | {verdict(g)} | "
                       f"{verdict(e)} | {share} | {'yes' if eq else 'no'} (p = {p:.3f}) |")
    out += ["", "### MoE minus dense: the MoE gap minus the dense twin's, per seed (2BW - sync)", "",
            "| optimizer | seeds | MoE gap - dense gap |", "|---|---|---|"]
    for opt in tune.OPTIMIZERS:
        a, b = gaps.get(("moe-tiny", opt)), gaps.get(("tiny", opt))
        common = sorted(set(a or {}) & set(b or {}))
        if len(common) < 2:
            out.append(f"| {opt} | {len(common)} | pending |")
            continue
        d = Paired(a[s] - b[s] for s in common)
        out.append(f"| {opt} | {len(common)} | {fmt_gap(d)}{'' if d.resolved() else ' (within noise)'} |")
    out += ["", "### Routing (MoE runs at the chosen rate, mean over seeds)", "",
            "| optimizer | delay | final aux loss | largest expert load | smallest expert load | router staleness |",
            "|---|---|---|---|---|---|"]
    for opt in tune.OPTIMIZERS:
        lr = rates[("moe-tiny", opt)]
        for delay in ("sync", "2bw", "2bw+ef"):
            rs = [routing_stats(root, point(length, s, "moe-tiny", opt, lr, delay)) for s in SEEDS] if lr else []
            rs = [r for r in rs if r]
            if not rs:
                out.append(f"| {opt} | {delay} | pending | | | |")
                continue
            mean = lambda k: sum(r[k] for r in rs) / len(rs)
            st = [r["stale"] for r in rs if r["stale"] is not None]
            out.append(f"| {opt} | {delay} | {mean('aux'):.4f} | {mean('max'):.3f} | {mean('min'):.3f} | "
                       f"{'%.4f' % (sum(st) / len(st)) if st else 'not measured (synchronous)'} |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--partial", action="store_true")
    a = ap.parse_args()
    if not os.path.isdir(os.path.join(a.results, "moe", "runs")):
        sys.exit(f"analyze.py: {a.results}/moe/runs: no runs saved yet (bash experiments/moe/run.sh)")
    lines = ["# The MoE study: delay gaps on moe-tiny and its dense twin tiny", ""]
    for length in tune.LENGTHS:
        lines += section(a.results, length, a.partial) + [""]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
