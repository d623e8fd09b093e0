#!/usr/bin/python3
"""Independent float64 references for nobubble's optimizers (docs/rules.md,
sections 1 and 2), written as NBFX0001 fixtures that tests/test_optim_reference.c compares the
C optimizers against.

Run from the repository root (needs numpy and torch, e.g. Debian's python3-torch):
    /usr/bin/python3 tools/reference/optim_reference.py [--out-dir tests/fixtures] [--f32-check]

Writes (deterministic, fixed seed):
  tests/fixtures/optim_inputs.nbfx     the shared inputs: tensors, initial weights, gradients,
                                        learning rates (20 steps)
  tests/fixtures/optim_<name>.nbfx     per optimizer: hyperparameters and the 20-step trajectory
  for <name> in sgd, sgd_nesterov, adamw, muon, lion, adan, mars, soap, normuon.

The inputs live in one shared file because one optimizer's full trajectory of gradients, steps
and weights in float64 would be ~220 KB; this way each file stays under 100 KB.

--f32-check re-runs every reference in float32 (numpy / torch float32, LAPACK s* routines) and
prints, per optimizer, how far that float32 run is from the float64 one in the C test's metric;
this is the expected size of fp32 rounding effects, which the C test's tolerances are set from.

Format: NBFX0001 (see tools/reference/llama_reference.py), entries f64 or i32.

optim_inputs.nbfx:
  "tensors"  i32 [5, 3]: rows, cols (0 for 1-D), group (0 matrix, 1 embed, 2 gain) per tensor:
             0: [8, 8] matrix, 1: [8, 20] matrix, 2: [20, 8] matrix, 3: [10, 6] embed, 4: [12] gain
  "w0:i"     f64 [numel]       initial weights, N(0, 1)
  "g:i"      f64 [20, numel]   gradients, N(0, 1) x a per-step scale (log-uniform in [0.03, 3]),
                               ~10% exact zeros
  "lr"       f64 [20]          per-step learning rate (linear warmup over 4 steps to 0.03, then
                               cosine to 0.003)
  "aux_lr"   f64 [20]          the auxiliary learning rate (same shape, peak 0.012)
  Every input value (weights, gradients, learning rates, hyperparameters) is a float32 value
  stored in float64, so that the C side (float32) receives exactly the reference's inputs.
optim_<name>.nbfx:
  "tensors"  i32 [5, 3]        as above (a copy)
  "hp:<h>"   f64 [1]           every hyperparameter the optimizer uses (beta1, beta2, beta3, eps,
                               weight_decay, momentum, nesterov, ns_steps, gamma, precond_every,
                               max_precond_dim, aux_beta1, aux_beta2); the others are unused
  "d:i"      f64 [20, numel]   the step d_t returned at step t (weight decay included)
  "w20:i"    f64 [numel]       the weights after the 20th step; the weights after step t are
                               w_{t+1} = w0 - sum_{s <= t} d_s (for AdamW, torch's own parameter
                               after each step, and d_t = w_t - w_{t+1})

Rules (float64; where the sheet is silent, the project's conventions):
  groups     Muon, NorMuon, SOAP, MARS: their rule on matrix tensors; embed and gain use AdamW at aux_lr with
             (aux_beta1, aux_beta2), the optimizer's eps and weight decay and its own
             bias-correction count. AdamW, SGD, Lion, Adan: every group at lr. Weight decay never
             applies to gains.
  AdamW      torch.optim.AdamW itself (float64 parameters; gains in a group with weight decay 0;
             each group's lr set before every step).
  SGD, Muon, Lion, Adan, MARS: direct transcriptions of the sheet (numpy). sign(0) = 0 (Lion).
  Muon       Newton-Schulz on the wide orientation, X = G / (||G||_F + 1e-7), ns_steps iterations
             of (3.4445, -4.7750, 2.0315); d = lr sqrt(max(1, rows/cols)) X + lr wd w.
  NorMuon    Muon's m, G and X (O below, in the weight's own orientation, rows = output neurons);
             r_i = mean_j O_ij^2 per row; s = b2 s + (1-b2) r (from 0, no bias correction);
             O' = O / (sqrt(s_i) + 1e-10) row by row; O'' = O' ||O||_F / (||O'||_F + 1e-10);
             d = lr sqrt(max(1, rows/cols)) O'' + lr wd w. The [8,20] (wide) and [20,8] (tall)
             matrices exercise the orientation and the shape scale.
  Adan       decoupled decay; diff = 0 at t = 0.
  MARS       g_prev = g at t = 0; c clipped to unit 2-norm per tensor when ||c||_2 > 1.
  SOAP       a side larger than max_precond_dim (10 here) gets the identity and keeps no L/R, so
             the [8,8] matrix is preconditioned on both sides, [8,20] on the left, [20,8] on the
             right. t = 0: L = (1-b2) G G^T, R = (1-b2) G^T G, QL/QR = eigenvectors (eigh, ascending
             eigenvalues, each column's largest-magnitude entry made positive); d = 0 (no decay
             either). t >= 1: G' = QL^T G QR; k = Adam updates so far + 1; m, v AdamW moments of G'
             (kept in their basis, never re-projected); N = (m/(1-b1^k)) / (sqrt(v/(1-b2^k)) + eps);
             d = lr QL N QR^T + lr wd w; then L, R accumulate G G^T, G^T G and, if
             t % precond_every == 0 (5 here), QL = qr(L QL), QR = qr(R QR) with diag(R) > 0.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbfx import Writer  # noqa: E402

STEPS = 20
# rows, cols (0 for 1-D), group (0 matrix, 1 embed, 2 gain)
TENSORS = [(8, 8, 0), (8, 20, 0), (20, 8, 0), (10, 6, 1), (12, 0, 2)]
SEED = 88  # chosen (see README) so that no Lion sign, SOAP first-step sign or MARS clip is near a tie
NS_COEFFS = (3.4445, -4.7750, 2.0315)
NS_EPS = 1e-7
NORMUON_EPS = 1e-10


def f32(x):
    """Rounds to float32 values, kept in float64."""
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)


def numel(t):
    return t[0] * (t[1] if t[1] else 1)


def shape(t):
    return (t[0], t[1]) if t[1] else (t[0],)


# ---------------------------------------------------------------- inputs
def make_inputs():
    rng = np.random.default_rng(SEED)
    w0 = [f32(rng.standard_normal(numel(t))) for t in TENSORS]
    scales = np.exp(rng.uniform(math.log(0.03), math.log(3.0), STEPS))
    g = []
    for t in TENSORS:
        n = numel(t)
        a = rng.standard_normal((STEPS, n)) * scales[:, None]
        a[rng.random((STEPS, n)) < 0.1] = 0.0
        g.append(f32(a))
    lr = np.empty(STEPS)
    aux = np.empty(STEPS)
    warm = 4
    for s in range(STEPS):
        if s < warm:
            f = (s + 1) / warm
        else:
            p = (s - warm) / (STEPS - 1 - warm)
            f = 0.1 + 0.45 * (1 + math.cos(math.pi * p))
        lr[s] = 0.03 * f
        aux[s] = 0.012 * f
    return w0, g, f32(lr), f32(aux)


# ---------------------------------------------------------------- hyperparameters
# The sheet's defaults, except weight_decay 0.1 (so decay is tested) and, for SOAP,
# precond_every 5 and max_precond_dim 10 (refreshes within 20 steps; one- and two-sided).
BASE = dict(eps=1e-8, weight_decay=0.1)
AUX = dict(aux_beta1=0.9, aux_beta2=0.95)
HP = {
    "sgd": dict(momentum=0.9, nesterov=0, weight_decay=0.1),
    "sgd_nesterov": dict(momentum=0.9, nesterov=1, weight_decay=0.1),
    "adamw": dict(beta1=0.9, beta2=0.95, **BASE),
    "muon": dict(momentum=0.95, nesterov=1, ns_steps=5, **BASE, **AUX),
    "normuon": dict(momentum=0.95, nesterov=1, ns_steps=5, beta2=0.95, **BASE, **AUX),
    "lion": dict(beta1=0.9, beta2=0.99, weight_decay=0.1),
    "adan": dict(beta1=0.98, beta2=0.92, beta3=0.99, **BASE),
    "mars": dict(beta1=0.95, beta2=0.99, gamma=0.025, **BASE, **AUX),
    "soap": dict(beta1=0.95, beta2=0.95, precond_every=5, max_precond_dim=10, **BASE, **AUX),
}
INT_HP = ("nesterov", "ns_steps", "precond_every", "max_precond_dim")


def hp_values(name):
    """Float hyperparameters rounded to float32 (what the C side holds)."""
    return {k: (int(v) if k in INT_HP else float(f32(v))) for k, v in HP[name].items()}


# ---------------------------------------------------------------- rules
class Stats:
    """Margins of the discontinuities the fixtures pass near (reported, and asserted)."""

    def __init__(self):
        self.lion_min_c = math.inf      # smallest nonzero |c| / max |c| (sign flips)
        self.lion_zero_c = 0            # entries with c exactly 0 (sign(0) = 0)
        self.mars_clip = [0, 0]         # steps clipped / not clipped
        self.mars_margin = math.inf     # min | ||c|| - 1 |
        self.soap_min_gp = math.inf     # smallest |G'| / max |G'| at the first Adam step


class Adam:
    def __init__(self, n, dt):
        self.m = np.zeros(n, dt)
        self.v = np.zeros(n, dt)
        self.k = 0

    def step(self, g, w, lr, b1, b2, eps, wd, dt):
        c = lambda x: dt(x)
        self.k += 1
        self.m = c(b1) * self.m + c(1 - b1) * g
        self.v = c(b2) * self.v + c(1 - b2) * g * g
        mh = self.m / c(1 - b1 ** self.k)
        vh = self.v / c(1 - b2 ** self.k)
        return c(lr) * mh / (np.sqrt(vh) + c(eps)) + c(lr * wd) * w


def newton_schulz(G, steps, dt):
    a, b, c = (dt(x) for x in NS_COEFFS)
    X = G.T if G.shape[0] > G.shape[1] else G
    X = X / (np.sqrt(np.sum(X * X)) + dt(NS_EPS))
    for _ in range(steps):
        A = X @ X.T
        B = b * A + c * (A @ A)
        X = a * X + B @ X
    return X.T if G.shape[0] > G.shape[1] else X


def eig_basis(L):
    _, Q = np.linalg.eigh(L)
    idx = np.argmax(np.abs(Q), axis=0)
    s = np.sign(Q[idx, np.arange(Q.shape[1])])
    return Q * s


def qr_pos(A):
    Q, R = np.linalg.qr(A)
    s = np.sign(np.diag(R))
    s[s == 0] = 1
    return Q * s


def normuon_rows(O, st, b2, dt):
    """NorMuon's per-row normalization of O (rows x cols); s (one per row) lives in st."""
    c = lambda x: dt(x)
    st.setdefault("s", np.zeros(O.shape[0], dt))
    r = np.mean(O * O, axis=1)
    st["s"] = c(b2) * st["s"] + c(1 - b2) * r
    Op = O / (np.sqrt(st["s"]) + c(NORMUON_EPS))[:, None]
    return Op * (np.linalg.norm(O) / (np.linalg.norm(Op) + c(NORMUON_EPS)))


