#!/usr/bin/env python3
"""The size axis's pre-registered analysis (README.md beside this file: decision rules 1-5, Amendment 1).

Reads results/size_axis/runs/*/final_eval.json (each run's final model on the whole validation split, the
outcome), machines.log and sweep.log, and prints as Markdown: the rates tuned (rule 1), the paired gaps at
each pick with 95% t intervals, error feedback's share and whether rule 3 added seeds 4-6, `small`'s gap
less `tiny`'s with Welch's interval and whether rule 4 added seeds 4-6, the bf16 against fp32 check (rule 5), and the
machine of every point. Python 3 standard library.

    python3 experiments/size_axis/analyze.py [--results results] [--partial]

Without --partial it refuses while a table it needs is incomplete; with it, what is missing reads "pending".
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import studylib  # noqa: E402  (experiments/studylib.py)
from studylib import Paired  # noqa: E402

tune = studylib.load("size_tune", os.path.join(HERE, "tune.py"))
PARAMS = {"tiny": 1377408, "small": 6163712}   # as `nobubble train` prints them (README.md)


def num(x):
    """+0.0123; a difference that rounds to zero prints as +0.0000, never -0.0000."""
    return f"{0.0 if abs(x) < 5e-5 else x:+.4f}"


def fmt(p):
    if p.n < 2:
        return "pending"
    lo, hi = p.interval()
    state = "resolved" if p.resolved() else "within noise"
    return f"{p.mean:+.4f} [{lo:+.4f}, {hi:+.4f}] ({state})"


def seeds_of(runs, size, opt, lr):
    """Seeds 1-3, and 4-6 where rule 3 or 4 added them and all of their synchronous and 2BW runs are in."""
    extra = [s for s in tune.EXTRA_SEEDS
             if all(tune.loss(runs, tune.point(size, opt, lr, d, s)) is not None for d in ("sync", "2bw"))]
    return tune.SEEDS + (extra if len(extra) == len(tune.EXTRA_SEEDS) else [])


def report(root, partial):
    runs = os.path.join(root, "size_axis")
    out, missing = [], []
    picks = {}
    out += ["## Rates (rule 1: the lowest 3-seed mean of the synchronous bf16 runs, whole split)", "",
            "| size | optimizer | rates run | 3-seed means | pick |", "|---|---|---|---|---|"]
    for size in tune.SIZES:
        for opt in tune.OPTIMIZERS:
            rates, chosen, means = tune.tune(runs, size, opt)
            picks[(size, opt)] = chosen
            if chosen is None:
                missing.append(f"{size} {opt}'s tuning")
            m = ", ".join(f"{lr}: {means[lr]:.4f}" for lr in rates if lr in means) or "none"
            out.append(f"| {size} | {opt} | {', '.join(rates)} | {m} | {chosen or 'pending'} |")
    out += ["", "## The gap at each pick (rule 3: per seed, the delayed run's loss less the synchronous run's; "
            "95% t interval; EF's share 1 - gap_EF / gap per seed, only where the 2BW gap is resolved and positive)",
            "", "| size | parameters | optimizer | rate | seeds | 2BW - sync | 2BW + EF - sync | EF's share | "
            "seeds 4-6 by rule 3 (seeds 1-3) |", "|---|---|---|---|---|---|---|---|---|"]
    gap_of = {}
    for size in tune.SIZES:
        for opt in tune.OPTIMIZERS:
            lr = picks[(size, opt)]
            seeds = seeds_of(runs, size, opt, lr) if lr else tune.SEEDS
            g = tune.gaps(runs, size, opt, lr, seeds) if lr else None
            if g is None:
                missing.append(f"{size} {opt}'s delayed runs")
                out.append(f"| {size} | {PARAMS[size]:,} | {opt} | {lr or 'pending'} | | pending | pending | | |")
                continue
            gap_of[(size, opt)] = g
            p = Paired(g.values())
            ef = tune.gaps(runs, size, opt, lr, seeds, delay="2bw+ef")
            if ef is None:
                missing.append(f"{size} {opt}'s EF runs")
            if not (p.resolved() and p.mean > 0):
                share = "none (2BW gap not resolved and positive)"
            elif ef is None:
                share = "pending"
            else:
                sh = Paired(1 - ef[s] / g[s] for s in seeds)
                lo, hi = sh.interval()
                share = f"{100 * sh.mean:.0f}% [{100 * lo:.0f}%, {100 * hi:.0f}%]"
            r3 = tune.rule3(runs, picks, size, opt)
            rule = f"[{num(r3['low'])}, {num(r3['high'])}]: " + ("near deciding: added" if r3["adds_seeds"] else "none")
            if r3["adds_seeds"] and len(seeds) < 6:
                missing.append(f"{size} {opt}'s seeds 4-6 (rule 3)")
            out.append(f"| {size} | {PARAMS[size]:,} | {opt} | {lr} | {len(seeds)} | {fmt(p)} | "
                       f"{fmt(Paired(ef.values())) if ef else 'pending'} | {share} | {rule} |")
    out += ["", "## Between sizes (rule 4: `small`'s mean gap less `tiny`'s, unpaired, Welch's 95% interval)", "",
            "| optimizer | seeds (tiny, small) | small less tiny | ratio small / tiny | verdict | rule 4 on seeds 1-3 |",
            "|---|---|---|---|---|---|"]
    for opt in tune.OPTIMIZERS:
        a, b = gap_of.get(("tiny", opt)), gap_of.get(("small", opt))
        r4 = tune.rule4(runs, picks, opt)
        if not a or not b or r4 is None:
            out.append(f"| {opt} | | pending | | | |")
            continue
        d, lo, hi = studylib.welch(list(a.values()), list(b.values()))
        pa, pb = Paired(a.values()), Paired(b.values())
        ratio = f"{pb.mean / pa.mean:.2f}" if pa.resolved() and pb.resolved() else "(a gap within noise)"
        verdict = "smaller for the larger model" if hi < 0 else "larger for the larger model" if lo > 0 else "not resolved"
        rule = (f"[{num(r4['low'])}, {num(r4['high'])}]: " +
                ("within 2x of deciding: seeds 4-6 added" if r4["adds_seeds"] else "no seeds added"))
        if r4["adds_seeds"] and (len(a) < 6 or len(b) < 6):
            missing.append(f"{opt}'s seeds 4-6")
            verdict = "pending (seeds 4-6 are running)"
        out.append(f"| {opt} | {len(a)}, {len(b)} | {num(d)} [{num(lo)}, {num(hi)}] | {ratio} | {verdict} | {rule} |")
    lr = picks[("small", "muon")]
    out += ["", f"## bf16 against fp32 (rule 5: `small` Muon at its pick{' ' + lr if lr else ''}, seeds 1-3)", "",
            "| precision | 2BW - sync | fp32 less bf16 (Welch) | verdict |", "|---|---|---|---|"]
    g16 = tune.gaps(runs, "small", "muon", lr, tune.SEEDS) if lr else None
    g32 = tune.gaps(runs, "small", "muon", lr, tune.SEEDS, "fp32") if lr else None
    if g16 and g32:
        d, lo, hi = studylib.welch(list(g16.values()), list(g32.values()))
        verdict = ("bf16 stands for fp32 (the interval covers 0)" if lo <= 0 <= hi else
                   "bf16 does not stand for fp32: the plan reruns the study in fp32 at the picks (an amendment)")
        out.append(f"| bf16 | {fmt(Paired(g16.values()))} | | |")
        out.append(f"| fp32 | {fmt(Paired(g32.values()))} | {num(d)} [{num(lo)}, {num(hi)}] | {verdict} |")
    else:
        missing.append("rule 5's fp32 runs")
        out.append("| fp32 | pending | | |")
    where = studylib.point_machines(runs, flags=True)
    counts = {}
    for point, ms in sorted(where.items()):
        if tune.loss(runs, point) is None:
            continue
        key = " then ".join(ms)
        counts[key] = counts.get(key, 0) + 1
    out += ["", "## Machines (each finished point by the machines that ran it: machines.log and the sweep's log)", "",
            "| machine (CPU, its bf16 and AVX-512 flags) | points |", "|---|---|"]
    out += [f"| {m} | {n} |" for m, n in sorted(counts.items())] or ["| none yet | 0 |"]
    if missing and not partial:
        sys.exit("analyze.py: incomplete (" + "; ".join(missing) + "); --partial prints what is in")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--partial", action="store_true")
    a = ap.parse_args()
    sys.stdout.write(report(a.results, a.partial))


if __name__ == "__main__":
    main()
