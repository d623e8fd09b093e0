#!/usr/bin/env python3
"""An independent reading of a sweep folder's tuning and scaling numbers (docs/experiments.md,
"Tuned rates and scaling"), checked against the page `nobubble report` wrote: every row of the
tuning, scaling, slope, extrapolation and fixed-rate tables and every caveat under the extrapolation is computed here from
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
        runs.append(run)
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
        out += "<td>%.4f (%d runs)</td>" % (floor, len(sync_vals))
        if f["b"] >= 0:
            return out + "<td>never (slope &ge; 0)</td></tr>"
        if floor <= 0:
            return out + "<td>never (noise floor 0)</td></tr>"
        L = math.log(floor)
        cross = math.exp((L - f["a"]) / f["b"])
        # the band holds L where (my + b u - L)^2 <= t^2 s^2 (1/n + u^2 / Sxx), u = x - mean x
        g2 = f["t"] ** 2 * f["s2"]
        A, B = f["b"] ** 2 - g2 / f["sxx"], 2 * f["b"] * (f["my"] - L)
        C = (f["my"] - L) ** 2 - g2 / f["n"]
        if A <= 0:
            return out + f"<td>{tok_num(cross)} (no interval: the slope's interval reaches 0)</td></tr>"
        root = math.sqrt(max(B * B - 4 * A * C, 0))  # B^2/4 - AC = (t^2 s^2)(d^2/Sxx + A/n) >= 0 when A > 0
        r = sorted(((-B - root) / (2 * A), (-B + root) / (2 * A)))
        lo, hi = (math.exp(f["mx"] + u) for u in r)
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
            text = ", ".join(f"{g_steps[g]} steps at lr {pick[g]}" + (" (grid edge)" if is_edge(g) else "") for g in used)
            text += left_text(left)
            out.append(f"<li>{html(s)}, {html(c)}: a fit over {len(used)} lengths spanning a factor {t2 / t1:.3g} of tokens "
                       f"({t1:.0f} to {t2:.0f}, {span:.2f} decades): {html(text)}; 100 T lies 2 decades beyond the longest, "
                       f"{2 / span:.1f} times that span.</li>")
            t_max = max(t_max, t2)
            sizes.append(fit_params(used))
        if any(shared for _, _, _, shared, _ in fits):
            out.append("<li>Each fit's points are (length, seed) pairs treated as independent, although a seed keeps its "
                       "initialization and data order at every length: the intervals may be too narrow.</li>")
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

    def left_out(g, rate, gp):
        """the text naming a length left out of a fit (a gap <= 0 and the paired gap within noise), else None"""
        m, sd, half = stats([x[1] for x in gp])
        if half is None or not any(x[1] <= 0 for x in gp) or not (m - half <= 0 <= m + half):
            return None
        return "%s steps at lr %s (%+.4f [%+.4f, %+.4f])" % (g_steps[g], rate, m, m - half, m + half)

    def left_text(left):
        return "; left out, within noise: " + ", ".join(html(x) for x in left) if left else ""

    def slope_cells(pts, first_bad, left, n_len):
        """the fixed-rate table's fit cells (the slope table's, without its tuned-length reason)"""
        if first_bad:
            return f"<td colspan=\"2\">{first_bad}</td></tr>"
        if n_len < 2:
            return f"<td colspan=\"2\">not fitted: gaps at {n_len} length{'' if n_len == 1 else 's'}, 2 needed{left_text(left)}</td></tr>"
        n = len(pts)
        mx, my = sum(p[0] for p in pts) / n, sum(p[1] for p in pts) / n
        sxx = sum((p[0] - mx) ** 2 for p in pts)
        b = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx
        if n < 3:
            return "<td>%+.3f</td><td>n/a: %d points, no interval%s</td></tr>" % (b, n, left_text(left))
        a = my - b * mx
        s2 = sum((p[1] - a - b * p[0]) ** 2 for p in pts) / (n - 2)
        half = T975[n - 2] * math.sqrt(s2 / sxx)
        verdict = "shrinks" if b + half < 0 else "grows" if b - half > 0 else "no trend resolved"
        return "<td>%+.3f</td><td>[%+.3f, %+.3f] %s%s</td></tr>" % (b, b - half, b + half, verdict, left_text(left))

    extrap_want, fixed_want, fits, g_steps = [], [], [], {}
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
                pts, first_bad, used, seed_lengths, left = [], None, [], {}, []
                for g in lengths:
                    if pick[g] is None:
                        continue
                    gp = gaps(g, pick[g], c)
                    why_left = left_out(g, pick[g], gp) if gp else None
                    if why_left:
                        left.append(why_left)
                        continue
                    if gp:
                        used.append(g)
                    for seed, gap, tok in gp:
                        if gap <= 0 and first_bad is None:
                            first_bad = "not fitted: the gap is %+.4f &le; 0 at steps=%s, seed %s (no logarithm)" % (
                                gap, steps_of[g], seed)
                        pts.append((math.log(tok), math.log(gap) if gap > 0 else None))
                        seed_lengths[seed] = seed_lengths.get(seed, 0) + 1
                n_len = len(used)
                row = f"<tr><td>{html(s)}</td><td>{html(c)}</td><td>{n_len}</td><td>{len(pts)}</td>"
                erow = f"<tr><td>{html(s)}</td><td>{html(c)}</td>"
                if first_bad or n_len < 2:
                    reason = first_bad or "not fitted: gaps at %d tuned length%s, 2 needed%s" % (n_len, "" if n_len == 1 else "s",
                                                                                                   left_text(left))
                    want.append(row + f"<td colspan=\"2\">{reason}</td></tr>")
                    extrap_want.append(erow + f"<td colspan=\"7\">{reason}</td></tr>")
                    continue
                n = len(pts)
                mx, my = sum(p[0] for p in pts) / n, sum(p[1] for p in pts) / n
                sxx = sum((p[0] - mx) ** 2 for p in pts)
                b = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx
                if n < 3:
                    want.append(row + "<td>%+.3f</td><td>n/a: %d points, no interval%s</td></tr>" % (b, n, left_text(left)))
                    extrap_want.append(erow + "<td colspan=\"7\">not extrapolated: %d points, no interval (3 needed)</td></tr>" % n)
                    continue
                a = my - b * mx
                s2 = sum((p[1] - a - b * p[0]) ** 2 for p in pts) / (n - 2)
                half = T975[n - 2] * math.sqrt(s2 / sxx)
                verdict = "shrinks" if b + half < 0 else "grows" if b - half > 0 else "no trend resolved"
                want.append(row + "<td>%+.3f</td><td>[%+.3f, %+.3f] %s%s</td></tr>" % (b, b - half, b + half, verdict,
                                                                                         left_text(left)))
                fit = {"n": n, "mx": mx, "my": my, "sxx": sxx, "a": a, "b": b, "s2": s2, "t": T975[n - 2]}
                extrap_want.append(erow + extrap_cells(fit, used, steps_of, pick))
                fits.append((s, c, used, any(v > 1 for v in seed_lengths.values()), left))
            # the gap at one rate across lengths: every rate run at 2 lengths or more, each delayed curve
            fixed_rates = []
            for g in lengths:
                for r in runs:
                    if title(r["labels"]) == g and r["labels"]["lr"] not in fixed_rates:
                        fixed_rates.append(r["labels"]["lr"])
            for rate in fixed_rates:
                for c in delayed:
                    pts, first_bad, n_len, left = [], None, 0, []
                    for g in lengths:
                        gp = gaps(g, rate, c)
                        why_left = left_out(g, rate, gp) if gp else None
                        if why_left:
                            left.append(why_left)
                            continue
                        n_len += 1 if gp else 0
                        for seed, gap, tok in gp:
                            if gap <= 0 and first_bad is None:
                                first_bad = "not fitted: the gap is %+.4f &le; 0 at steps=%s, seed %s (no logarithm)" % (
                                    gap, steps_of[g], seed)
                            pts.append((math.log(tok), math.log(gap) if gap > 0 else None))
                    if n_len + len(left) < 2:
                        continue
                    row = f"<tr><td>{html(s)}</td><td>{html(rate)}</td><td>{html(c)}</td><td>{n_len}</td><td>{len(pts)}</td>"
                    fixed_want.append(row + slope_cells(pts, first_bad, left, n_len))

    cav, miscounts = (caveats(fits) if fits else []), []
    want += extrap_want + cav + fixed_want
    if "steps" in axes:  # exactly these rows and caveats: nothing more in the table or the list
        table = text[text.find('<table id="extrapolation-table">'):]
        table = table[:table.find("</table>")]
        fixed = text[text.find('<table id="fixed-rate-table">'):] if '<table id="fixed-rate-table">' in text else ""
        fixed = fixed[:fixed.find("</table>")]
        if fixed.count("<tr>") - 1 != len(fixed_want):
            miscounts.append(f"{page}: {len(fixed_want)} fixed-rate rows expected, the page has {fixed.count('<tr>') - 1}")
        ul = text[text.find('<ul id="extrapolation-caveats">'):] if '<ul id="extrapolation-caveats">' in text else ""
        ul = ul[:ul.find("</ul>")]
        for what, got, n in (("extrapolation rows", table.count("<tr>") - 1, len(extrap_want)),
                             ("caveats", ul.count("<li>"), len(cav))):
            if got != n:
                miscounts.append(f"{page}: {n} {what} expected, the page has {got}")

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