class Soap:
    def __init__(self, rows, cols, maxdim, dt):
        self.left = rows <= maxdim
        self.right = cols <= maxdim
        self.L = np.zeros((rows, rows), dt) if self.left else None
        self.R = np.zeros((cols, cols), dt) if self.right else None
        self.QL = self.QR = None
        self.adam = Adam((rows, cols), dt)

    def step(self, G, W, t, lr, h, dt, stats):
        c = lambda x: dt(x)
        b1, b2, eps, wd = h["beta1"], h["beta2"], h["eps"], h["weight_decay"]
        if t == 0:
            if self.left:
                self.L = c(1 - b2) * (G @ G.T)
                self.QL = eig_basis(self.L)
            if self.right:
                self.R = c(1 - b2) * (G.T @ G)
                self.QR = eig_basis(self.R)
            return np.zeros_like(G)
        Gp = G
        if self.left:
            Gp = self.QL.T @ Gp
        if self.right:
            Gp = Gp @ self.QR
        if self.adam.k == 0 and stats is not None:
            stats.soap_min_gp = min(stats.soap_min_gp, np.min(np.abs(Gp)) / np.max(np.abs(Gp)))
        N = self.adam.step(Gp, np.zeros_like(Gp), 1.0, b1, b2, eps, 0.0, dt)  # the normalized step
        D = N
        if self.left:
            D = self.QL @ D
        if self.right:
            D = D @ self.QR.T
        d = c(lr) * D + c(lr * wd) * W
        if self.left:
            self.L = c(b2) * self.L + c(1 - b2) * (G @ G.T)
        if self.right:
            self.R = c(b2) * self.R + c(1 - b2) * (G.T @ G)
        if t % h["precond_every"] == 0:
            if self.left:
                self.QL = qr_pos(self.L @ self.QL)
            if self.right:
                self.QR = qr_pos(self.R @ self.QR)
        return d


