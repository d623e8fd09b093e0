#!/usr/bin/env python3
"""Reads the TensorBoard event files nobubble wrote (train --tensorboard DIR) with tensorboard's own
EventAccumulator, and checks every scalar against metrics.jsonl of the same run: the tags, the steps
and the values (to float32 precision), and the derived train/gflops and train/mfu against its tokens/s.
Exit status 1 on any difference.

    python3 tools/reference/tensorboard_read.py TB_DIR RUN_DIR/metrics.jsonl"""
import json
import math
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

# tag -> the metrics.jsonl key it carries
TAGS = {"train/loss": "train_loss", "train/lr": "lr", "train/tokens_per_s": "tokens_per_s",
        "train/update_norm": "update_norm", "delay/tau": "tau", "delay/version_distance": "version_distance",
        "train/grad_norm": "grad_norm", "val/loss": "val_loss", "delay/taylor_ratio": "taylor_ratio"}


# tags that metrics.jsonl does not carry, derived from a step's tokens/s as the progress line derives them:
# GFLOP/s (tokens/s times the model's FLOPs per token, one constant for the run) and MFU (GFLOP/s over the
# fp32 peak measured at the start, another constant; only where the peak was measured)
DERIVED = {"train/gflops", "train/mfu"}


def check_derived(acc, got_tags, lines, tb_dir):
    """train/gflops over tokens_per_s, and train/mfu over train/gflops, are each one constant."""
    bad = 0
    if "train/gflops" not in got_tags:
        print(f"{tb_dir}: no train/gflops")
        return 1
    tps = {l["step"]: l["tokens_per_s"] for l in lines}
    gflops = {e.step: e.value for e in acc.Scalars("train/gflops")}
    ratios = [gflops[s] / tps[s] for s in gflops if tps.get(s, 0) > 1]
    if sorted(gflops) != sorted(tps) or not ratios or max(ratios) - min(ratios) > 1e-4 * max(ratios):
        print(f"{tb_dir}: train/gflops is not one constant times tokens_per_s: {ratios[:4]}")
        bad += 1
    if "train/mfu" in got_tags:
        mfu = {e.step: e.value for e in acc.Scalars("train/mfu")}
        r = [mfu[s] / gflops[s] for s in mfu if gflops.get(s, 0) > 0]
        if sorted(mfu) != sorted(gflops) or not r or max(r) - min(r) > 1e-5 * max(r) or not all(0 < v < 10 for v in mfu.values()):
            print(f"{tb_dir}: train/mfu is not train/gflops over one peak: {r[:4]}")
            bad += 1
    return bad


def main(tb_dir, metrics_path):
    acc = EventAccumulator(tb_dir, size_guidance={"scalars": 0})
    acc.Reload()
    lines = [json.loads(l) for l in open(metrics_path)]
    got_tags = set(acc.Tags()["scalars"])
    bad = check_derived(acc, got_tags, lines, tb_dir)
    got_tags -= DERIVED
    want_tags = {t for t, k in TAGS.items() if any(k in l for l in lines)}
    if got_tags != want_tags:
        print(f"{tb_dir}: tags {sorted(got_tags)}, metrics.jsonl has {sorted(want_tags)}")
        bad += 1
    for tag in sorted(want_tags & got_tags):
        key = TAGS[tag]
        want = {l["step"]: l[key] for l in lines if key in l}
        got = {e.step: e.value for e in acc.Scalars(tag)}
        if sorted(got) != sorted(want):
            print(f"{tb_dir}: {tag}: steps {sorted(got)}, metrics.jsonl has {sorted(want)}")
            bad += 1
            continue
        for step, value in want.items():
            # float32 in the event against the JSON's decimal: the float's rounding is at most half an
            # ulp (|v| 2^-24), and tokens_per_s is printed with 0.1 resolution (another 0.05), so
            # 84774.08 is 84774.1 in the JSON and 84774.078125 in the event; the sum of both bounds
            rounding = abs(value) * 2 ** -23
            tol = rounding + (0.05 if key == "tokens_per_s" else 0.0)
            if not math.isclose(got[step], value, rel_tol=0.0, abs_tol=max(tol, 1e-30)):
                print(f"{tb_dir}: {tag} at step {step}: {got[step]!r}, metrics.jsonl has {value!r}")
                bad += 1
    print(f"{tb_dir}: {len(got_tags)} tags, {len(lines)} steps: {'ok' if not bad else f'{bad} difference(s)'}")
    return bad


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(1 if main(sys.argv[1], sys.argv[2]) else 0)
