#!/usr/bin/env python3
"""Reads the TensorBoard event files nobubble wrote (train --tensorboard DIR) with tensorboard's own
EventAccumulator, and checks every scalar against metrics.jsonl of the same run: the tags, the steps
and the values (to float32 precision). Exit status 1 on any difference.

    python3 tools/reference/tensorboard_read.py TB_DIR RUN_DIR/metrics.jsonl"""
import json
import math
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

# tag -> the metrics.jsonl key it carries
TAGS = {"train/loss": "train_loss", "train/lr": "lr", "train/tokens_per_s": "tokens_per_s",
        "train/update_norm": "update_norm", "delay/tau": "tau", "delay/version_distance": "version_distance",
        "train/grad_norm": "grad_norm", "val/loss": "val_loss", "delay/taylor_ratio": "taylor_ratio"}


def main(tb_dir, metrics_path):
    acc = EventAccumulator(tb_dir, size_guidance={"scalars": 0})
    acc.Reload()
    lines = [json.loads(l) for l in open(metrics_path)]
    got_tags = set(acc.Tags()["scalars"])
    want_tags = {t for t, k in TAGS.items() if any(k in l for l in lines)}
    bad = 0
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
