#!/usr/bin/env python3
"""Hugging Face's own LlamaForCausalLM as the reference for nobubble's model and its HF import.

For two small configurations (grouped-query with an untied head; multi-query with a tied head)
this builds `transformers.LlamaForCausalLM` with random weights (std 0.3, gains
1 +- 0.2, so that attention and every path matter), saves it with `save_pretrained` (safetensors,
float32) into tests/fixtures/hf_<name>/, and writes tests/fixtures/hf_<name>.nbfx (the NBFX format of
nbfx.py) with the tokens, the targets, and the logits and mean cross-entropy of the same model
(float32: transformers 4.31's causal mask does not work in float64 with torch 1.13). tests/test_hf_llama.c imports the folder with nb_import_hf and
compares nobubble's float32 forward to these.

Needs transformers 4.31 (the first with grouped-query attention; it works with Debian's torch 1.13:
`/usr/bin/python3 -m pip install --break-system-packages transformers==4.31.0`). transformers 4.31
ignores rope_theta (its rotary base is fixed at 10000), so both configurations use 10000; other
thetas are covered by tools/reference/llama_reference.py.

The untied model is also saved sharded (tests/fixtures/hf_untied_sharded/: model.safetensors.index.json
and parts of at most 20 kB, Hugging Face's layout for large models), which test_hf_llama.c loads and
checks against the same logits.

Optional: --nobubble PATH/TO/nobubble also exports a model with `nobubble export` and checks that
LlamaForCausalLM.from_pretrained loads it; --check-folder DIR loads a nobubble folder (an export, or a
pipeline checkpoint with a part per stage) with from_pretrained and checks that no weight is missing
or unexpected and that every parameter equals the tensor in the folder's files (manual checks of the
other direction; not in CI). --check-tokenizer FOLDER DATA loads FOLDER's tokenizer (nobubble's
tokenizer.json + tokenizer_config.json) with AutoTokenizer and with tokenizers.Tokenizer.from_file, and
checks that each validation document of the prepared folder DATA (its *_val_*.bin shards, documents
separated by the end-of-text id) is the text's encoding by both: encode(decode(ids)) == ids.

Usage: /usr/bin/python3 tools/reference/hf_reference.py [--out-dir tests/fixtures] [--nobubble build/nobubble]
       /usr/bin/python3 tools/reference/hf_reference.py --check-folder runs/x/ckpt/step_000100
       /usr/bin/python3 tools/reference/hf_reference.py --check-tokenizer runs/x/export data/bible
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbfx import Writer  # noqa: E402

CONFIGS = {
    "untied": dict(vocab=61, d=32, layers=2, heads=4, kv=2, ffn=40, context=16, theta=10000.0, tied=False, B=2, T=11),
    "tied": dict(vocab=53, d=24, layers=2, heads=2, kv=1, ffn=36, context=12, theta=10000.0, tied=True, B=3, T=9),
}


def build(c, seed):
    cfg = LlamaConfig(vocab_size=c["vocab"], hidden_size=c["d"], intermediate_size=c["ffn"],
                      num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                      num_key_value_heads=c["kv"], max_position_embeddings=c["context"],
                      rms_norm_eps=1e-5, rope_theta=c["theta"], tie_word_embeddings=c["tied"],
                      hidden_act="silu")
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p))
    return model


def check_folder(folder):
    """from_pretrained loads every weight of a nobubble folder, each equal to the file's tensor."""
    import json
    from safetensors.numpy import load_file
    m, info = LlamaForCausalLM.from_pretrained(folder, output_loading_info=True)
    # rotary_emb.inv_freq is a buffer transformers 4.31 computes at construction, not a weight
    bad = {k: [n for n in v if not n.endswith("rotary_emb.inv_freq")] for k, v in info.items()}
    bad = {k: v for k, v in bad.items() if v}
    if bad:
        sys.exit("%s: from_pretrained reports %s" % (folder, bad))
    index = os.path.join(folder, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    tensors = {}
    for f in files:
        tensors.update(load_file(os.path.join(folder, f)))
    state = m.state_dict()
    for name, value in tensors.items():
        if not np.array_equal(state[name].numpy(), value):
            sys.exit("%s: parameter %s differs from the file's" % (folder, name))
    print("%s: from_pretrained loaded %d tensors from %d file(s), each equal to the file's; %d parameters"
          % (folder, len(tensors), len(files), sum(p.numel() for p in m.parameters())))


def read_shard(path):
    """Token ids of a nobubble shard (the llm.c layout: 256 int32 header, then uint16 or uint32 ids)."""
    header = np.fromfile(path, dtype=np.int32, count=256)
    magic, count = int(header[0]), int(header[2])
    dtype = {20240520: np.uint16, 20240801: np.uint32}[magic]
    return np.fromfile(path, dtype=dtype, offset=1024)[:count].tolist()


def fail(message):
    """Says why on stdout (CI's script keeps stdout; transformers' warnings fill stderr) and exits 1."""
    print(message)
    sys.exit(1)


def check_tokenizer(folder, data):
    """AutoTokenizer and tokenizers load nobubble's tokenizer and encode the validation documents to nobubble's ids."""
    import glob
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer
    auto = AutoTokenizer.from_pretrained(folder)
    raw = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    eot = auto.convert_tokens_to_ids(auto.eos_token)
    if raw.token_to_id(auto.eos_token) != eot:
        fail("%s: tokenizer_config.json's eos_token %r is not the tokenizer's id %d" % (folder, auto.eos_token, eot))
    shards = sorted(glob.glob(os.path.join(data, "*_val_*.bin")))
    docs, doc = [], []
    for shard in shards:
        for i in read_shard(shard):
            if i == eot:
                if doc:
                    docs.append(doc)
                doc = []
            else:
                doc.append(i)
    if doc:
        docs.append(doc)
    if not docs:
        fail("%s: no validation documents in %s" % (data, shards))
    for k, ids in enumerate(docs):
        text = raw.decode(ids)
        by_auto = auto(text, add_special_tokens=False)["input_ids"]
        by_raw = raw.encode(text, add_special_tokens=False).ids
        if by_auto != ids or by_raw != ids:
            other = by_auto if by_auto != ids else by_raw
            at = next((i for i, (a, b) in enumerate(zip(ids, other)) if a != b), min(len(ids), len(other)))
            fail("%s: validation document %d encodes differently from token %d on: nobubble %s, %s %s"
                 % (data, k, at, ids[at:at + 8], "AutoTokenizer" if by_auto != ids else "tokenizers", other[at:at + 8]))
    print("%s: AutoTokenizer (%s) and tokenizers encode all %d validation documents (%d tokens) to nobubble's ids"
          % (folder, type(auto).__name__, len(docs), sum(map(len, docs))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures"))
    ap.add_argument("--nobubble", default=None)
    ap.add_argument("--check-folder", default=None)
    ap.add_argument("--check-tokenizer", nargs=2, metavar=("FOLDER", "DATA"), default=None)
    args = ap.parse_args()
    if args.check_tokenizer:
        check_tokenizer(*args.check_tokenizer)
        return
    if args.check_folder:
        check_folder(args.check_folder)
        return
    for i, (name, c) in enumerate(CONFIGS.items()):
        model = build(c, 100 + i)
        folder = os.path.join(args.out_dir, "hf_" + name)
        model.save_pretrained(folder, safe_serialization=True)
        if name == "untied":
            model.save_pretrained(folder + "_sharded", safe_serialization=True, max_shard_size="20KB")
        g = torch.Generator().manual_seed(200 + i)
        tokens = torch.randint(0, c["vocab"], (c["B"], c["T"]), generator=g)
        targets = torch.randint(0, c["vocab"], (c["B"], c["T"]), generator=g)
        ref = model.eval()
        with torch.no_grad():
            logits = ref(input_ids=tokens).logits  # [B, T, V]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, c["vocab"]), targets.reshape(-1))
        w = Writer()
        w.add("config", np.array([c["vocab"], c["d"], c["layers"], c["heads"], c["kv"], c["ffn"], c["context"],
                                  int(c["tied"]), c["B"], c["T"]]))
        w.add("rope_theta", np.array([c["theta"]], dtype=np.float64))
        w.add("tokens", tokens.reshape(-1).numpy())
        w.add("targets", targets.reshape(-1).numpy())
        w.add("logits", logits.reshape(-1, c["vocab"]).numpy())
        w.add("loss", np.array([loss.item()], dtype=np.float64))
        w.write(os.path.join(args.out_dir, "hf_%s.nbfx" % name))
        print("%s: loss %.10f, folder %s" % (name, loss.item(), folder))
    if args.nobubble:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([args.nobubble, "export", "--model", "tiny", "--set", "n_kv_heads=2", "--set", "tied=0",
                            "--out", tmp], check=True)
            m = LlamaForCausalLM.from_pretrained(tmp)
            print("transformers loaded nobubble's export:", type(m).__name__,
                  sum(p.numel() for p in m.parameters()), "parameters")


if __name__ == "__main__":
    main()
