#!/usr/bin/env python3
"""PyTorch CPU reference benchmark of one full training step.

Measures forward + backward + AdamW step + zero_grad for the same
Llama-style model that nobubble trains, so BENCHMARKS.md can quote
nobubble's tokens/s as a ratio to PyTorch's, measured in the same run.

Run with Debian's PyTorch:
    /usr/bin/python3 tools/bench/torch_step.py --models tiny,small,medium \
        --threads 1,2 --steps 5 --tokens 2048 [--json]
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

# name: (vocab, d, layers, heads, kv_heads, ffn, context)
PRESETS = {
    "tiny": (2048, 128, 4, 4, 4, 384, 128),
    "small": (4096, 256, 6, 4, 4, 768, 256),
    "medium": (8192, 512, 8, 8, 4, 1536, 256),
}

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
ATTN_PATH = ("F.scaled_dot_product_attention(is_causal=True)" if HAS_SDPA
             else "explicit masked softmax")


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_cache(T, hd, theta=10000.0):
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    t = torch.arange(T, dtype=torch.float32)
    freqs = torch.outer(t, inv)                   # [T, hd/2]
    emb = torch.cat((freqs, freqs), dim=-1)       # [T, hd]
    return emb.cos(), emb.sin()


class Block(nn.Module):
    def __init__(self, d, H, Hkv, Fdim):
        super().__init__()
        self.H, self.Hkv, self.hd = H, Hkv, d // H
        hd = self.hd
        self.attn_norm = RMSNorm(d)
        self.q_proj = nn.Linear(d, H * hd, bias=False)
        self.k_proj = nn.Linear(d, Hkv * hd, bias=False)
        self.v_proj = nn.Linear(d, Hkv * hd, bias=False)
        self.o_proj = nn.Linear(H * hd, d, bias=False)
        self.mlp_norm = RMSNorm(d)
        self.gate_proj = nn.Linear(d, Fdim, bias=False)
        self.up_proj = nn.Linear(d, Fdim, bias=False)
        self.down_proj = nn.Linear(Fdim, d, bias=False)

    def attention(self, x, cos, sin, mask):
        B, T, _ = x.shape
        H, Hkv, hd = self.H, self.Hkv, self.hd
        q = self.q_proj(x).view(B, T, H, hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, Hkv, hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, Hkv, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if Hkv != H:
            rep = H // Hkv
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        if HAS_SDPA:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            s = s.masked_fill(mask, float("-inf"))
            o = torch.matmul(torch.softmax(s, dim=-1), v)
        o = o.transpose(1, 2).reshape(B, T, H * hd)
        return self.o_proj(o)

    def forward(self, x, cos, sin, mask):
        x = x + self.attention(self.attn_norm(x), cos, sin, mask)
        h = self.mlp_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, V, d, L, H, Hkv, Fdim, T):
        super().__init__()
        self.embed = nn.Embedding(V, d)
        self.blocks = nn.ModuleList(Block(d, H, Hkv, Fdim) for _ in range(L))
        self.norm = RMSNorm(d)
        cos, sin = rope_cache(T, d // H)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)
        for name, p in self.named_parameters():
            if p.dim() >= 2:  # embedding + all projections; norms stay at 1
                nn.init.normal_(p, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        T = idx.shape[1]
        cos, sin, mask = self.cos[:T], self.sin[:T], self.mask[:T, :T]
        x = self.embed(idx)
        for blk in self.blocks:
            x = blk(x, cos, sin, mask)
        logits = F.linear(self.norm(x), self.embed.weight)  # tied LM head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]),
                               targets.reshape(-1))


def blas_info():
    """Which BLAS this torch build links (Debian's is BLAS_INFO=generic, i.e.
    whatever /usr/lib/*/libblas.so.3 points at -- netlib unless changed)."""
    import os
    import re
    m = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    info = m.group(1) if m else "unknown"
    if info == "generic":
        for lib in ("/usr/lib/x86_64-linux-gnu/libblas.so.3",
                    "/usr/lib/aarch64-linux-gnu/libblas.so.3"):
            if os.path.exists(lib):
                info += " (%s)" % os.path.realpath(lib)
                break
    return info


def make_optimizer(params):
    kw = dict(lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    try:
        return torch.optim.AdamW(params, foreach=True, **kw), True
    except (TypeError, RuntimeError):
        return torch.optim.AdamW(params, **kw), False


def flops_per_token(V, d, L, H, Hkv, Fdim, T):
    hd = d // H
    matrix = L * (d * (H * hd + 2 * Hkv * hd) + H * hd * d + 3 * Fdim * d) + V * d
    return 6 * matrix + 6 * L * H * hd * (T + 1)


def bench(name, threads, steps, tokens, warmup=2, seed=1234):
    V, d, L, H, Hkv, Fdim, T = PRESETS[name]
    B = max(1, tokens // T)
    torch.manual_seed(seed)
    model = Llama(V, d, L, H, Hkv, Fdim, T)
    model.train()
    opt, foreach = make_optimizer(model.parameters())
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, V, (B, T), generator=g)
    tgt = torch.randint(0, V, (B, T), generator=g)

    def step():
        loss = model(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    tok = B * T
    tps = tok / med
    return {
        "model": name,
        "threads": threads,
        "batch": B,
        "seq": T,
        "median_step_s": med,
        "tokens_per_s": tps,
        "gflops": tps * flops_per_token(V, d, L, H, Hkv, Fdim, T) / 1e9,
        "_loss": float(loss),
        "_foreach": foreach,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="tiny,small,medium")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=2048,
                    help="tokens per step (batch = tokens // context)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    models = [m.strip() for m in a.models.split(",") if m.strip()]
    for m in models:
        if m not in PRESETS:
            ap.error("unknown model %r (choose from %s)" % (m, ",".join(PRESETS)))
    threads = [int(t) for t in a.threads.split(",") if t.strip()]
    if a.steps < 1:
        ap.error("--steps must be >= 1")

    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already set / parallel work already started

    log = sys.stderr if a.json else sys.stdout
    blas = blas_info()
    print("torch %s, attention: %s, BLAS: %s" % (torch.__version__, ATTN_PATH,
                                                 blas), file=log)

    results = []
    for n in threads:
        torch.set_num_threads(n)
        for m in models:
            r = bench(m, n, a.steps, a.tokens)
            if not a.json and not results:
                print("AdamW foreach: %s" % r["_foreach"])
                print("%-8s %7s %5s %5s %13s %12s %9s %9s" % (
                    "model", "threads", "batch", "seq", "median_step_s",
                    "tokens/s", "GFLOP/s", "loss"))
            if not a.json:
                print("%-8s %7d %5d %5d %13.4f %12.1f %9.2f %9.4f" % (
                    r["model"], r["threads"], r["batch"], r["seq"],
                    r["median_step_s"], r["tokens_per_s"], r["gflops"],
                    r["_loss"]))
                sys.stdout.flush()
            results.append(r)

    if a.json:
        out = {"torch": torch.__version__,
               "attention": ATTN_PATH,
               "blas": blas,
               "results": [{k: v for k, v in r.items() if not k.startswith("_")}
                           for r in results]}
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
