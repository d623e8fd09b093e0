#!/usr/bin/env python3
"""Folders saved by transformers 4.x and 5.x, as the reference for nobubble's Hugging Face import.

Run once with each major version of transformers; the fixtures are named after it (hf4_*, hf5_*):

  /usr/bin/python3 tools/reference/hf_import_reference.py          # transformers 4.31 (Debian's torch 1.13)
  /tmp/hf5venv/bin/python tools/reference/hf_import_reference.py   # transformers 5.x (torch from PyPI)

For each model (tiny LlamaForCausalLM: vocab 64, hidden 16, 2 layers, 4 heads, 2 kv heads, ffn 24,
random weights N(0, 0.3), gains 1 + N(0, 0.2)) it saves the folder with save_pretrained into
tests/fixtures/hfN_<name>/ and writes tests/fixtures/hfN_<name>.nbfx with the token stream
(B x T + 1 tokens: row b's inputs are stream[bT : bT + T], its targets the next tokens, exactly the
windows nobubble's loader cuts from a shard holding the stream), the logits transformers computes for
the inputs (float32) and their mean cross-entropy. tests/test_hf_import.c loads each folder and
compares; tests/test_init_from.c starts training from them.

Models: `untied` and `tied`; 4.x also `tp2` (pretraining_tp 2: transformers 4.31 splits every
projection in 2 slices, the same function up to float32 rounding, which nobubble ignores); 5.x also
`untied_sharded` (the untied model saved in parts of at most 8 kB with an index). transformers 4.31
ignores rope_theta (its base is fixed at 10000), so 4.x models use 10000; 5.x models use 500, so that
a reader that misses rope_parameters.rope_theta gives other logits.

A mixture of experts (5.x only; `--only-mixtral` writes just these): `mixtral`, a MixtralForCausalLM
of the same shape with 4 experts of width 12, 2 per token, router_aux_loss_coef 0.02, untied; its
fixture adds "moe" (experts, experts per token) and "aux_coef". `hf5_mixtral_missing_expert` is its
folder with one expert tensor (layer 1, expert 2, w3) left out of model.safetensors, which the import
must refuse naming it; refused configs `hf5_mixtral_jitter` (router_jitter_noise 0.1) and
`hf5_qwen2_moe` (a shared expert).

Refused configurations: tests/fixtures/hf_refused/hfN_<field>/config.json, each a LlamaConfig (or
MistralConfig) saved by config.save_pretrained with one field that changes the math and that nobubble
does not implement; the C test checks that each is refused with an error naming the field.
"""
import argparse
import os
import sys

import numpy as np
import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbfx import Writer  # noqa: E402

MAJOR = int(transformers.__version__.split(".")[0])
PREFIX = "hf%d" % MAJOR
SHAPE = dict(vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=16, rms_norm_eps=1e-5)
THETA = 10000.0 if MAJOR < 5 else 500.0
B, T = 2, 8


def rope_kwargs(theta, rope_type="default", **extra):
    """RoPE as each major version spells it: 4.x rope_theta (+ rope_scaling), 5.x rope_parameters."""
    if MAJOR < 5:
        kw = dict(rope_theta=theta)
        if rope_type != "default":
            kw["rope_scaling"] = dict(type=rope_type, **extra)
        return kw
    return dict(rope_parameters=dict(rope_type=rope_type, rope_theta=theta, **extra))


def models():
    out = {"untied": dict(tie_word_embeddings=False), "tied": dict(tie_word_embeddings=True)}
    if MAJOR < 5:
        out["tp2"] = dict(tie_word_embeddings=False, pretraining_tp=2)
    return out


def randomize(model):
    """Weights N(0, 0.3), gains 1 + N(0, 0.2), from the current torch seed."""
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.copy_(1.0 + 0.2 * torch.randn_like(p) if p.dim() == 1 else 0.3 * torch.randn_like(p))
    return model.eval()


def build(extra, seed):
    cfg = LlamaConfig(**SHAPE, **rope_kwargs(THETA), hidden_act="silu", **extra)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).float()
    return randomize(model)


MIXTRAL = dict(num_local_experts=4, num_experts_per_tok=2, router_aux_loss_coef=0.02)


def build_mixtral(seed):
    from transformers import MixtralConfig, MixtralForCausalLM
    shape = dict(SHAPE, intermediate_size=12)
    cfg = MixtralConfig(**shape, **rope_kwargs(THETA), hidden_act="silu", tie_word_embeddings=False, **MIXTRAL)
    torch.manual_seed(seed)
    model = MixtralForCausalLM(cfg).float()
    return randomize(model)


