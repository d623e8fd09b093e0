#!/usr/bin/env python3
"""The table and the verdicts of bench/vs_torch.sh, from the folder of its rounds' JSON files:
nb_R_T_MODEL_OPT.json (`nobubble bench --json`) and torch_R_T_MODEL_OPT.json (torch_bench.py --json).

Every figure is the median over the rounds; a ratio is taken within a round (both sides measured back
to back on the same machine) and the median of those is printed. The fraction of peak divides by the
fp32 FMA peak that nobubble bench measured in the same round at the same thread count (for both
precisions: the CPU's bf16 peak is not measured).

Usage: vs_torch_table.py DIR ROUNDS
"""
import glob
import json
import os
import statistics
import sys

NB = ("nobubble fp32", "nobubble bf16")
TORCH = {"eager-fp32": "torch eager fp32", "compile-fp32": "torch compile fp32",
         "eager-bf16": "torch autocast bf16", "compile-bf16": "torch compile+autocast bf16"}
ORDER = ["tiny", "small", "medium", "smollm-135m", "smollm-360m"]
# the ratio table's columns, in order: name -> (numerator, denominator)
RATIOS = {"fp32/eager": (NB[0], TORCH["eager-fp32"]), "fp32/compile": (NB[0], TORCH["compile-fp32"]),
          "bf16/compile": (NB[1], TORCH["compile-bf16"]), "bf16/eager": (NB[1], TORCH["eager-bf16"])}
# goal: nobubble bf16 / torch compile+autocast bf16, per model (issue 15)
BF16_GOAL = {"tiny": 1.1, "small": 1.25, "medium": 1.25, "smollm-135m": 1.25}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def load(folder):
    """rounds[(model, threads, optimizer)][round][impl] = result; plus the machine's facts."""
    rounds, facts = {}, {"nb": None, "torch": None}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        side, r, _ = os.path.basename(path)[:-5].split("_", 2)
        doc = json.load(open(path))
        facts[side] = doc
        for x in doc["results"]:
            if "error" in x:
                facts.setdefault("errors", []).append("round %s: %s %s %s, %d threads: %s" % (
                    r, x["model"], x["mode"], x["optimizer"], x["threads"], x["error"]))
                continue
            if side == "torch":
                facts.setdefault("opt_impls", set()).add(x["optimizer_impl"])
            if side == "nb":
                impl = "nobubble " + x["precision"]
                x["peak"] = x["peak_gflops"]
            else:
                impl = TORCH[x["mode"]]
            key = (x["model"], x["threads"], x["optimizer"])
            rounds.setdefault(key, {}).setdefault(int(r), {})[impl] = x
    return rounds, facts


def peak_of(per_round):
    for impl in NB:
        if impl in per_round:
            return per_round[impl]["peak"]
    return None


def fmt(v, f, none="n/m"):
    return none if v is None else f % v


def impl_rows(key, by_round):
    model, threads, opt = key
    for impl in list(NB) + list(TORCH.values()):
        xs = [(rr[impl], peak_of(rr)) for rr in by_round.values() if impl in rr]
        if not xs:
            continue
        step = med([x["median_step_s"] for x, _ in xs])
        frac = med([x["gflops"] / p if p else None for x, p in xs])
        act = med([x.get("activation_bytes_per_token") for x, _ in xs])
        outside = med([x.get("outside_gemm_share") for x, _ in xs])
        opt_share = med([x["median_optimizer_s"] / x["median_step_s"] for x, _ in xs])
        comp = med([x.get("compile_s") for x, _ in xs]) if impl.startswith("torch compile") else None
        print("| %s | %d | %s | %s | %.3f | %.0f | %.1f | %s | %s | %s | %s | %s |" % (
            model, threads, opt, impl, step, med([x["tokens_per_s"] for x, _ in xs]),
            med([x["gflops"] for x, _ in xs]), fmt(frac and 100 * frac, "%.0f%%"),
            fmt(act and act / 1024, "%.1f"), fmt(outside and 100 * outside, "%.1f%%"),
            "%.1f%%" % (100 * opt_share), fmt(comp, "%.1f", "")))


def round_ratios(by_round, num, den):
    return [by_round[r][num]["tokens_per_s"] / by_round[r][den]["tokens_per_s"]
            for r in sorted(by_round) if num in by_round[r] and den in by_round[r]]


def ratio(by_round, num, den):
    return med(round_ratios(by_round, num, den))


def ratio_cell(by_round, num, den):
    """The median ratio, then each round's in round order: the spread a reader needs on a shared machine."""
    xs = round_ratios(by_round, num, den)
    if not xs:
        return "n/m"
    return "%.2f (%s)" % (med(xs), ", ".join("%.2f" % x for x in xs)) if len(xs) > 1 else "%.2f" % xs[0]


def ratio_rows(rounds):
    out = {}
    for key in sorted(rounds, key=sort_key):
        by_round = rounds[key]
        out[key] = {name: ratio(by_round, num, den) for name, (num, den) in RATIOS.items()}
        print("| %s | %d | %s | %s | %s | %s | %s |" % (key + tuple(
            ratio_cell(by_round, num, den) for num, den in RATIOS.values())))
    return out