def run_numpy(name, w0, g, lr, aux_lr, dt, stats=None):
    """Returns d[i] arrays [STEPS, numel] and w[i] arrays [STEPS, numel] (w after each step)."""
    h = hp_values(name)
    c = lambda x: dt(x)
    kind = "sgd" if name.startswith("sgd") else name
    ws = [w.astype(dt).copy() for w in w0]
    D = [np.zeros((STEPS, numel(t))) for t in TENSORS]
    Wt = [np.zeros((STEPS, numel(t))) for t in TENSORS]
    state = [dict() for _ in TENSORS]
    for s in range(STEPS):
        for i, t in enumerate(TENSORS):
            gi = g[i][s].astype(dt)
            w = ws[i]
            st = state[i]
            wd = 0.0 if t[2] == 2 else h.get("weight_decay", 0.0)
            matrix = t[2] == 0
            if kind in ("muon", "normuon", "mars", "soap") and not matrix:
                if "aux" not in st:
                    st["aux"] = Adam(numel(t), dt)
                d = st["aux"].step(gi, w, aux_lr[s], h["aux_beta1"], h["aux_beta2"], h["eps"], wd, dt)
            elif kind == "sgd":
                mu = h["momentum"]
                st.setdefault("m", np.zeros_like(gi))
                st["m"] = c(mu) * st["m"] + gi
                u = gi + c(mu) * st["m"] if h["nesterov"] else st["m"]
                d = c(lr[s]) * u + c(lr[s] * wd) * w
            elif kind in ("muon", "normuon"):
                mu = h["momentum"]
                st.setdefault("m", np.zeros_like(gi))
                st["m"] = c(mu) * st["m"] + c(1 - mu) * gi
                G = c(1 - mu) * gi + c(mu) * st["m"] if h["nesterov"] else st["m"]
                X = newton_schulz(G.reshape(t[0], t[1]), h["ns_steps"], dt)
                if kind == "normuon":
                    X = normuon_rows(X, st, h["beta2"], dt)
                X = X.reshape(-1)
                d = c(lr[s] * math.sqrt(max(1.0, t[0] / t[1]))) * X + c(lr[s] * wd) * w
            elif kind == "lion":
                b1, b2 = h["beta1"], h["beta2"]
                st.setdefault("m", np.zeros_like(gi))
                cc = c(b1) * st["m"] + c(1 - b1) * gi
                if stats is not None:
                    nz = np.abs(cc[cc != 0])
                    stats.lion_zero_c += int(np.sum(cc == 0))
                    if nz.size:
                        stats.lion_min_c = min(stats.lion_min_c, nz.min() / nz.max())
                d = c(lr[s]) * np.sign(cc) + c(lr[s] * wd) * w
                st["m"] = c(b2) * st["m"] + c(1 - b2) * gi
            elif kind == "adan":
                b1, b2, b3, eps = h["beta1"], h["beta2"], h["beta3"], h["eps"]
                if s == 0:
                    st.update(m=np.zeros_like(gi), v=np.zeros_like(gi), n=np.zeros_like(gi), gp=gi)
                diff = gi - st["gp"]
                st["m"] = c(b1) * st["m"] + c(1 - b1) * gi
                st["v"] = c(b2) * st["v"] + c(1 - b2) * diff
                u = gi + c(b2) * diff
                st["n"] = c(b3) * st["n"] + c(1 - b3) * u * u
                den = np.sqrt(st["n"] / c(1 - b3 ** (s + 1))) + c(eps)
                d = (c(lr[s]) * (st["m"] / c(1 - b1 ** (s + 1))) / den
                     + c(lr[s] * b2) * (st["v"] / c(1 - b2 ** (s + 1))) / den + c(lr[s] * wd) * w)
                st["gp"] = gi
            elif kind == "mars":
                b1, b2, gamma = h["beta1"], h["beta2"], h["gamma"]
                if s == 0:
                    st.update(gp=gi, adam=Adam(numel(t), dt))
                cc = gi + c(gamma * (b1 / (1 - b1))) * (gi - st["gp"])
                nrm = np.sqrt(np.sum(cc * cc))
                if stats is not None:
                    stats.mars_clip[0 if nrm > 1 else 1] += 1
                    stats.mars_margin = min(stats.mars_margin, abs(float(nrm) - 1))
                if nrm > 1:
                    cc = cc / nrm
                d = st["adam"].step(cc, w, lr[s], b1, b2, h["eps"], wd, dt)
                st["gp"] = gi
            elif kind == "soap":
                if s == 0:
                    st["soap"] = Soap(t[0], t[1], h["max_precond_dim"], dt)
                d = st["soap"].step(gi.reshape(t[0], t[1]), w.reshape(t[0], t[1]), s, lr[s], h, dt,
                                    stats).reshape(-1)
            elif kind == "adamw":
                st.setdefault("adam", Adam(numel(t), dt))
                d = st["adam"].step(gi, w, lr[s], h["beta1"], h["beta2"], h["eps"], wd, dt)
            else:
                raise ValueError(name)
            d = d.astype(dt)
            ws[i] = w - d
            D[i][s] = d
            Wt[i][s] = ws[i]
    return D, Wt


