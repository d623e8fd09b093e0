#!/usr/bin/python3
"""Independent PyTorch (float64, autograd) reference for nobubble's Llama model.

Writes tests/fixtures/llama_untied.nbfx and tests/fixtures/llama_tied.nbfx, which
tests/test_reference.c compares the C model against.

Run from anywhere (needs torch and numpy, e.g. Debian's python3-torch):
    /usr/bin/python3 tools/reference/llama_reference.py [--out-dir tests/fixtures]

The model is written directly from the Hugging Face Llama formulas (no transformers):
  x = embed[tokens]
  per block: h = rms(x) * input_layernorm; q,k,v = h Wq^T, h Wk^T, h Wv^T;
             rotary (HF rotate_half pairing, inv_freq[i] = theta^(-2i/hd), pos = 0..T-1);
             causal softmax(q k^T / sqrt(hd)) v, query head h uses kv head h // (H/Hkv);
             x += attn Wo^T;
             h2 = rms(x) * post_attention_layernorm; x += down(silu(gate(h2)) * up(h2))
  final: logits = (rms(x) * norm) W^T, W = lm_head or the embedding when tied;
  loss = mean cross-entropy over all B*T positions.  rms(x) = x / sqrt(mean(x^2) + eps).

Fixture format "NBFX0001" (all little-endian):
  8 bytes magic "NBFX0001"
  u32 entry count
  per entry:
    u32 name length, name bytes (no NUL)
    u32 dtype (0 = f64, 1 = i32)
    u32 ndim, then ndim x u64 dims
    data: prod(dims) elements of the dtype, row-major
Entries:
  "config"     i32 [10]: vocab, d_model, n_layers, n_heads, n_kv_heads, d_ffn, context,
                         tied, B, T
  "rope_theta" f64 [1]
  "norm_eps"   f64 [1]
  "tokens"     i32 [B*T]  (sequence b at [b*T, (b+1)*T))
  "targets"    i32 [B*T]
  "loss"       f64 [1]
  "logits"     f64 [B*T, V]
  <HF name>          f64, each weight (linear weights (out, in))
  "grad:" <HF name>  f64, d loss / d weight (for a tied embedding: the total gradient,
                     embedding use plus head use)
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbfx import Writer  # noqa: E402

EPS = 1e-5


def param_shapes(c):
    V, d, L, H, Hkv, F = c["vocab"], c["d"], c["layers"], c["heads"], c["kv_heads"], c["ffn"]
    hd = d // H
    shapes = [("model.embed_tokens.weight", (V, d))]
    for i in range(L):
        p = "model.layers.%d." % i
        shapes += [
            (p + "input_layernorm.weight", (d,)),
            (p + "self_attn.q_proj.weight", (H * hd, d)),
            (p + "self_attn.k_proj.weight", (Hkv * hd, d)),
            (p + "self_attn.v_proj.weight", (Hkv * hd, d)),
            (p + "self_attn.o_proj.weight", (d, H * hd)),
            (p + "post_attention_layernorm.weight", (d,)),
            (p + "mlp.gate_proj.weight", (F, d)),
            (p + "mlp.up_proj.weight", (F, d)),
            (p + "mlp.down_proj.weight", (d, F)),
        ]
    shapes.append(("model.norm.weight", (d,)))
    if not c["tied"]:
        shapes.append(("lm_head.weight", (V, d)))
    return shapes


def rms_norm(x, g):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + EPS) * g


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward(c, W, tokens):
    """tokens: LongTensor [B, T]. Returns logits [B, T, V]."""
    d, L, H, Hkv = c["d"], c["layers"], c["heads"], c["kv_heads"]
    hd = d // H
    B, T = tokens.shape
    inv_freq = torch.tensor([c["theta"] ** (-2.0 * i / hd) for i in range(hd // 2)],
                            dtype=torch.float64)
    pos = torch.arange(T, dtype=torch.float64)
    ang = pos[:, None] * inv_freq[None, :]           # [T, hd/2]
    ang = torch.cat((ang, ang), dim=-1)              # [T, hd]
    cos, sin = torch.cos(ang), torch.sin(ang)        # broadcast over [B, heads, T, hd]
    mask = torch.ones(T, T, dtype=torch.bool).tril()  # key j <= query t

    x = W["model.embed_tokens.weight"][tokens]       # [B, T, d]
    for i in range(L):
        p = "model.layers.%d." % i
        h = rms_norm(x, W[p + "input_layernorm.weight"])
        q = h @ W[p + "self_attn.q_proj.weight"].T
        k = h @ W[p + "self_attn.k_proj.weight"].T
        v = h @ W[p + "self_attn.v_proj.weight"].T
        q = q.view(B, T, H, hd).transpose(1, 2)      # [B, H, T, hd]
        k = k.view(B, T, Hkv, hd).transpose(1, 2)    # [B, Hkv, T, hd]
        v = v.view(B, T, Hkv, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = H // Hkv
        kv_of = torch.tensor([hh // rep for hh in range(H)])
        k = k[:, kv_of]                              # [B, H, T, hd]
        v = v[:, kv_of]
        s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)  # [B, H, T, T]
        s = s.masked_fill(~mask, float("-inf"))
        a = torch.softmax(s, dim=-1) @ v             # [B, H, T, hd]
        a = a.transpose(1, 2).reshape(B, T, H * hd)
        x = x + a @ W[p + "self_attn.o_proj.weight"].T
        h2 = rms_norm(x, W[p + "post_attention_layernorm.weight"])
        gate = h2 @ W[p + "mlp.gate_proj.weight"].T
        up = h2 @ W[p + "mlp.up_proj.weight"].T
        silu = gate * torch.sigmoid(gate)
        x = x + (silu * up) @ W[p + "mlp.down_proj.weight"].T
    h = rms_norm(x, W["model.norm.weight"])
    head = W["model.embed_tokens.weight"] if c["tied"] else W["lm_head.weight"]
    return h @ head.T


def loss_fn(logits, targets):
    V = logits.shape[-1]
    lp = torch.log_softmax(logits.reshape(-1, V), dim=-1)
    return -lp.gather(1, targets.reshape(-1, 1)).mean()


def build(c, seed):
    gen = torch.Generator().manual_seed(seed)
    W = {}
    for name, shape in param_shapes(c):
        if len(shape) == 1:
            t = 1.0 + 0.2 * torch.randn(shape, generator=gen, dtype=torch.float64)
        else:
            t = 0.3 * torch.randn(shape, generator=gen, dtype=torch.float64)
        W[name] = t.requires_grad_(True)
    B, T, V = c["B"], c["T"], c["vocab"]
    tokens = torch.randint(0, V, (B, T), generator=gen)
    targets = torch.randint(0, V, (B, T), generator=gen)
    logits = forward(c, W, tokens)
    loss = loss_fn(logits, targets)
    loss.backward()
    return W, tokens, targets, logits.detach(), loss.detach()


def write_fixture(c, seed, path):
    W, tokens, targets, logits, loss = build(c, seed)
    w = Writer()
    w.add("config", np.array([c["vocab"], c["d"], c["layers"], c["heads"], c["kv_heads"],
                              c["ffn"], c["context"], c["tied"], c["B"], c["T"]]))
    w.add("rope_theta", np.array([c["theta"]], dtype=np.float64))
    w.add("norm_eps", np.array([EPS], dtype=np.float64))
    w.add("tokens", tokens.reshape(-1).numpy())
    w.add("targets", targets.reshape(-1).numpy())
    w.add("loss", np.array([loss.item()], dtype=np.float64))
    w.add("logits", logits.reshape(c["B"] * c["T"], c["vocab"]).numpy())
    for name, _ in param_shapes(c):
        w.add(name, W[name].detach().numpy())
    for name, _ in param_shapes(c):
        w.add("grad:" + name, W[name].grad.numpy())
    w.write(path)
    print("%s: loss %.10f, %d bytes" % (path, loss.item(), os.path.getsize(path)))


UNTIED = dict(vocab=37, d=24, layers=2, heads=4, kv_heads=2, ffn=40, context=16,
              theta=10000.0, tied=0, B=2, T=11)
TIED = dict(vocab=29, d=16, layers=3, heads=2, kv_heads=1, ffn=24, context=12,
            theta=500.0, tied=1, B=3, T=9)


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default=os.path.join(root, "tests", "fixtures"))
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_default_dtype(torch.float64)
    write_fixture(UNTIED, 1234, os.path.join(args.out_dir, "llama_untied.nbfx"))
    write_fixture(TIED, 5678, os.path.join(args.out_dir, "llama_tied.nbfx"))


if __name__ == "__main__":
    main()
