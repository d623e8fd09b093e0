#!/usr/bin/env python3
"""torch_bench.py's model is nobubble's: on the weights, tokens and targets of
tests/fixtures/llama_{tied,untied}.nbfx (written by the independent float64 reference
tools/reference/llama_reference.py, which tests/test_reference.c holds nobubble to), torch_bench's
Llama in float64 must give each fixture's loss and every weight's gradient. The tied fixture has 2
query heads on 1 kv head, the untied one 4 on 2 (which tells which query heads share a kv head), so
the tied head, GQA, RoPE (each with its own theta), the RMSNorms and SwiGLU are all on the path. bench/vs_torch.sh runs this before measuring; ctest runs it
when a Python with torch >= 2 is found (tests/torch_bench_check.sh).

Usage: python tools/bench/torch_bench_check.py [FIXTURE.nbfx...]   (default: both fixtures)
"""
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_bench  # noqa: E402


def read_nbfx(path):
    """{name: tensor} from an NBFX0001 file (f64 or i32 entries)."""
    data = open(path, "rb").read()
    if data[:8] != b"NBFX0001":
        raise SystemExit("%s: not an NBFX0001 fixture" % path)
    (count,), at, out = struct.unpack_from("<I", data, 8), 12, {}
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, at)
        name = data[at + 4:at + 4 + n].decode()
        dtype, ndim = struct.unpack_from("<II", data, at + 4 + n)
        at += 12 + n
        dims = struct.unpack_from("<%dQ" % ndim, data, at)
        at += 8 * ndim
        numel = 1
        for x in dims:
            numel *= x
        size = 8 if dtype == 0 else 4
        buf = bytearray(data[at:at + numel * size])
        t = torch.frombuffer(buf, dtype=torch.float64 if dtype == 0 else torch.int32) if numel else torch.zeros(0)
        out[name] = t.reshape(dims)
        at += numel * size
    return out


def torch_name(hf):
    """Hugging Face's parameter name -> torch_bench.Llama's."""
    name = hf.replace("model.", "", 1).replace("self_attn.", "").replace("mlp.", "")
    for gain in ("input_layernorm", "post_attention_layernorm"):
        name = name.replace(gain + ".weight", gain)
    return "norm" if name == "norm.weight" else name


def check(path):
    fx = read_nbfx(path)
    V, d, L, H, Hkv, ffn, ctx, tied, B, T = (int(x) for x in fx["config"])
    assert abs(float(fx["norm_eps"][0]) - torch_bench.EPS) == 0, "norm eps differs"
    model = torch_bench.Llama(V, d, L, H, Hkv, ffn, ctx, theta=float(fx["rope_theta"][0]), tied=bool(tied)).double()
    # the rotary tables in double too: the fixture's reference computes everything in float64
    inv = 1.0 / (float(fx["rope_theta"][0]) ** (torch.arange(0, d // H, 2, dtype=torch.float64) / (d // H)))
    ang = torch.outer(torch.arange(ctx, dtype=torch.float64), inv)
    model.cos, model.sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()
    params = dict(model.named_parameters())
    names = [k for k in fx if k not in ("config", "rope_theta", "norm_eps", "tokens", "targets", "loss", "logits")
             and not k.startswith("grad:")]
    assert sorted(torch_name(k) for k in names) == sorted(params), "parameter names differ"
    with torch.no_grad():
        for k in names:
            params[torch_name(k)].copy_(fx[k])
    tokens, targets = fx["tokens"].long().reshape(B, T), fx["targets"].long().reshape(B, T)
    loss = model(tokens, targets)
    loss.backward()
    failures = []
    want = float(fx["loss"][0])
    if abs(loss.item() - want) > 1e-10 * abs(want):
        failures.append("loss %.15g, the fixture's %.15g" % (loss.item(), want))
    for k in names:
        g, ref = params[torch_name(k)].grad, fx["grad:" + k]
        err = (g - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
        if err > 1e-9:
            failures.append("%s: gradient differs by %.3g of its largest value" % (k, err))
    for f in failures:
        print("FAIL: " + f)
    print("torch_bench model against %s (torch %s): loss %.12f, %d tensors' gradients: %s" % (
        path, torch.__version__, loss.item(), len(names), "ok" if not failures else "%d failed" % len(failures)))
    return 1 if failures else 0


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures")
    paths = sys.argv[1:] or [os.path.join(here, "llama_tied.nbfx"), os.path.join(here, "llama_untied.nbfx")]
    return max(check(p) for p in paths)


if __name__ == "__main__":
    sys.exit(main())
