#!/usr/bin/env python3
"""An independent reading of a sweep folder's tuning and scaling numbers (docs/experiments.md,
"Tuned rates and scaling"), checked against the page `nobubble report` wrote: every row of the
tuning, scaling, slope, extrapolation, fixed-rate and model-size tables and every caveat under the extrapolation is computed here from
results.csv and the runs' summary.json and metrics.jsonl, written out as the report writes it, and
looked up in report.html (the extrapolation rows and the caveats are counted too: none more). Student's
t quantiles come from a printed table, the slope, the mean response's interval and the crossing of the
noise floor from the least-squares formulas in centred form (x - mean x). Exit status 1 when a row is
missing (the ones expected are printed) or a count differs.

    python3 tools/reference/scaling_report.py SWEEP_DIR [REPORT_HTML]"""
import csv
import json
import math
import os
import sys

# t_{0.975, df} from a t table (NIST/SEMATECH e-Handbook, table 1.4.2.7.3.3)
T975 = {1: 12.706205, 2: 4.302653, 3: 3.182446, 4: 2.776445, 5: 2.570582, 6: 2.446912, 7: 2.364624,
        8: 2.306004, 9: 2.262157, 10: 2.228139, 11: 2.200985, 12: 2.178813, 13: 2.160369, 14: 2.144787,
        15: 2.131450, 16: 2.119905, 17: 2.109816, 18: 2.100922, 19: 2.093024, 20: 2.085963}


