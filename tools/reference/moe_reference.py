#!/usr/bin/env python3
"""A float64 PyTorch reference of nobubble's mixture-of-experts block (docs/moe.md), for tests/test_moe.c.

The rule, written with torch's own operations and autograd (not nobubble's code): router logits
x W_r^T, softmax, the top k by probability (torch.topk, largest first), weights renormalized over the
chosen, each expert a SwiGLU FFN (gate rows then up rows in one 2F x d matrix, down d x F), the output
the weighted sum; the load-balancing loss E * sum_e f_e P_e with f (assignments / tokens) detached.
The objective is sum(c * out) + a * aux; its gradients with respect to the input, the router and every
expert's matrices are written with the inputs into tests/fixtures/moe_block.nbfx (NBFX, nbfx.py).

Usage: python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch numpy
       /tmp/venv/bin/python tools/reference/moe_reference.py   (written with torch 2.15)
"""
import os

import numpy as np
import torch

from nbfx import Writer

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "fixtures", "moe_block.nbfx")

N, D, F, E, K = 12, 8, 6, 4, 2
torch.manual_seed(1)
dt = torch.float64
x = torch.randn(N, D, dtype=dt, requires_grad=True)
w_router = (2.0 * torch.randn(E, D, dtype=dt)).requires_grad_()
w_gu = (0.5 * torch.randn(E, 2 * F, D, dtype=dt)).requires_grad_()
w_down = (0.5 * torch.randn(E, D, F, dtype=dt)).requires_grad_()
c = torch.randn(N, D, dtype=dt)
a = 0.37

p = torch.softmax(x @ w_router.T, dim=-1)
top_p, top = torch.topk(p, K, dim=-1)
sorted_p = torch.sort(p, dim=-1, descending=True).values
assert (sorted_p[:, K - 1] - sorted_p[:, K]).min() > 1e-3, "a token near a routing boundary: change the seed"
weight = top_p / top_p.sum(dim=-1, keepdim=True)
out = torch.zeros(N, D, dtype=dt)
for t in range(N):
    for j in range(K):
        e = int(top[t, j])
        gu = w_gu[e] @ x[t]
        h = torch.nn.functional.silu(gu[:F]) * gu[F:]
        out[t] = out[t] + weight[t, j] * (w_down[e] @ h)
counts = torch.zeros(E, dtype=dt)
for e in top.flatten().tolist():
    counts[e] += 1
f = (counts / N).detach()
aux = E * (f * p.mean(dim=0)).sum()
loss = (c * out).sum() + a * aux
loss.backward()

w = Writer()
w.add("dims", np.array([N, D, F, E, K]))
w.add("a", np.array([a]))
for name, v in (("x", x), ("w_router", w_router), ("w_gu", w_gu), ("w_down", w_down), ("c", c)):
    w.add(name, v.detach().numpy())
w.add("out", out.detach().numpy())
w.add("aux", np.array([aux.item()]))
w.add("top", top.numpy())
for name, v in (("x", x), ("w_router", w_router), ("w_gu", w_gu), ("w_down", w_down)):
    w.add("grad:" + name, v.grad.numpy())
w.write(OUT)
print("wrote", OUT)
