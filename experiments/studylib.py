#!/usr/bin/env python3
"""What the pre-registered studies' scripts share (experiments/claim_10k, moe, size_axis and claims.py).

- Student's t (its CDF from the regularized incomplete beta function, the quantile by bisection), the
  paired statistics of per-seed differences (`Paired`: mean, sd, t interval, TOST) and Welch's interval
  between unpaired groups;
- rate tuning on a factor-2 ladder (`ladder_tune`: the lowest mean, a tie to the lower rate, an edge
  extended by one rung) and the grid a study's tune.py prints (`write_grid`);
- which machine ran which point (`point_machines`: machines.log beside the sweep's log);
- `load`, a sibling script imported by its path (the studies' folders are not packages);
- `final_eval_loss`, a point's whole-split loss read and checked.

Python 3 standard library only.
"""
import importlib.util
import json
import math
import os
import sys


def final_eval_loss(path):
    """The whole-split validation loss in a point's final_eval.json (PATH), or None where the file is not there
    yet. A file without a finite number val_loss ends the script naming it: a NaN would otherwise enter a
    mean, a tuned rate or a verdict without a word."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    try:
        v = json.loads(text)["val_loss"]
    except (ValueError, KeyError, TypeError) as e:
        sys.exit(f"{path}: expected a JSON object with a number val_loss ({type(e).__name__}: {e})")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        sys.exit(f"{path}: val_loss {v!r}: expected a finite number")
    return v


def load(name, path):
    """The module at PATH (a study's tune.py or analyze.py) under NAME."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------- Student's t
def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def _betainc(a, b, x):
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log(1 - x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def t_cdf(t, df):
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2.0, 0.5, x)
    return 1.0 - tail if t > 0 else tail


def t_quantile(p, df):
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# ---------------------------------------------------------------- paired statistics
class Paired:
    """Mean, sd and t intervals of per-seed differences."""

    def __init__(self, diffs):
        self.d = list(diffs)
        self.n = len(self.d)
        self.mean = sum(self.d) / self.n if self.n else float("nan")
        self.sd = math.sqrt(sum((x - self.mean) ** 2 for x in self.d) / (self.n - 1)) if self.n > 1 else float("nan")
        self.se = self.sd / math.sqrt(self.n) if self.n > 1 else float("nan")

    def interval(self, level=0.95):
        if self.n < 2:
            return (float("nan"), float("nan"))
        t = t_quantile(1 - (1 - level) / 2, self.n - 1)
        return (self.mean - t * self.se, self.mean + t * self.se)

    def resolved(self):
        lo, hi = self.interval()
        return lo > 0 or hi < 0

    def tost(self, margin):
        """Two one-sided t tests at 0.05 each: (equivalent, p) with p the larger one-sided p."""
        if self.n < 2 or not self.se > 0:
            return (False, float("nan"))
        df = self.n - 1
        p_low = 1 - t_cdf((self.mean + margin) / self.se, df)   # H0: mean <= -margin
        p_high = t_cdf((self.mean - margin) / self.se, df)      # H0: mean >= +margin
        p = max(p_low, p_high)
        return (p < 0.05, p)


def fmt_gap(p):
    lo, hi = p.interval()
    return f"{p.mean:+.4f} [{lo:+.4f}, {hi:+.4f}]"


def welch(x, y):
    """Mean of y less mean of x with Welch's 95% interval: (difference, low, high); groups of >= 2 each.
    Two groups without spread give the difference as its own interval."""
    px, py = Paired(x), Paired(y)
    vx, vy = px.sd ** 2 / px.n, py.sd ** 2 / py.n
    d = py.mean - px.mean
    if vx + vy == 0:
        return d, d, d
    df = (vx + vy) ** 2 / (vx ** 2 / (px.n - 1) + vy ** 2 / (py.n - 1))
    half = t_quantile(0.975, df) * math.sqrt(vx + vy)
    return d, d - half, d + half


# ---------------------------------------------------------------- rate tuning
def ladder_tune(losses_of, ladder, first, last, where):
    """A synchronous rate pick on a factor-2 ladder, starting from the plan's rates FIRST..LAST: the lowest
    mean over the plan's seeds (a tie to the lower rate); a best at an edge of the rates run adds the next rung
    beyond it, and the pick waits for it. losses_of(rate) lists the rate's losses over the plan's seeds, None
    for a seed not measured yet (the pick waits for it too).
    Returns (rates to run, the pick or None while pending, {rate: mean} so far). A best at the ladder's end
    stops the study for an amendment (SystemExit naming WHERE)."""
    lo, hi = ladder.index(first), ladder.index(last)
    while True:
        rates = ladder[lo:hi + 1]
        means = {}
        for lr in rates:
            losses = losses_of(lr)
            if any(x is None for x in losses):
                return rates, None, means
            means[lr] = sum(losses) / len(losses)
        best = min(rates, key=lambda lr: (means[lr], ladder.index(lr)))
        if best == rates[0] and lo > 0:
            lo -= 1
        elif best == rates[-1] and hi < len(ladder) - 1:
            hi += 1
        elif best in (ladder[0], ladder[-1]):
            sys.exit(f"tune.py: {where}: the best rate {best} is the end of the ladder; extend the ladder and "
                     "grid.txt's lr axis (a dated amendment to the plan)")
        else:
            return rates, best, means


def tuning_skips(where, ladder, rates, chosen, delays):
    """The skip lines that hold a configuration (WHERE: 'axis=value ...') to its tuning: no rate of the
    ladder outside the rates run, and the delayed runs (DELAYS: '2bw,2bw+ef') at the pick alone (none while
    CHOSEN is None)."""
    lines = []
    unrun = [lr for lr in ladder if lr not in rates]
    if unrun:
        lines.append(f"skip {where} lr={','.join(unrun)}")
    others = [lr for lr in rates if lr != chosen]
    if others:
        lines.append(f"skip {where} lr={','.join(others)} delay={delays}")
    return lines


def write_grid(grid_file, phase, lines, state, runs, pending, check):
    """What a study's tune.py prints: GRID_FILE, then the skip lines of PHASE; the state goes to
    RUNS/rates.json. With CHECK, exits 3 naming the configurations still PENDING (no pick yet)."""
    with open(grid_file) as f:
        sys.stdout.write(f.read())
    print(f"# tune.py {phase}: the rates run and chosen so far ({os.path.join(runs, 'rates.json')})")
    print("\n".join(lines))
    os.makedirs(runs, exist_ok=True)
    with open(os.path.join(runs, "rates.json"), "w") as f:
        json.dump(state, f, indent=1)
        f.write("\n")
    if check and pending:
        print("tune.py: no rate yet for: " + "; ".join(pending), file=sys.stderr)
        sys.exit(3)


# ---------------------------------------------------------------- machines
def point_machines(folder, flags=False):
    """{point: [machine, ...] in the order they ran it} from FOLDER's machines.log (TIME start CPU | flags |
    binary HASH) and sweep.log (TIME start|resume|done POINT ...): the machine of an event is the newest
    machine line before it. A machine is its CPU name, and with FLAGS its bf16 and AVX-512 flags too."""
    machines, events = [], {}
    try:
        with open(os.path.join(folder, "machines.log")) as f:
            for line in f:
                t, _, rest = line.partition(" start ")
                cpu, cpu_flags = (rest.split(" | ") + ["", ""])[:2]
                label = cpu.strip()
                if flags:
                    label += f" ({' '.join(cpu_flags.split()) or 'no flags'})"
                machines.append((int(t), label))
        with open(os.path.join(folder, "sweep.log")) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[1] in ("start", "resume", "done"):
                    events.setdefault(parts[2], []).append(int(parts[0]))
    except OSError:
        return {}
    out = {}
    for point, times in events.items():
        seen = []
        for t in times:
            m = next((m for t0, m in reversed(machines) if t0 <= t), "unknown")
            if m not in seen:
                seen.append(m)
        out[point] = seen
    return out
