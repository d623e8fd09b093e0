#!/usr/bin/env python3
"""PyTorch 2.x CPU training-step benchmark beside `nobubble bench` (bench/vs_torch.sh).

The same Llama model as nobubble (tied head, RMSNorm eps 1e-5, RoPE with rotate_half and theta
10000, grouped-query attention where q head h reads kv head h // (H / Hkv), SwiGLU; the presets of
src/model/config.c), the same step shape (B sequences of T tokens; a T above the preset's context
raises it, as nobubble bench does), the same FLOP count, and four modes:

  eager-fp32      eager float32
  compile-fp32    torch.compile(model), float32
  eager-bf16      torch.autocast("cpu", dtype=torch.bfloat16) around the forward
  compile-bf16    torch.compile(model) under the same autocast

Optimizers: adamw (torch.optim.AdamW, fused where this torch has it on CPU, else foreach) and muon
(torch.optim.Muon where this torch has it, else the rule of docs/rules.md
written below; on the block matrices only, AdamW at lr 1e-3 on the embedding and the norm gains, as
nobubble does). A step is forward, backward, optimizer step and zero_grad; warm-up steps (which
include compilation) are left out of the median and their excess time is reported as compile_s.

Activation bytes per token: the bytes of the distinct storages the forward saves for backward
(torch.autograd.graph.saved_tensors_hooks), at batch 2 minus batch 1, over T: the weights and
their autocast copies cancel. Measured in the eager modes only (null for the compiled ones, whose
saved tensors the hooks do not see as eager code does).

    python tools/bench/torch_bench.py --models tiny --threads 1 --seq 512 --batch 8 --json

--device cuda runs the same on an NVIDIA GPU (autocast on "cuda", each timing point after
torch.cuda.synchronize(); activation bytes not measured there): what tools/device/check.sh compares
nobubble's --device cuda with.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# name: (vocab, d, layers, heads, kv_heads, ffn, context), as src/model/config.c
PRESETS = {
    "tiny": (2048, 128, 4, 4, 4, 384, 128),
    "small": (4096, 256, 6, 4, 4, 768, 256),
    "medium": (8192, 512, 8, 8, 4, 1536, 256),
    "smollm-135m": (49152, 576, 30, 9, 3, 1536, 2048),
    "smollm-360m": (49152, 960, 32, 15, 5, 2560, 2048),
}
MODES = ("eager-fp32", "compile-fp32", "eager-bf16", "compile-bf16")
OPTIMIZERS = ("adamw", "muon")
EPS = 1e-5
THETA = 10000.0


def rms_norm(x, weight):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, EPS)
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_tables(T, hd, theta=THETA):
    """cos and sin [T, hd], computed in double and rounded once to float, as nobubble does."""
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().float(), emb.sin().float()


def attend(q, k, v, H, Hkv):
    try:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=Hkv != H)
    except TypeError:  # a torch without enable_gqa: repeat each kv head for its group of q heads
        rep = H // Hkv
        return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                              is_causal=True)


class Block(nn.Module):
    def __init__(self, d, H, Hkv, ffn):
        super().__init__()
        self.H, self.Hkv, self.hd = H, Hkv, d // H
        self.input_layernorm = nn.Parameter(torch.ones(d))
        self.q_proj = nn.Linear(d, H * self.hd, bias=False)
        self.k_proj = nn.Linear(d, Hkv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, Hkv * self.hd, bias=False)
        self.o_proj = nn.Linear(H * self.hd, d, bias=False)
        self.post_attention_layernorm = nn.Parameter(torch.ones(d))
        self.gate_proj = nn.Linear(d, ffn, bias=False)
        self.up_proj = nn.Linear(d, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        H, Hkv, hd = self.H, self.Hkv, self.hd
        h = rms_norm(x, self.input_layernorm)
        q = self.q_proj(h).view(B, T, H, hd).transpose(1, 2)
        k = self.k_proj(h).view(B, T, Hkv, hd).transpose(1, 2)
        v = self.v_proj(h).view(B, T, Hkv, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        o = attend(q, k, v, H, Hkv).transpose(1, 2).reshape(B, T, H * hd)
        x = x + self.o_proj(o)
        h = rms_norm(x, self.post_attention_layernorm)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, V, d, L, H, Hkv, ffn, T, theta=THETA, tied=True):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, d)
        self.lm_head = None if tied else nn.Linear(d, V, bias=False)  # the presets are tied
        self.layers = nn.ModuleList(Block(d, H, Hkv, ffn) for _ in range(L))
        self.norm = nn.Parameter(torch.ones(d))
        cos, sin = rope_tables(T, d // H, theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        T = idx.shape[1]
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.embed_tokens(idx)
        for block in self.layers:
            x = block(x, cos, sin)
        head = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        logits = F.linear(rms_norm(x, self.norm), head)
        # the loss in float32 at least (autocast's bf16 logits widened, as nobubble's head accumulates in fp32)
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def block_matrices(model):
    """The parameters Muon updates, as nobubble: the blocks' 2-D weights (not the embedding)."""
    return [p for name, p in model.named_parameters() if p.dim() == 2 and name.startswith("layers.")]