def write_model(name, extra, seed, out_dir):
    model = build_mixtral(seed) if name == "mixtral" else build(extra, seed)
    folder = os.path.join(out_dir, "%s_%s" % (PREFIX, name))
    model.save_pretrained(folder, safe_serialization=True)
    if MAJOR >= 5 and name == "untied":
        model.save_pretrained(folder + "_sharded", max_shard_size="8KB")
    g = torch.Generator().manual_seed(seed + 1000)
    stream = torch.randint(0, SHAPE["vocab_size"], (B * T + 1,), generator=g)
    tokens = torch.stack([stream[b * T:b * T + T] for b in range(B)])
    targets = torch.stack([stream[b * T + 1:b * T + T + 1] for b in range(B)])
    with torch.no_grad():
        logits = model(input_ids=tokens).logits.float()
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, SHAPE["vocab_size"]), targets.reshape(-1))
    w = Writer()
    s = SHAPE
    ffn = model.config.intermediate_size
    w.add("config", np.array([s["vocab_size"], s["hidden_size"], s["num_hidden_layers"], s["num_attention_heads"],
                              s["num_key_value_heads"], ffn, s["max_position_embeddings"],
                              int(extra["tie_word_embeddings"]), B, T], dtype=np.int32))
    if name == "mixtral":
        w.add("moe", np.array([MIXTRAL["num_local_experts"], MIXTRAL["num_experts_per_tok"]], dtype=np.int32))
        w.add("aux_coef", np.array([MIXTRAL["router_aux_loss_coef"]], dtype=np.float64))
    w.add("rope_theta", np.array([THETA], dtype=np.float64))
    w.add("norm_eps", np.array([s["rms_norm_eps"]], dtype=np.float64))
    w.add("stream", stream.numpy().astype(np.int32))
    w.add("tokens", tokens.reshape(-1).numpy().astype(np.int32))
    w.add("targets", targets.reshape(-1).numpy().astype(np.int32))
    w.add("logits", logits.reshape(-1, s["vocab_size"]).numpy().astype(np.float64))
    w.add("loss", np.array([loss.item()], dtype=np.float64))
    w.write(folder + ".nbfx")
    print("%s: transformers %s, loss %.8f, %s" % (name, transformers.__version__, loss.item(), folder))


def refused():
    """name -> a config with one unsupported field (the C test knows which field each must name)."""
    base = dict(SHAPE, tie_word_embeddings=False)
    out = {
        "rope_linear": LlamaConfig(**base, **rope_kwargs(10000.0, "linear", factor=4.0)),
        "rope_dynamic": LlamaConfig(**base, **rope_kwargs(10000.0, "dynamic", factor=2.0)),
        "hidden_act": LlamaConfig(**base, **rope_kwargs(10000.0), hidden_act="gelu"),
    }
    if MAJOR >= 5:
        from transformers import MistralConfig
        out.update({
            "rope_llama3": LlamaConfig(**base, **rope_kwargs(10000.0, "llama3", factor=8.0, low_freq_factor=1.0,
                                                               high_freq_factor=4.0,
                                                               original_max_position_embeddings=8)),
            "attention_bias": LlamaConfig(**base, **rope_kwargs(10000.0), attention_bias=True),
            "mlp_bias": LlamaConfig(**base, **rope_kwargs(10000.0), mlp_bias=True),
            "head_dim": LlamaConfig(**base, **rope_kwargs(10000.0), head_dim=8),
            "attention_dropout": LlamaConfig(**base, **rope_kwargs(10000.0), attention_dropout=0.1),
            "model_type": MistralConfig(**base, sliding_window=4),
        })
        arch = LlamaConfig(**base, **rope_kwargs(10000.0))
        arch.architectures = ["LlamaForSequenceClassification"]
        out["architectures"] = arch
        out["sliding_window"] = LlamaConfig(**base, **rope_kwargs(10000.0), sliding_window=4)
    return out


def write_mixtral(out_dir):
    """The Mixtral fixture, its folder without one expert tensor, and its refused configurations."""
    from safetensors.torch import load_file, save_file
    from transformers import MixtralConfig, Qwen2MoeConfig
    write_model("mixtral", dict(tie_word_embeddings=False), 700, out_dir)
    src = os.path.join(out_dir, "%s_mixtral" % PREFIX)
    missing = os.path.join(out_dir, "hf_refused", "%s_mixtral_missing_expert" % PREFIX)
    os.makedirs(missing, exist_ok=True)
    tensors = load_file(os.path.join(src, "model.safetensors"))
    del tensors["model.layers.1.block_sparse_moe.experts.2.w3.weight"]
    save_file(tensors, os.path.join(missing, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(src, "config.json")) as f, open(os.path.join(missing, "config.json"), "w") as g:
        g.write(f.read())
    shape = dict(SHAPE, intermediate_size=12)
    refused_cfgs = {
        "mixtral_jitter": MixtralConfig(**shape, **rope_kwargs(THETA), **dict(MIXTRAL, router_jitter_noise=0.1)),
        "qwen2_moe": Qwen2MoeConfig(**shape, **rope_kwargs(THETA), num_experts=4, num_experts_per_tok=2,
                                    shared_expert_intermediate_size=12),
    }
    for name, cfg in refused_cfgs.items():
        folder = os.path.join(out_dir, "hf_refused", "%s_%s" % (PREFIX, name))
        cfg.save_pretrained(folder)
        print("refused config %s" % folder)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures"))
    ap.add_argument("--only-mixtral", action="store_true", help="write only the mixture-of-experts fixtures (5.x)")
    args = ap.parse_args()
    if MAJOR >= 5:
        write_mixtral(args.out_dir)
    if args.only_mixtral:
        return
    for i, (name, extra) in enumerate(models().items()):
        write_model(name, extra, 300 + 10 * MAJOR + i, args.out_dir)
    for name, cfg in refused().items():
        folder = os.path.join(args.out_dir, "hf_refused", "%s_%s" % (PREFIX, name))
        cfg.save_pretrained(folder)
        print("refused config %s" % folder)


if __name__ == "__main__":
    main()