def html(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def stats(x):
    """mean, sample sd, half-width of the 95% t interval (None below 2 values)"""
    n = len(x)
    if n == 0:
        return None, 0.0, None
    m = sum(x) / n
    if n < 2:
        return m, 0.0, None
    sd = math.sqrt(sum((v - m) ** 2 for v in x) / (n - 1))
    return m, sd, T975[n - 1] * sd / math.sqrt(n)


# ---------------------------------------------------------------- quantiles and fits (no scipy here)
def t_quantile(p, df):
    """Student's t quantile for real df > 0: the CDF 1/2 + c sqrt(df) int_0^theta cos^(df-1) over theta =
    atan(x / sqrt(df)) (x = sqrt(df) tan theta takes the density to a smooth integrand), Simpson's rule,
    inverted by bisection"""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def cdf(x):
        th, n = math.atan(x / math.sqrt(df)), 400
        h = th / n
        s = sum((1 if i in (0, n) else 4 if i % 2 else 2) * math.cos(i * h) ** (df - 1) for i in range(n + 1))
        return 0.5 + c * math.sqrt(df) * s * h / 3
    lo, hi = 0.0, 1e4
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def chi2_quantile(p, df):
    """the chi-square quantile: the lower regularized gamma P(df/2, x/2) by its power series, inverted by
    bisection"""
    a = df / 2

    def cdf(x):
        z = x / 2
        if z <= 0:
            return 0.0
        term = total = 1 / a
        k = 0
        while term > 1e-17 * total:
            k += 1
            term *= z / (a + k)
            total += term
        return math.exp(a * math.log(z) - z - math.lgamma(a)) * total
    lo, hi = 0.0, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


# the computed quantiles against the printed table and chi-square's 2-df closed form, -2 ln(1 - p)
assert all(abs(t_quantile(0.975, k) - v) < 2e-6 for k, v in T975.items()), "t_quantile disagrees with the t table"
assert all(abs(chi2_quantile(p, 2) + 2 * math.log(1 - p)) < 1e-9 for p in (0.0125, 0.025, 0.975, 0.9875))


def sd_interval(sd, n, level):
    """a standard deviation's interval: sd sqrt((n - 1) / chi2), chi2 at the upper and lower tails"""
    tail = (1 - level) / 2
    return sd * math.sqrt((n - 1) / chi2_quantile(1 - tail, n - 1)), sd * math.sqrt((n - 1) / chi2_quantile(tail, n - 1))


B_MAX = 10


def power_law(tokens, means):
    """gap = a (tokens / geometric mean)^b by least squares: (b, lo, hi, lo_open, hi_open, off). b from a grid of
    step 0.05 over [-10, 10] refined by ternary search; the profile interval's ends where the residual sum first
    passes RSS_min (1 + t^2 / (n - 2)) walking out from b in steps of 0.05, then bisection"""
    lt = [math.log(v) for v in tokens]
    u = [v - sum(lt) / len(lt) for v in lt]

    def rss(b):
        x = [math.exp(b * v) for v in u]
        a = sum(m * xi for m, xi in zip(means, x)) / sum(xi * xi for xi in x)
        return sum((m - a * xi) ** 2 for m, xi in zip(means, x))
    grid = [-B_MAX + 0.05 * i for i in range(int(2 * B_MAX / 0.05) + 1)]
    i = min(range(len(grid)), key=lambda k: rss(grid[k]))
    if i in (0, len(grid) - 1):
        return None, None, None, False, False, -1 if i == 0 else 1
    lo, hi = grid[i - 1], grid[i + 1]
    while hi - lo > 1e-11:
        m1, m2 = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        lo, hi = (lo, m2) if rss(m1) <= rss(m2) else (m1, hi)
    b = (lo + hi) / 2
    n = len(means)
    if n < 3:
        return b, None, None, False, False, 0
    level = rss(b) * (1 + T975[n - 2] ** 2 / (n - 2))

    def end(sign):
        inside = b
        while True:
            out = inside + sign * 0.05
            if abs(out) >= B_MAX:
                out = sign * B_MAX
            if rss(out) > level:
                break
            if out == sign * B_MAX:
                return out, True
            inside = out
        for _ in range(200):
            mid = (inside + out) / 2
            inside, out = (inside, mid) if rss(mid) > level else (mid, out)
        return (inside + out) / 2, False
    (lo, lo_open), (hi, hi_open) = end(-1), end(1)
    return b, lo, hi, lo_open, hi_open, 0


def welch(x, y):
    """mean(y) - mean(x), the half-width of its 95% Welch interval and the Welch-Satterthwaite df (None, None
    when a side has one value; half 0 and df n_x + n_y - 2 when neither has spread)"""
    mx, sx, _ = stats(x)
    my, sy, _ = stats(y)
    if len(x) < 2 or len(y) < 2:
        return my - mx, None, None
    vx, vy = sx * sx / len(x), sy * sy / len(y)
    if vx + vy == 0:
        return my - mx, 0.0, len(x) + len(y) - 2
    df = (vx + vy) ** 2 / (vx ** 2 / (len(x) - 1) + vy ** 2 / (len(y) - 1))
    return my - mx, t_quantile(0.975, df) * math.sqrt(vx + vy), df


def verdict(lo, hi):
    return "shrinks" if hi < 0 else "grows" if lo > 0 else "not resolved"

def number(s):
    try:
        v = float(s)
        return v if math.isfinite(v) else None
    except ValueError:
        return None


def params(m):
    """a Llama-style decoder's parameter count from summary.json's model (None without one): the
    embedding (and an untied head), per block two norms, q/k/v/o and the SwiGLU's three matrices, a
    final norm"""
    keys = ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ffn", "tied")
    if not isinstance(m, dict) or any(k not in m for k in keys):
        return None
    d, hd = m["d_model"], m["d_model"] // m["n_heads"]
    q, kv = hd * m["n_heads"], hd * m["n_kv_heads"]
    block = 2 * d + d * q + 2 * d * kv + q * d + 3 * d * m["d_ffn"]
    return m["vocab_size"] * d * (1 if m["tied"] else 2) + m["n_layers"] * block + d


def load(d):
    rows = list(csv.reader(open(os.path.join(d, "results.csv"))))
    head = rows[0]
    axes = head[1:head.index("final_train_loss")]
    runs = []
    for r in rows[1:]:
        run = {"point": r[0], "labels": dict(zip(axes, r[1:1 + len(axes)])), "status": r[1 + len(axes) + 5]}
        if run["status"] == "done":
            folder = os.path.join(d, "runs", r[0])
            s = json.load(open(os.path.join(folder, "summary.json")))
            lines = [json.loads(l) for l in open(os.path.join(folder, "metrics.jsonl")) if l.strip()]
            run["val"] = s.get("final_val_loss")
            dl = s["delay"]
            run["sync"] = dl["mode"] == "sync" or (dl["mode"] == "fixed" and dl["tau"] == 0)
            run["plain"] = not run["sync"] and not dl["ef"] and not dl.get("taylor", 0) > 0 and \
                dl.get("sync_start", 0) == 0 and dl.get("sync_cooldown", 0) == 0
            run["mode"], run["tau"] = dl["mode"], dl["tau"]
            run["tokens"] = lines[-1]["tokens"]
            run["params"] = params(s.get("model"))
            fe = os.path.join(folder, "final_eval.json")
            run["whole"] = json.load(open(fe))["val_loss"] if os.path.exists(fe) else None
        runs.append(run)
    # a folder whose every finished run has a whole-split evaluation (final_eval.json) is measured there;
    # one where only some have it keeps the last evaluation during training for all
    done = [r for r in runs if r["status"] == "done"]
    if done and all(r["whole"] is not None for r in done):
        for r in done:
            r["val"] = r["whole"]
    return axes, runs


def main(d, page):
    axes, runs = load(d)
    text = open(page).read()
    seed_ax = "seed" if "seed" in axes else None
    curve_ax = "delay" if "delay" in axes else [a for a in axes if a != seed_ax][-1]
    others = [a for a in axes if a not in (seed_ax, curve_ax, "lr")]
    done = [r for r in runs if r["status"] == "done"]
    seeds = []
    for r in done:
        s = r["labels"][seed_ax] if seed_ax else ""
        if s not in seeds:
            seeds.append(s)
    curves = []
    for r in runs:
        if r["labels"][curve_ax] not in curves:
            curves.append(r["labels"][curve_ax])
    sync = next(r["labels"][curve_ax] for r in done if r["sync"])
    delayed = [c for c in curves if c != sync]

    def title(labels, skip=None):
        t = ", ".join(f"{a}={labels[a]}" for a in others if a != skip)
        return t or "all runs"

    def cell(group, rate, curve):
        return [r for r in runs if title(r["labels"]) == group and r["labels"]["lr"] == rate and
                r["labels"][curve_ax] == curve]

    def final(group, rate, curve, seed):
        for r in cell(group, rate, curve):
            if r["status"] == "done" and (not seed_ax or r["labels"][seed_ax] == seed) and r["val"] is not None:
                return r
        return None

    def gaps(group, rate, curve):
        out = []
        for s in seeds:
            a, b = final(group, rate, curve, s), final(group, rate, sync, s)
            if a and b:
                out.append((s, a["val"] - b["val"], b["tokens"]))
        return out

    def gap_text(g):
        m, sd, half = stats([x[1] for x in g])
        if m is None:
            return "&mdash;"
        if half is None:
            return "%+.4f (1 pair, no interval)" % m
        return "%+.4f [%+.4f, %+.4f]%s" % (m, m - half, m + half, " within noise" if m - half <= 0 <= m + half else "")

    def loss_text(group, rate, curve):
        c = cell(group, rate, curve)
        v = [r["val"] for r in c if r["status"] == "done" and r["val"] is not None]
        if not c:
            return "not run"
        if not v:
            return "not finished"
        m, sd, _ = stats(v)
        return "%.4f &plusmn; %.4f (%d)" % (m, sd, len(v))

    def recovery(g, rate, c):
        first = next((r for r in cell(g, rate, c) if r["status"] == "done"), None)
        if first is None or first["sync"] or first["plain"]:
            return "&mdash;"
        plain = next((x for x in curves if any(r["status"] == "done" and r["plain"] and r["mode"] == first["mode"] and
                                                r["tau"] == first["tau"] for r in cell(g, rate, x))), None)
        if plain is None:
            return "&mdash;"
        gp = gaps(g, rate, plain)
        m, sd, half = stats([x[1] for x in gp])
        if m is None:
            return "&mdash;"
        if half is not None and m - half <= 0 <= m + half:
            return "n/a: gap within noise"
        if not m > 0:
            return "n/a: no gap"
        gm = dict((x[0], x[1]) for x in gaps(g, rate, c))
        rec = [1 - gm[sd_] / gap for sd_, gap, _ in gp if sd_ in gm and gap != 0]
        m, sd, half = stats(rec)
        if m is None:
            return "&mdash;"
        if half is None:
            return "%.1f%% (1 pair, no interval)" % (100 * m)
        return "%.1f%% [%.1f%%, %.1f%%]" % (100 * m, 100 * (m - half), 100 * (m + half))

    groups = []
    for r in runs:
        if title(r["labels"]) not in groups:
            groups.append(title(r["labels"]))
    rates, pick, why = {}, {}, {}
    for g in groups:
        rates[g] = sorted({r["labels"]["lr"] for r in runs if title(r["labels"]) == g}, key=float)
        planned = ended = 0
        best = None
        for rate in rates[g]:
            c = cell(g, rate, sync)
            fin = [r["val"] for r in c if r["status"] == "done" and r["val"] is not None]
            planned += len(c)
            ended += sum(r["status"] in ("done", "failed") for r in c)
            if fin and len(fin) == len(c) and (best is None or sum(fin) / len(fin) < best[1]):
                best = (rate, sum(fin) / len(fin))
        pick[g] = best[0] if best and ended == planned else None
        why[g] = "not tuned yet: %d of %d synchronous runs ended" % (ended, planned) if ended < planned else \
            "no rate has every synchronous run finished with a validation loss"

    want = []
    for g in groups:
        for i, rate in enumerate(rates[g]):
            row = f"<tr><td>{html(g)}</td><td>{rate}</td><td>{loss_text(g, rate, sync)}</td>"
            for c in delayed:
                row += f"<td>{loss_text(g, rate, c)}</td><td>{gap_text(gaps(g, rate, c))}</td>"
            if pick[g] is None:
                row += f"<td>no pick: {why[g]}</td>"
            elif pick[g] != rate:
                row += "<td></td>"
            else:
                edge = "the only rate" if len(rates[g]) == 1 else "the lowest rate" if i == 0 else \
                    "the highest rate" if i == len(rates[g]) - 1 else None
                row += "<td>tuned%s</td>" % (f"; edge: extend the grid ({edge})" if edge else "")
            want.append(row + "</tr>")

    def mean_tokens(g):
        tok = [final(g, pick[g], sync, x)["tokens"] for x in seeds if final(g, pick[g], sync, x)]
        return sum(tok) / len(tok)

    def gap_num(v):
        return "%.4f" % v if 1e-3 <= v < 1e3 else "%.3g" % v

    def tok_num(v):
        return "%.3g" % v if math.isfinite(v) else "&gt; 1e308"

    def extrap_cells(f, used, steps_of, pick):
        """the fitted line ln gap = a + b ln tokens at T, 10 T, 100 T with the mean response's 95% interval
        (se = s sqrt(1/n + (x0 - mean x)^2 / Sxx)), the noise floor and the tokens where the line meets it"""
        last = used[-1]
        T = mean_tokens(last)
        out = f"<td>{steps_of[last]}</td><td>{T:.0f}</td>"
        for m in (1, 10, 100):
            x0 = math.log(m * T)
            y0 = f["a"] + f["b"] * x0
            h = f["t"] * math.sqrt(f["s2"] * (1 / f["n"] + (x0 - f["mx"]) ** 2 / f["sxx"]))
            out += f"<td>{gap_num(math.exp(y0))} [{gap_num(math.exp(y0 - h))}, {gap_num(math.exp(y0 + h))}]</td>"
        sync_vals = [r["val"] for r in cell(last, pick[last], sync) if r["status"] == "done" and r["val"] is not None]
        if len(sync_vals) < 2:
            k = len(sync_vals)
            return out + "<td>n/a: %d synchronous run%s</td><td>n/a: no noise floor</td></tr>" % (k, "" if k == 1 else "s")
        _, floor, _ = stats(sync_vals)
        f_lo, f_hi = sd_interval(floor, len(sync_vals), 0.95)
        out += "<td>%.4f [%.4f, %.4f] (%d runs)</td>" % (floor, f_lo, f_hi, len(sync_vals))
        if f["b"] >= 0:
            return out + "<td>never (slope &ge; 0)</td></tr>"
        if floor <= 0:
            return out + "<td>never (noise floor 0)</td></tr>"
        cross = math.exp((math.log(floor) - f["a"]) / f["b"])
        # Bonferroni: the line's band at 97.5% (its t) and the floor's 97.5% interval. The band holds L where
        # (my + b u - L)^2 <= t^2 s^2 (1/n + u^2 / Sxx), u = x - mean x; the crossing's interval runs from the
        # band's first meeting with the floor's upper end to its last meeting with the lower end.
        g2 = t_quantile(0.9875, f["n"] - 2) ** 2 * f["s2"]
        A = f["b"] ** 2 - g2 / f["sxx"]
        if A <= 0:
            return out + f"<td>{tok_num(cross)} (no interval: the slope's 97.5% interval reaches 0)</td></tr>"

        def roots(L):
            B, C = 2 * f["b"] * (f["my"] - L), (f["my"] - L) ** 2 - g2 / f["n"]
            root = math.sqrt(max(B * B - 4 * A * C, 0))  # B^2/4 - AC = (t^2 s^2)(d^2/Sxx + A/n) >= 0 when A > 0
            return sorted(((-B - root) / (2 * A), (-B + root) / (2 * A)))
        f_lo, f_hi = sd_interval(floor, len(sync_vals), 0.975)
        lo, hi = math.exp(f["mx"] + roots(math.log(f_hi))[0]), math.exp(f["mx"] + roots(math.log(f_lo))[1])
        return out + f"<td>{tok_num(cross)} [{tok_num(lo)}, {tok_num(hi)}]</td></tr>"

    def count_text(v):
        return "%.3gB" % (v / 1e9) if v >= 1e9 else "%.3gM" % (v / 1e6) if v >= 1e6 else "%.0f" % v

    def is_edge(g):
        return rates[g].index(pick[g]) in (0, len(rates[g]) - 1)

    def fit_params(used):
        """the synchronous runs' model size over a fit's lengths: None unknown, -1 when they differ"""
        seen = set()
        for g in used:
            first = next(r for r in cell(g, pick[g], sync) if r["status"] == "done")
            seen.add(first["params"])
        return None if None in seen else seen.pop() if len(seen) == 1 else -1

    def caveats(fits):
        out, t_max, sizes = [], 0, []
        for s, c, used, shared, left in fits:
            t1, t2 = mean_tokens(used[0]), mean_tokens(used[-1])
            span = math.log10(t2 / t1)
            text = html(", ".join(f"{g_steps[g]} steps at lr {pick[g]}" + (" (grid edge)" if is_edge(g) else "") for g in used))
            text += left
            out.append(f"<li>{html(s)}, {html(c)}: a fit over {len(used)} lengths spanning a factor {t2 / t1:.3g} of tokens "
                       f"({t1:.0f} to {t2:.0f}, {span:.2f} decades): {text}; 100 T lies 2 decades beyond the longest, "
                       f"{2 / span:.1f} times that span.</li>")
            t_max = max(t_max, t2)
            sizes.append(fit_params(used))
        if any(shared for _, _, _, shared, _ in fits):
            out.append("<li>Each fit treats its lengths' mean gaps as independent, although a seed keeps its initialization "
                       "and data order at every length: a seed's effect on the gap that lasts across lengths makes the "
                       "intervals too wide or too narrow.</li>")
        edge = any(is_edge(g) for _, _, used, _, _ in fits for g in used)
        out.append("<li>The rate is tuned anew at each length (the rates above): the extrapolation assumes that longer "
                   "runs, tuned the same way, stay on the fitted line." +
                   (" A rate at its grid's edge may not be the best: a better one may lie beyond." if edge else "") + "</li>")
        known = [v for v in sizes if v is not None]
        mixed = -1 in known and None not in sizes
        if mixed:
            out.append("<li>A fit mixes model sizes across its lengths: its line confounds tokens with model size.</li>")
        elif None in sizes:
            size = " per fit (the runs' summary.json has no model to count)"
        elif min(known) == max(known):
            size = f" ({count_text(known[0])} parameters in every fitted run)"
        else:
            size = f" per fit ({count_text(min(known))} to {count_text(max(known))} parameters)"
        if not mixed:
            out.append(f"<li>One model size{size}: how the gap changes with model size is not measured.</li>")
        paper = ("<li>The paper's scale (hundreds of millions to billions of parameters, billions of tokens) is many "
                 "decades beyond:")
        if None not in sizes and not mixed:
            paper += f" 1e8 parameters is {math.log10(1e8 / max(known)):.1f} decades above {count_text(max(known))}, and"
        out.append(paper + f" 1e9 tokens is {math.log10(1e9 / t_max):.1f} decades beyond the longest fitted length's "
                           f"{t_max:.0f} tokens.</li>")
        return out

    def tokens_at(g, rate):
        tok = [final(g, rate, sync, x)["tokens"] for x in seeds if final(g, rate, sync, x)]
        return sum(tok) / len(tok)

    def means_of(lengths, rate_of, c):
        """one entry per length with a pair: (group, rate, its gaps, mean tokens); rate_of(g) None: no rate"""
        out = []
        for g in lengths:
            rate = rate_of(g)
            gp = gaps(g, rate, c) if rate is not None else []
            if gp:
                out.append((g, rate, [x[1] for x in gp], tokens_at(g, rate)))
        return out

    def split_log(ms):
        """the lengths whose mean gap is > 0 (the log fit's) and the text naming the others"""
        kept, left = [], []
        for g, rate, gp, tok in ms:
            m, sd, half = stats(gp)
            if m > 0:
                kept.append((g, rate, gp, tok))
            else:
                left.append("%s steps at lr %s (%+.4f" % (g_steps[g], rate, m) +
                            (" [%+.4f, %+.4f])" % (m - half, m + half) if half is not None else ")"))
        return kept, "; left out, mean gap &le; 0 (no logarithm): " + ", ".join(html(x) for x in left) if left else ""

    def log_line(kept):
        """ln(mean gap) on ln(tokens) in centred form; None below 2 lengths or without a spread of tokens"""
        pts = [(math.log(tok), math.log(sum(gp) / len(gp))) for _, _, gp, tok in kept]
        n = len(pts)
        if n < 2 or len({p[0] for p in pts}) == 1:
            return None
        mx, my = sum(p[0] for p in pts) / n, sum(p[1] for p in pts) / n
        sxx = sum((p[0] - mx) ** 2 for p in pts)
        b = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx
        a = my - b * mx
        s2 = sum((p[1] - a - b * p[0]) ** 2 for p in pts) / (n - 2) if n > 2 else None
        return {"n": n, "mx": mx, "my": my, "sxx": sxx, "a": a, "b": b, "s2": s2}

    def log_reason(kept, left):
        if len(kept) < 2:
            return "not fitted: a mean gap &gt; 0 at %d length%s, 2 needed%s" % (len(kept), "" if len(kept) == 1 else "s", left)
        return "not fitted: every length has the same tokens" if log_line(kept) is None else None

    def log_cell(ms):
        kept, left = split_log(ms)
        reason = log_reason(kept, left)
        if reason:
            return f"<td>{reason}</td>"
        f = log_line(kept)
        if f["n"] < 3:
            return "<td>%+.3f (2 lengths, no interval)%s</td>" % (f["b"], left)
        half = T975[f["n"] - 2] * math.sqrt(f["s2"] / f["sxx"])
        return "<td>%+.3f [%+.3f, %+.3f] %s%s</td>" % (f["b"], f["b"] - half, f["b"] + half,
                                                      verdict(f["b"] - half, f["b"] + half), left)

    def power_cell(ms):
        if len(ms) < 2:
            return "<td>not fitted: %d length, 2 needed</td>" % len(ms)
        if len({tok for *_, tok in ms}) == 1:
            return "<td>not fitted: every length has the same tokens</td>"
        b, lo, hi, lo_open, hi_open, off = power_law([tok for *_, tok in ms], [sum(gp) / len(gp) for _, _, gp, _ in ms])
        if off:
            return "<td>not fitted: the least-squares exponent lies beyond %+d</td>" % (off * B_MAX)
        if lo is None:
            return "<td>%+.3f (2 lengths, no interval)</td>" % b
        ends = ("&lt; -%d" % B_MAX if lo_open else "%+.3f" % lo, "&gt; +%d" % B_MAX if hi_open else "%+.3f" % hi)
        return "<td>%+.3f [%s, %s] %s</td>" % (b, ends[0], ends[1], verdict(lo, hi))

    def fit_cells(c, ms):
        return f"<td>{html(c)}</td><td>{len(ms)}</td><td>{sum(len(gp) for _, _, gp, _ in ms)}</td>" + log_cell(ms) + \
            power_cell(ms) + "</tr>"

    def difference_rows(s, c, ms, rate):
        out = []
        for (g0, r0, x, _), (g1, r1, y, _) in zip(ms, ms[1:]):
            d, half, df = welch(x, y)
            lr = html(rate) if rate else f"{html(r0)} &rarr; {html(r1)} (tuned)"
            row = (f"<tr><td>{html(s)}</td><td>{html(c)}</td><td>{lr}</td><td>{g_steps[g0]} &rarr; {g_steps[g1]}</td>"
                   f"<td>{sum(x) / len(x):+.4f} &rarr; {sum(y) / len(y):+.4f}</td>")
            if half is None:
                out.append(row + "<td>%+.4f (one pair at a length: no interval)</td><td>&mdash;</td></tr>" % d)
            else:
                out.append(row + "<td>%+.4f [%+.4f, %+.4f] %s</td><td>%.1f</td></tr>" % (d, d - half, d + half,
                                                                                        verdict(d - half, d + half), df))
        return out

    extrap_want, fixed_want, diff_want, diff_fixed, fits, g_steps = [], [], [], [], [], {}
    if "steps" in axes:
        series = []
        for g in groups:
            r0 = next(r for r in runs if title(r["labels"]) == g)
            s = title(r0["labels"], "steps")
            if s not in series:
                series.append(s)
        for s in series:
            lengths = sorted([g for g in groups if title(next(r for r in runs if title(r["labels"]) == g)["labels"],
                                                         "steps") == s],
                             key=lambda g: float(next(r for r in runs if title(r["labels"]) == g)["labels"]["steps"]))
            steps_of = {g: next(r for r in runs if title(r["labels"]) == g)["labels"]["steps"] for g in lengths}
            g_steps.update(steps_of)
            for g in lengths:
                if pick[g] is None:
                    want.append(f"<tr><td>{html(s)}</td><td>{steps_of[g]}</td><td colspan=\"8\">{why[g]}</td></tr>")
                    continue
                rate = pick[g]
                tok = [final(g, rate, sync, x)["tokens"] for x in seeds if final(g, rate, sync, x)]
                head = f"<tr><td>{html(s)}</td><td>{steps_of[g]}</td><td>{sum(tok) / len(tok):.0f}</td><td>{rate}</td>"
                for c in delayed:
                    gp = gaps(g, rate, c)
                    row = head + f"<td>{html(c)}</td>"
                    if not gp:
                        want.append(row + "<td colspan=\"4\">not run at the tuned rate</td></tr>")
                        continue
                    m, sd, half = stats([x[1] for x in gp])
                    row += "<td>%+.4f</td>" % m
                    row += ("<td>[%+.4f, %+.4f]%s</td>" % (m - half, m + half, " within noise" if m - half <= 0 <= m + half else "")
                            if half is not None else "<td>n/a: 1 pair</td>")
                    row += f"<td>{len(gp)}</td><td>{recovery(g, rate, c)}</td></tr>"
                    want.append(row)
            for c in delayed:
                ms = means_of(lengths, lambda g: pick[g], c)
                kept, left = split_log(ms)
                want.append(f"<tr><td>{html(s)}</td>" + fit_cells(c, ms))
                diff_want.extend(difference_rows(s, c, ms, None))
                erow = f"<tr><td>{html(s)}</td><td>{html(c)}</td>"
                reason = log_reason(kept, left)
                if reason:
                    extrap_want.append(erow + f"<td colspan=\"7\">{reason}</td></tr>")
                    continue
                fit = log_line(kept)
                if fit["n"] < 3:
                    extrap_want.append(erow + "<td colspan=\"7\">not extrapolated: %d lengths, no interval (3 needed)</td></tr>"
                                       % fit["n"])
                    continue
                fit["t"] = T975[fit["n"] - 2]
                used = [g for g, *_ in kept]
                extrap_want.append(erow + extrap_cells(fit, used, steps_of, pick))
                seed_count = {}
                for g, rate, _, _ in ms:
                    for seed, _, _ in gaps(g, rate, c):
                        seed_count[seed] = seed_count.get(seed, 0) + 1
                fits.append((s, c, used, any(v > 1 for v in seed_count.values()), left))
            # the gap at one rate across lengths: every rate with pairs at 2 lengths or more, each delayed curve
            fixed_rates = []
            for g in lengths:
                for r in runs:
                    if title(r["labels"]) == g and r["labels"]["lr"] not in fixed_rates:
                        fixed_rates.append(r["labels"]["lr"])
            for rate in fixed_rates:
                for c in delayed:
                    ms = means_of(lengths, lambda g: rate if rate in rates[g] else None, c)
                    if len(ms) >= 2:
                        fixed_want.append(f"<tr><td>{html(s)}</td><td>{html(rate)}</td>" + fit_cells(c, ms))
                        diff_fixed.extend(difference_rows(s, c, ms, rate))

    # the gap against model size: per series (the group's title without the size axis), each delayed curve,
    # each size smallest first (parameters from summary.json; an unknown size after the known, grid order),
    # the paired gap at the size's pick and its Welch change from the size before
    size_ax = "size" if "size" in axes else "model" if "model" in axes else None
    size_want = []
    if size_ax in others:
        def group_params(g):
            for rate in rates[g]:
                first = next((r for r in cell(g, rate, sync) if r["status"] == "done"), None)
                if first and first["params"] is not None:
                    return first["params"]
            return None
        labels_of = {g: next(r["labels"] for r in runs if title(r["labels"]) == g) for g in groups}
        size_of = {g: group_params(g) for g in groups}
        size_series = []
        for g in groups:
            if title(labels_of[g], size_ax) not in size_series:
                size_series.append(title(labels_of[g], size_ax))
        for s in size_series:
            members = sorted((g for g in groups if title(labels_of[g], size_ax) == s),
                             key=lambda g: (size_of[g] is None, size_of[g] or 0))
            for c in delayed:
                prev = None
                for k, g in enumerate(members):
                    gp = [x[1] for x in gaps(g, pick[g], c)] if pick[g] else []
                    p = size_of[g]
                    row = (f"<tr><td>{html(s)}</td><td>{html(c)}</td><td>{html(labels_of[g][size_ax])}</td>"
                           f"<td>{'unknown' if p is None else '%.0f' % p}</td>"
                           f"<td>{pick[g] if pick[g] else 'no pick: ' + why[g]}</td>"
                           f"<td>{gap_text(gaps(g, pick[g], c)) if pick[g] else '&mdash;'}</td><td>")
                    if k == 0 or prev is None or len(prev[0]) < 2 or len(gp) < 2 or p is None or prev[1] is None:
                        row += "&mdash;"
                    else:
                        d, half, _ = welch(prev[0], gp)
                        v = "smaller for the larger model" if d + half < 0 else \
                            "larger for the larger model" if d - half > 0 else "not resolved"
                        row += "%+.4f [%+.4f, %+.4f] %s" % (d, d - half, d + half, v)
                    size_want.append(row + "</td></tr>")
                    prev = (gp, p)

    cav, miscounts = (caveats(fits) if fits else []), []
    diff_want += diff_fixed
    want += extrap_want + cav + fixed_want + diff_want
    if "steps" in axes:  # exactly these rows and caveats: nothing more in the table or the list
        table = text[text.find('<table id="extrapolation-table">'):]
        table = table[:table.find("</table>")]
        fixed = text[text.find('<table id="fixed-rate-table">'):] if '<table id="fixed-rate-table">' in text else ""
        fixed = fixed[:fixed.find("</table>")]
        if fixed.count("<tr>") - 1 != len(fixed_want):
            miscounts.append(f"{page}: {len(fixed_want)} fixed-rate rows expected, the page has {fixed.count('<tr>') - 1}")
        diffs = text[text.find('<table id="difference-table">'):] if '<table id="difference-table">' in text else ""
        diffs = diffs[:diffs.find("</table>")]
        if diffs.count("<tr>") - 1 != len(diff_want):
            miscounts.append(f"{page}: {len(diff_want)} difference rows expected, the page has {diffs.count('<tr>') - 1}")
        ul = text[text.find('<ul id="extrapolation-caveats">'):] if '<ul id="extrapolation-caveats">' in text else ""
        ul = ul[:ul.find("</ul>")]
        for what, got, n in (("extrapolation rows", table.count("<tr>") - 1, len(extrap_want)),
                             ("caveats", ul.count("<li>"), len(cav))):
            if got != n:
                miscounts.append(f"{page}: {n} {what} expected, the page has {got}")

    if size_want:  # exactly these rows in the size table
        table = text[text.find('<table id="size-table">'):]
        table = table[:table.find("</table>")]
        if table.count("<tr>") - 1 != len(size_want):
            miscounts.append(f"{page}: {len(size_want)} size rows expected, the page has {table.count('<tr>') - 1}")
    want += size_want
    missing = [w for w in want if w not in text]
    for w in missing:
        print(f"{page}: expected the row\n  {w}")
    for m in miscounts:
        print(m)
    print(f"scaling_report: {len(want) - len(missing)} of {len(want)} rows as computed here")
    return 1 if missing or miscounts else 0


if __name__ == "__main__":
    d = sys.argv[1]
    sys.exit(main(d, sys.argv[2] if len(sys.argv) > 2 else os.path.join(d, "report.html")))