def adamw(params, lr):
    kw = dict(lr=lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    for how in ("fused", "foreach"):
        try:
            return torch.optim.AdamW(params, **{how: True}, **kw), how
        except (TypeError, RuntimeError, ValueError):
            pass
    return torch.optim.AdamW(params, **kw), "for-loop"


class MuonRule(torch.optim.Optimizer):
    """Muon as docs/rules.md and src/optim/muon.c: m = mu m + (1 - mu) g;
    G = (1 - mu) g + mu m (Nesterov); X = G / (||G||_F + 1e-7) on the wide orientation; 5 times
    A = X X^T, X = a X + (b A + c A A) X; w -= lr sqrt(max(1, rows / cols)) X + lr wd w."""

    def __init__(self, params, lr=0.02, momentum=0.95, weight_decay=0.1, ns_steps=5):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, ns_steps=ns_steps))

    @torch.no_grad()
    def step(self):
        a, b, c = 3.4445, -4.7750, 2.0315
        for group in self.param_groups:
            mu, lr, wd = group["momentum"], group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                m = self.state[p].setdefault("m", torch.zeros_like(p))
                m.lerp_(p.grad, 1 - mu)
                G = p.grad.lerp(m, mu)
                X = G.T if G.shape[0] > G.shape[1] else G
                X = X / (X.norm() + 1e-7)
                for _ in range(group["ns_steps"]):
                    A = X @ X.T
                    X = a * X + (b * A + c * A @ A) @ X
                if G.shape[0] > G.shape[1]:
                    X = X.T
                p.mul_(1 - lr * wd).add_(X, alpha=-lr * math.sqrt(max(1.0, p.shape[0] / p.shape[1])))


class Combined:
    """Several optimizers stepped as one (Muon on the matrices, AdamW on the rest)."""

    def __init__(self, *opts):
        self.opts = opts

    def step(self):
        for o in self.opts:
            o.step()

    def zero_grad(self, set_to_none=True):
        for o in self.opts:
            o.zero_grad(set_to_none=set_to_none)


def make_optimizer(name, model, muon_impl="torch"):
    if name == "adamw":
        opt, how = adamw(model.parameters(), 1e-3)
        return opt, "torch.optim.AdamW (%s)" % how
    mats = block_matrices(model)
    ids = {id(p) for p in mats}
    rest = [p for p in model.parameters() if id(p) not in ids]
    aux, how = adamw(rest, 1e-3)
    if muon_impl == "torch" and hasattr(torch.optim, "Muon"):  # note: it runs Newton-Schulz in bf16
        muon = torch.optim.Muon(mats, lr=0.02, weight_decay=0.1, momentum=0.95, nesterov=True, ns_steps=5)
        label = "torch.optim.Muon"
    else:
        muon, label = MuonRule(mats), "nobubble's Muon rule in torch (tools/bench/torch_bench.py)"
    return Combined(muon, aux), "%s + AdamW (%s) on embedding and gains" % (label, how)


def flops_per_token(V, d, L, H, Hkv, ffn, T):
    hd = d // H
    matrix = L * (d * (H * hd + 2 * Hkv * hd) + H * hd * d + 3 * ffn * d) + V * d
    return 6 * matrix + 6 * L * H * hd * (T + 1)


def saved_bytes(model, idx, tgt, bf16):
    """Bytes of the distinct storages one forward saves for backward."""
    storages, kept = {}, []

    def pack(t):
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        kept.append(t)  # alive until the forward ends, so that no address is reused
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(idx, tgt)
    del loss, kept
    return sum(storages.values())


def activation_bytes_per_token(model, V, T, bf16):
    g = torch.Generator().manual_seed(7)
    sizes = []
    for B in (1, 2):
        idx = torch.randint(0, V, (B, T), generator=g)
        sizes.append(saved_bytes(model, idx, idx, bf16))
    return (sizes[1] - sizes[0]) / T


