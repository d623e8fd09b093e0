#!/usr/bin/env python3
"""Where PipeDream-2BW wins in time to a target loss (docs/projection.md).

2BW reaches after S steps the loss that the synchronous run reaches after fewer steps, S' < S; it is
ahead in time to that loss when its tokens/s is more than R* = S / S' times the best synchronous
schedule's. From the scaling study (results/scaling, `tiny`, 3 paired seeds): at each length S with a
shorter length below it, the synchronous loss per e-fold of steps between the two tuned-rate means,
k = (L(S_prev) - L(S)) / ln(S / S_prev), and the paired 2BW gap g at S's tuned rate (95% t interval)
give R* = exp(g / k), its interval from g's (k taken as measured, its own noise not propagated).
Then each row of `nobubble project --json` (given as files) is classed: 2BW ahead when its tokens/s
ratio exceeds R*'s upper end, behind when below the lower end, else not decided.

usage: experiments/projection/break_even.py [PROJECTION.jsonl ...]
"""
import collections
import csv
import math
import os
import statistics
import sys

T975 = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365}
here = os.path.dirname(os.path.abspath(__file__))
rows = list(csv.DictReader(open(os.path.join(here, '..', '..', 'results', 'scaling', 'results.csv'))))
loss = collections.defaultdict(dict)  # (steps, optimizer, lr, delay) -> {seed: final_val_loss}
for r in rows:
    if r['status'] == 'done':
        loss[(int(r['steps']), r['optimizer'], r['lr'], r['delay'])][r['seed']] = float(r['final_val_loss'])


def tuned(steps, opt):
    """The rate of the lowest mean synchronous loss at this length (the study's tuning rule)."""
    cands = [(statistics.mean(v.values()), k[2]) for k, v in loss.items()
             if k[0] == steps and k[1] == opt and k[3] == 'sync' and len(v) >= 3]
    return min(cands)[1] if cands else None


def paired_gap(steps, opt, lr):
    s, a = loss.get((steps, opt, lr, 'sync'), {}), loss.get((steps, opt, lr, '2bw'), {})
    d = [a[k] - s[k] for k in sorted(set(s) & set(a))]
    if len(d) < 3:
        return None
    m, h = statistics.mean(d), T975[len(d)] * statistics.stdev(d) / math.sqrt(len(d))
    return m, m - h, m + h, len(d)


breaks = []
print('| optimizer | steps | tuned rate | 2BW gap (95%) | sync loss per e-fold of steps | R* = S / S\' (95%) |')
print('|---|---|---|---|---|---|')
for opt in ('muon', 'adamw'):
    lengths = sorted({k[0] for k in loss if k[1] == opt})
    for prev, S in zip(lengths, lengths[1:]):
        lr, lr_prev = tuned(S, opt), tuned(prev, opt)
        g = paired_gap(S, opt, lr) if lr else None
        if not g or not lr_prev:
            continue
        k = (statistics.mean(loss[(prev, opt, lr_prev, 'sync')].values()) -
             statistics.mean(loss[(S, opt, lr, 'sync')].values())) / math.log(S / prev)
        r = [math.exp(x / k) for x in g[:3]]
        breaks.append((opt, S, r))
        print(f'| {opt} | {S:,} | {lr} | {g[0]:+.4f} [{g[1]:+.4f}, {g[2]:+.4f}] (n = {g[3]}) | {k:.3f} '
              f'({prev:,} to {S:,}) | {r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}] |')

import json
for path in sys.argv[1:]:
    pts = collections.defaultdict(dict)
    for line in open(path):
        j = json.loads(line)
        if j.get('fits', True):
            pts[(j['bandwidth_gbps'], j['stages'], j['replicas'])][j['pipeline']] = j['tokens_per_s']
    print(f'\n{os.path.basename(path)}: 2BW\'s tokens/s over the best synchronous schedule that fits, and the verdict '
          'against each R* (ahead / behind / not decided)\n')
    print('| Gb/s | P | D | 2bw / best sync | ' + ' | '.join(f'{o} {S:,}' for o, S, _ in breaks) + ' |')
    print('|---|---|---|---|' + '---|' * len(breaks))
    for key in sorted(pts):
        kinds = pts[key]
        sync = max((v for k, v in kinds.items() if k != '2bw'), default=0)
        if '2bw' not in kinds or not sync:
            continue
        ratio = kinds['2bw'] / sync
        verdicts = ['ahead' if ratio > r[2] else 'behind' if ratio < r[1] else 'not decided' for _, _, r in breaks]
        print(f'| {key[0]:g} | {key[1]} | {key[2]} | {ratio:.3f} | ' + ' | '.join(verdicts) + ' |')