def run_torch_adamw(w0, g, lr, dtype):
    """AdamW through torch.optim.AdamW itself; d_t = w_t - w_{t+1}."""
    h = hp_values("adamw")
    params = [torch.tensor(w, dtype=dtype) for w in w0]
    for p in params:
        p.requires_grad_(True)
    decay = [p for p, t in zip(params, TENSORS) if t[2] != 2]
    nodecay = [p for p, t in zip(params, TENSORS) if t[2] == 2]
    opt = torch.optim.AdamW([dict(params=decay, weight_decay=h["weight_decay"]),
                             dict(params=nodecay, weight_decay=0.0)],
                            lr=float(lr[0]), betas=(h["beta1"], h["beta2"]), eps=h["eps"])
    D = [np.zeros((STEPS, numel(t))) for t in TENSORS]
    Wt = [np.zeros((STEPS, numel(t))) for t in TENSORS]
    for s in range(STEPS):
        for grp in opt.param_groups:
            grp["lr"] = float(lr[s])
        before = [p.detach().clone() for p in params]
        for i, p in enumerate(params):
            p.grad = torch.tensor(g[i][s], dtype=dtype)
        opt.step()
        for i, p in enumerate(params):
            D[i][s] = (before[i] - p.detach()).double().numpy()
            Wt[i][s] = p.detach().double().numpy()
    return D, Wt