def bench(name, mode, opt_name, threads, B, T, steps, warmup, muon_impl, seed=1234, device="cpu"):
    V, d, L, H, Hkv, ffn, ctx = PRESETS[name]
    torch.manual_seed(seed)
    model = Llama(V, d, L, H, Hkv, ffn, max(T, ctx)).train().to(device)
    opt, opt_label = make_optimizer(opt_name, model, muon_impl)
    bf16 = mode.endswith("bf16")
    act = activation_bytes_per_token(model, V, T, bf16) if mode.startswith("eager") and device == "cpu" else None
    run = torch.compile(model) if mode.startswith("compile") else model
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, V, (B, T), generator=g).to(device)
    tgt = torch.randint(0, V, (B, T), generator=g).to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def step():
        sync()
        t0 = time.perf_counter()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            loss = run(idx, tgt)
        loss.backward()
        sync()
        t1 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        t2 = time.perf_counter()
        return t2 - t0, t2 - t1, loss.item()

    warm = [step()[0] for _ in range(warmup)]
    timed = [step() for _ in range(steps)]
    med = statistics.median(t[0] for t in timed)
    tps = B * T / med
    return {
        "model": name, "mode": mode, "optimizer": opt_name, "threads": threads, "batch": B, "seq": T,
        "median_step_s": med, "median_optimizer_s": statistics.median(t[1] for t in timed),
        "tokens_per_s": tps, "gflops": tps * flops_per_token(V, d, L, H, Hkv, ffn, T) / 1e9,
        "compile_s": max(0.0, sum(warm) - warmup * med) if mode.startswith("compile") else 0.0,
        "activation_bytes_per_token": act, "loss": timed[-1][2], "optimizer_impl": opt_label,
    }


def split(text, allowed, flag, ap):
    items = [x.strip() for x in text.split(",") if x.strip()]
    for x in items:
        if x not in allowed:
            ap.error("%s: unknown %r (choose from %s)" % (flag, x, ",".join(allowed)))
    if not items:
        ap.error("%s: empty list" % flag)
    return items


def positive(text):
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError("expected an integer >= 1, got %s" % text)
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="tiny")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--optimizers", default="adamw")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--seq", type=positive, default=512)
    ap.add_argument("--batch", type=positive, default=8)
    ap.add_argument("--steps", type=positive, default=5)
    ap.add_argument("--warmup", type=positive, default=2)
    ap.add_argument("--muon-impl", choices=("torch", "rule"), default="torch",
                    help="torch: torch.optim.Muon where present (its Newton-Schulz runs in bf16); rule: "
                         "nobubble's rule written here (Newton-Schulz in fp32, as nobubble)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: this torch sees no GPU")
    models = split(a.models, PRESETS, "--models", ap)
    modes = split(a.modes, MODES, "--modes", ap)
    opts = split(a.optimizers, OPTIMIZERS, "--optimizers", ap)
    try:
        threads = [positive(t) for t in a.threads.split(",")]
    except (ValueError, argparse.ArgumentTypeError):
        ap.error("--threads %r: expected a comma-separated list of positive integers" % a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    info = {"torch": torch.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") else "unknown",
            "torch_onednn_bf16": bool(getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)())}
    log = sys.stderr if a.json else sys.stdout
    print("torch %(torch)s, CPU capability %(cpu_capability)s, oneDNN bf16 usable %(torch_onednn_bf16)s" % info, file=log)
    results = []
    for n in threads:
        torch.set_num_threads(n)
        for m in models:
            for o in opts:
                for mode in modes:
                    try:
                        r = bench(m, mode, o, n, a.batch, a.seq, a.steps, a.warmup, a.muon_impl, device=a.device)
                        r["device"] = a.device
                    except Exception as e:  # a mode that fails (a compiler missing) is reported, not hidden
                        msg = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
                        print("%-12s %-13s %-6s threads %d  FAILED: %s" % (m, mode, o, n, msg), file=log)
                        results.append({"model": m, "mode": mode, "optimizer": o, "threads": n, "error": msg})
                        continue
                    results.append(r)
                    print("%-12s %-13s %-6s threads %d  B %d x T %d  step %.4f s  %.0f tok/s  %.1f GFLOP/s  "
                          "optimizer %.1f%%  compile %.1f s  loss %.4f" % (
                              m, mode, o, n, r["batch"], r["seq"], r["median_step_s"], r["tokens_per_s"],
                              r["gflops"], 100 * r["median_optimizer_s"] / r["median_step_s"], r["compile_s"],
                              r["loss"]), file=log)
                    log.flush()
    if a.json:
        print(json.dumps(dict(info, results=results), indent=1))


if __name__ == "__main__":
    main()
