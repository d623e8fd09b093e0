#!/usr/bin/env python3
"""PyTorch's training step of the same mixture of experts as nobubble's MoE presets (bench/moe.sh).

transformers' MixtralForCausalLM with the shape of `moe-tiny` or `moe-small` (src/model/config.c: tied
head, RMSNorm eps 1e-5, RoPE theta 10000, E experts of width d_ffn, k per token, every block a MoE block),
trained on random tokens with the load-balancing loss in the objective (output_router_logits, the
preset's aux_coef), torch.optim.AdamW (fused where this torch has it on CPU), in fp32 eager and under
torch.compile. A step is forward, backward, optimizer step and zero_grad; 2 warm-up steps (which include
compilation) are left out of the median. GFLOP/s count active parameters as nobubble does:
6 x (attention's and the router's matrices, the k experts' and the head) + 6 x layers x d x (T + 1).

    python tools/bench/torch_moe_bench.py --model moe-tiny --threads 2 --batch 16 --seq 128 --json
"""
import argparse
import json
import statistics
import sys
import time

import torch

# name: (vocab, d, layers, heads, kv heads, d_ffn, context, experts, per token, aux_coef)
PRESETS = {
    "moe-tiny": (2048, 128, 4, 4, 4, 192, 128, 8, 2, 0.01),
    "moe-small": (4096, 256, 6, 4, 4, 384, 256, 8, 2, 0.01),
}
MODES = ("eager-fp32", "compile-fp32", "eager-bf16", "compile-bf16")  # bf16: autocast, fp32 master weights


def flops_per_token(V, d, L, H, Hkv, F, T, E, k):
    hd = d // H
    matrix = L * (d * (H * hd + 2 * Hkv * hd) + H * hd * d + E * d + k * 3 * F * d) + V * d
    return 6.0 * matrix + 6.0 * L * H * hd * (T + 1.0)


def bench(name, mode, threads, B, T, steps, warmup=2, seed=1234):
    from transformers import MixtralConfig, MixtralForCausalLM
    V, d, L, H, Hkv, F, ctx, E, k, coef = PRESETS[name]
    cfg = MixtralConfig(vocab_size=V, hidden_size=d, intermediate_size=F, num_hidden_layers=L, num_attention_heads=H,
                        num_key_value_heads=Hkv, max_position_embeddings=max(T, ctx), rms_norm_eps=1e-5,
                        rope_theta=10000.0, tie_word_embeddings=True, num_local_experts=E, num_experts_per_tok=k,
                        router_aux_loss_coef=coef, output_router_logits=True, sliding_window=None,
                        attn_implementation="sdpa")
    torch.manual_seed(seed)
    model = MixtralForCausalLM(cfg).float().train()
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    except (RuntimeError, TypeError):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    run = torch.compile(model) if mode.startswith("compile") else model
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, V, (B, T), generator=g)

    bf16 = mode.endswith("bf16")

    def step():
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = run(input_ids=idx, labels=idx).loss  # the language-model loss plus aux_coef x the router's
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0, loss.item()

    for _ in range(warmup):
        step()
    timed = [step() for _ in range(steps)]
    med = statistics.median(t[0] for t in timed)
    tps = B * T / med
    return {"model": name, "mode": mode, "threads": threads, "batch": B, "seq": T, "median_step_s": med,
            "tokens_per_s": tps, "gflops": tps * flops_per_token(V, d, L, H, Hkv, F, T, E, k) / 1e9,
            "loss": timed[-1][1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(PRESETS), default="moe-tiny")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    bad = [m for m in modes if m not in MODES]
    if bad or a.threads < 1 or a.batch < 1 or a.seq < 1 or a.steps < 1:
        ap.error("--modes from %s; --threads, --batch, --seq, --steps >= 1" % ",".join(MODES))
    torch.set_num_threads(a.threads)
    results = []
    for mode in modes:
        try:
            results.append(bench(a.model, mode, a.threads, a.batch, a.seq, a.steps))
        except Exception as e:  # a mode that fails (no compiler) is reported, not hidden
            results.append({"model": a.model, "mode": mode, "threads": a.threads, "error": "%s: %s" % (type(e).__name__, e)})
    if a.json:
        print(json.dumps({"torch": torch.__version__, "results": results}))
    else:
        for r in results:
            print(r)
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