# ---------------------------------------------------------------- output
NAMES = ["sgd", "sgd_nesterov", "adamw", "muon", "lion", "adan", "mars", "soap", "normuon"]


def run(name, w0, g, lr, aux, dt, stats=None):
    if name == "adamw":
        return run_torch_adamw(w0, g, lr, torch.float64 if dt == np.float64 else torch.float32)
    return run_numpy(name, w0, g, lr, aux, dt, stats)


def metric(a, b):
    """The C test's metric: max |a - b| / max |b| (floor 1e-30)."""
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures"))
    ap.add_argument("--f32-check", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    w0, g, lr, aux = make_inputs()
    tens = np.array(TENSORS, dtype=np.int32)

    w = Writer()
    w.add("tensors", tens)
    for i in range(len(TENSORS)):
        w.add("w0:%d" % i, w0[i])
    for i in range(len(TENSORS)):
        w.add("g:%d" % i, g[i])
    w.add("lr", lr)
    w.add("aux_lr", aux)
    path = os.path.join(args.out_dir, "optim_inputs.nbfx")
    w.write(path)
    print("%s: %d bytes, %.1f%% zero gradients" % (path, os.path.getsize(path),
                                                   100 * np.mean(np.concatenate([x.ravel() for x in g]) == 0)))

    for name in NAMES:
        stats = Stats()
        D, Wt = run(name, w0, g, lr, aux, np.float64, stats)
        if name == "adamw":  # cross-check torch against the numpy transcription
            D2, W2 = run_numpy(name, w0, g, lr, aux, np.float64)
            err = max(metric(D[i][s], D2[i][s]) for i in range(len(TENSORS)) for s in range(STEPS))
            print("adamw: torch vs numpy transcription, worst step rel err %.2e" % err)
            assert err < 1e-10
        else:  # the stored w_{t+1} is w0 - cumsum(d)
            for i in range(len(TENSORS)):
                assert np.max(np.abs(Wt[i] - (w0[i] - np.cumsum(D[i], axis=0)))) < 1e-12
        out = Writer()
        out.add("tensors", tens)
        for k, v in hp_values(name).items():
            out.add("hp:" + k, np.array([float(v)]))
        for i in range(len(TENSORS)):
            out.add("d:%d" % i, D[i])
        for i in range(len(TENSORS)):
            out.add("w20:%d" % i, Wt[i][STEPS - 1])
        path = os.path.join(args.out_dir, "optim_%s.nbfx" % name)
        out.write(path)
        line = "%s: %d bytes" % (path, os.path.getsize(path))
        if name == "lion":
            line += "; exact-zero c entries %d, min nonzero |c|/max|c| %.2e" % (stats.lion_zero_c, stats.lion_min_c)
            assert stats.lion_zero_c > 0 and stats.lion_min_c > 2e-5
        if name == "mars":
            line += "; clipped %d / unclipped %d (tensor-steps), min | ||c|| - 1 | %.3f" % (
                stats.mars_clip[0], stats.mars_clip[1], stats.mars_margin)
            assert stats.mars_clip[0] > 0 and stats.mars_clip[1] > 0 and stats.mars_margin > 1e-2
        if name == "soap":
            line += "; first Adam step min |G'|/max |G'| %.2e" % stats.soap_min_gp
            assert stats.soap_min_gp > 1e-3
        print(line)

        if args.f32_check:
            D32, W32 = run_numpy(name, w0, g, lr, aux, np.float32)
            ed = [max(metric(D32[i][s], D[i][s]) for s in range(STEPS)) for i in range(len(TENSORS))]
            ew = [max(metric(W32[i][s], Wt[i][s]) for s in range(STEPS)) for i in range(len(TENSORS))]
            print("  float32 run vs float64: d " + " ".join("%.1e" % e for e in ed)
                  + " | w " + " ".join("%.1e" % e for e in ew))


if __name__ == "__main__":
    main()