def sort_key(key):
    model, threads, opt = key
    return (ORDER.index(model) if model in ORDER else len(ORDER), model, threads, opt)


def verdict(name, checks):
    """checks: list of (label, value, ok); ok None = not measured."""
    got = [c for c in checks if c[2] is not None]
    if not got:
        print("- %s: **not measurable here** (not run)" % name)
        return
    state = "met" if all(c[2] for c in got) else "not met"
    print("- %s: **%s** (%s)" % (name, state, ", ".join("%s %s" % (c[0], c[1]) for c in got)))


def verdicts(rounds, ratios, facts):
    nb = facts["nb"] or {}
    native = nb.get("bf16_native")
    isa = nb.get("cpu_isa", "unknown")
    print("\nGoals (issue 15):\n")
    if native:
        verdict("nobubble bf16 >= 1.25x torch.compile + autocast bf16 on small, medium, smollm-135m, >= 1.1x on tiny",
                [("%s/%d/%s" % k, "%.2fx" % r["bf16/compile"], r["bf16/compile"] >= BF16_GOAL[k[0]])
                 for k, r in ratios.items() if r["bf16/compile"] is not None and k[0] in BF16_GOAL])
    else:
        print("- nobubble bf16 against torch.compile + autocast bf16: **not measurable here: no native bf16** "
              "(oneDNN ISA %s); the bf16 rows above are emulated and carry no goal" % isa)
    verdict("nobubble fp32 >= 1.1x PyTorch eager fp32 on every model",
            [("%s/%d/%s" % k, "%.2fx" % r["fp32/eager"], r["fp32/eager"] >= 1.1)
             for k, r in ratios.items() if r["fp32/eager"] is not None])
    verdict("nobubble fp32 >= 1.0x torch.compile fp32 on every model",
            [("%s/%d/%s" % k, "%.2fx" % r["fp32/compile"], r["fp32/compile"] >= 1.0)
             for k, r in ratios.items() if r["fp32/compile"] is not None])
    muon = []
    for key, by_round in rounds.items():
        if key[0] == "medium" and key[2] == "muon":
            for impl in NB:
                share = med([rr[impl]["median_optimizer_s"] / rr[impl]["median_step_s"]
                             for rr in by_round.values() if impl in rr])
                if share is not None:
                    muon.append(("%s %d threads" % (impl, key[1]), "%.1f%%" % (100 * share), share <= 0.15))
    verdict("Muon's optimizer step <= 15% of the medium step in both precisions", muon)
    acts = {}
    for key, by_round in rounds.items():
        for rr in by_round.values():
            if all(i in rr for i in NB):
                acts[key[0]] = rr[NB[1]]["activation_bytes_per_token"] / rr[NB[0]]["activation_bytes_per_token"]
    verdict("nobubble bf16 activation bytes per token <= 60% of fp32's",
            [(m, "%.0f%%" % (100 * v), v <= 0.60) for m, v in sorted(acts.items(), key=lambda kv: sort_key((kv[0], 0, "")))])
    print("- auto: chooses **%s** here (oneDNN ISA %s%s); `nobubble bench` prints the choice" % (
        "bf16" if native else "fp32", isa, "" if native else ", no bf16 instructions"))


def main():
    folder, rounds_n = sys.argv[1], int(sys.argv[2])
    rounds, facts = load(folder)
    cpu = open(os.path.join(folder, "cpu.txt")).read().strip().splitlines()
    nb, th = facts["nb"] or {}, facts["torch"] or {}
    print("Machine (lscpu):\n\n" + "\n".join("- " + line for line in cpu) + "\n")
    print("nobubble: GEMM %s, oneDNN ISA %s, bf16 %s" % (
        nb.get("gemm"), nb.get("cpu_isa"), "native" if nb.get("bf16_native") else "emulated (no bf16 instructions)"))
    opt_impls = sorted(facts.get("opt_impls", ()))
    print("PyTorch %s (CPU capability %s, its oneDNN bf16 usable: %s); optimizers: %s\n" % (
        th.get("torch"), th.get("cpu_capability"), th.get("torch_onednn_bf16"), "; ".join(opt_impls)))
    print("| model | threads | optimizer | implementation | step (s) | tokens/s | GFLOP/s | of measured fp32 peak "
          "| activations (KiB/token) | outside GEMMs | optimizer share | compile (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(rounds, key=sort_key):
        impl_rows(key, rounds[key])
    print("\n| model | threads | optimizer | nobubble fp32 / torch eager fp32 | nobubble fp32 / torch compile fp32 "
          "| nobubble bf16 / torch compile+autocast bf16 | nobubble bf16 / torch autocast bf16 |")
    print("|---|---|---|---|---|---|---|")
    ratios = ratio_rows(rounds)
    print("\n(%d rounds; medians over rounds; ratios taken within each round, their median first and then each "
          "round's in order; n/m: not measured)" % rounds_n)
    for e in facts.get("errors", []):
        print("- PyTorch failed: %s" % e)
    verdicts(rounds, ratios, facts)


if __name__ == "__main__":
    main()
