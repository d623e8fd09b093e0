#!/usr/bin/env python3
"""transformers' Mixtral against nobubble's export of a mixture of experts (run by tools/ci/hf_load_check.sh).

  python3 tools/reference/mixtral_check.py FOLDER DATA --loss L --batch B --seq T --batches N

FOLDER is `train --export` of a MoE model (MixtralForCausalLM), DATA the prepared folder it trained on
and L the validation loss `nobubble eval --checkpoint FOLDER --data DATA --batch B --seq T --batches N`
printed. Checks that MixtralForCausalLM.from_pretrained loads FOLDER with no weight missing or
unexpected and every parameter equal to the file's tensors (transformers 4.36 to 4.x keep the file's
names; 5.x stacks each block's experts into `experts.gate_up_proj` (w1 | w3 per expert) and
`experts.down_proj` (w2), compared as such), then that its mean cross-entropy over the same windows as
nobubble's loader cuts (window w: tokens [wT, wT + T] of the validation shards, N micro-batches of B
windows in order, the mean over the micro-batches of each one's mean) equals L within 1e-4 relative.
Exits 1 saying why on stdout.
"""
import argparse
import glob
import json
import os
import sys

import numpy as np
import torch
from transformers import MixtralForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_reference import fail, read_shard  # noqa: E402


def file_tensors(folder):
    from safetensors.numpy import load_file
    index = os.path.join(folder, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    tensors = {}
    for f in files:
        tensors.update(load_file(os.path.join(folder, f)))
    return tensors


def expected(name, tensors, config):
    """The file's value of parameter `name`, under either naming of transformers."""
    if name in tensors:
        return tensors[name]
    layer = name.split(".")[2]
    base = "model.layers.%s.block_sparse_moe." % layer
    experts = range(config.num_local_experts)
    if name.endswith("experts.gate_up_proj"):
        return np.stack([np.concatenate([tensors[base + "experts.%d.w1.weight" % e],
                                         tensors[base + "experts.%d.w3.weight" % e]]) for e in experts])
    if name.endswith("experts.down_proj"):
        return np.stack([tensors[base + "experts.%d.w2.weight" % e] for e in experts])
    if name.endswith("mlp.gate.weight"):
        return tensors[base + "gate.weight"]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("data")
    ap.add_argument("--loss", type=float, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--batches", type=int, required=True)
    a = ap.parse_args()
    m, info = MixtralForCausalLM.from_pretrained(a.folder, output_loading_info=True)
    bad = {k: [n for n in v if not n.endswith("rotary_emb.inv_freq")] for k, v in info.items() if k != "mismatched_keys"}
    bad = {k: v for k, v in bad.items() if v}
    if bad:
        fail("%s: from_pretrained reports %s" % (a.folder, bad))
    tensors = file_tensors(a.folder)
    compared = 0
    for name, value in m.state_dict().items():
        if name.endswith("rotary_emb.inv_freq") or (name == "lm_head.weight" and m.config.tie_word_embeddings):
            continue
        want = expected(name, tensors, m.config)
        if want is None:
            fail("%s: parameter %s has no tensor in the folder" % (a.folder, name))
        if not np.array_equal(value.numpy(), want):
            fail("%s: parameter %s differs from the file's" % (a.folder, name))
        compared += 1
    stream = []
    for shard in sorted(glob.glob(os.path.join(a.data, "*_val_*.bin"))):
        stream += read_shard(shard)
    B, T = a.batch, a.seq
    if len(stream) < a.batches * B * T + 1:
        fail("%s: %d validation tokens, fewer than the %d windows need" % (a.data, len(stream), a.batches * B))
    m.eval()
    losses = []
    with torch.no_grad():
        for s in range(a.batches):
            rows = [stream[(s * B + b) * T:(s * B + b) * T + T + 1] for b in range(B)]
            x = torch.tensor([r[:T] for r in rows])
            y = torch.tensor([r[1:] for r in rows])
            logits = m(input_ids=x).logits.float()
            losses.append(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item())
    loss = float(np.mean(losses))
    if abs(loss - a.loss) > 1e-4 * abs(a.loss):
        fail("%s: transformers' loss %.8f, nobubble eval's %.8f: they differ by more than 1e-4 relative" % (a.folder, loss, a.loss))
    print("%s: MixtralForCausalLM loaded %d parameters, each equal to the file's; loss %.8f against nobubble eval's "
          "%.8f" % (a.folder, compared, loss, a.loss))


if __name__ == "__main__":
    main()
