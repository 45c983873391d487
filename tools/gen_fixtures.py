#!/usr/bin/python3
"""gen_fixtures.py: tiny random HF checkpoints + reference logits for the C tests.

Run with Debian's interpreter:  /usr/bin/python3 tools/gen_fixtures.py [OUT_DIR]
(default data/fixtures).  Needs torch (python3-torch); transformers is NOT used:
each architecture is written here independently in plain torch, in float64,
from the definitions in transformers' modeling_llama / mistral / qwen2 and the
openPangu-Embedded model card (q/k/v/o bias when config "bias" is true).

Each fixture is a directory in HF layout:
  config.json
  model.safetensors  (or model-0000k-of-0000n.safetensors + model.safetensors.index.json)
  ref.safetensors    reference: "tokens" I32 [B, T], "logits" F32 [B, T, V]
                     __metadata__ {"format": "qatscope-fixture", "version": "1"}
The reference is computed from the weights exactly as stored (BF16/F16 storage
is rounded first), so the C engine's fp32 logits must match to 1e-4.

To extend (e.g. gradients for the trainer): add tensors to `ref` in
write_fixture() ("grad.<hf name>", "loss", ...) and bump "version".

Training references (grad.safetensors, next to ref.safetensors; version "1"):
  "targets" I32 [B, T]      next-token targets (separate generator: the
                            weights and ref.safetensors are unchanged)
  "loss" F32 [1]            mean cross-entropy of ref's tokens vs targets
  "grad.<hf name>" F32      d loss / d weight, float64 autograd
  "adamw.loss" F32 [10]     loss before each of 10 AdamW steps (TRAIN_HP below,
                            global-norm clipping), float64
"""
import json
import math
import os
import struct
import sys

import torch

FIXTURE_VERSION = "1"
ST_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
             torch.int32: "I32"}

# name -> (config.json, storage dtype, shards, batch, seq)
FIXTURES = {
    "llama_gqa_f32": (dict(
        architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=32,
        intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=64, max_position_embeddings=64, rms_norm_eps=1e-5,
        rope_theta=10000.0, rope_scaling=None, hidden_act="silu", tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2), torch.float32, 1, 2, 12),
    "llama3_bias_tied_bf16": (dict(
        architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=32,
        intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, head_dim=16, vocab_size=48, max_position_embeddings=64,
        rms_norm_eps=1e-6, rope_theta=500000.0, attention_bias=True,
        rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                          high_freq_factor=4.0, original_max_position_embeddings=16),
        hidden_act="silu", tie_word_embeddings=True, bos_token_id=1, eos_token_id=[2, 3]),
        torch.bfloat16, 1, 2, 12),
    "mistral_linear_f16": (dict(
        architectures=["MistralForCausalLM"], model_type="mistral", hidden_size=32,
        intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=64, max_position_embeddings=128, sliding_window=32,
        rms_norm_eps=1e-5, rope_theta=10000.0,
        rope_scaling=dict(type="linear", factor=2.0), hidden_act="silu",
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=2), torch.float16, 1, 2, 12),
    "qwen2_bias_tied_f32": (dict(
        architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=32,
        intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=64, max_position_embeddings=64, rms_norm_eps=1e-6,
        rope_theta=1000000.0, use_sliding_window=False, hidden_act="silu",
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=5), torch.float32, 1, 2, 12),
    "pangu_bias_sharded_f32": (dict(
        architectures=["PanguEmbeddedForCausalLM"], model_type="PanguEmbedded", hidden_size=32,
        intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=64, max_position_embeddings=64, rms_norm_eps=1e-5,
        rope_theta=4000000.0, bias=True, hidden_act="silu", tie_word_embeddings=True,
        bos_token_id=1, eos_token_id=2), torch.float32, 2, 2, 12),
}


def biases(cfg):
    """(qkv_bias, o_bias) as each architecture defines them."""
    arch = cfg["architectures"][0]
    if arch == "Qwen2ForCausalLM":
        return True, False
    if arch == "PanguEmbeddedForCausalLM":
        return cfg.get("bias", False), cfg.get("bias", False)
    b = cfg.get("attention_bias", False)
    return b, b


def make_weights(cfg, gen):
    C, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H, KVH = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", C // H)
    qkv_b, o_b = biases(cfg)

    def rnd(*shape, std=0.3):
        return torch.randn(*shape, generator=gen, dtype=torch.float32) * std

    w = {"model.embed_tokens.weight": rnd(V, C, std=1.0)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = 1.0 + rnd(C, std=0.1)
        w[p + "self_attn.q_proj.weight"] = rnd(H * hd, C)
        w[p + "self_attn.k_proj.weight"] = rnd(KVH * hd, C)
        w[p + "self_attn.v_proj.weight"] = rnd(KVH * hd, C)
        w[p + "self_attn.o_proj.weight"] = rnd(C, H * hd)
        if qkv_b:
            w[p + "self_attn.q_proj.bias"] = rnd(H * hd, std=0.1)
            w[p + "self_attn.k_proj.bias"] = rnd(KVH * hd, std=0.1)
            w[p + "self_attn.v_proj.bias"] = rnd(KVH * hd, std=0.1)
        if o_b:
            w[p + "self_attn.o_proj.bias"] = rnd(C, std=0.1)
        w[p + "post_attention_layernorm.weight"] = 1.0 + rnd(C, std=0.1)
        w[p + "mlp.gate_proj.weight"] = rnd(F, C)
        w[p + "mlp.up_proj.weight"] = rnd(F, C)
        w[p + "mlp.down_proj.weight"] = rnd(C, F)
    w["model.norm.weight"] = 1.0 + rnd(C, std=0.1)
    if not cfg.get("tie_word_embeddings", True):
        w["lm_head.weight"] = rnd(V, C)
    return w


def inv_freq(cfg, hd):
    theta = cfg.get("rope_theta", 10000.0)
    f = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    rs = cfg.get("rope_scaling")
    if not rs:
        return f
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        return f / rs["factor"]
    assert kind == "llama3"
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    wavelen = 2 * math.pi / f
    out = torch.where(wavelen > old / lo, f / factor, f)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = (wavelen >= old / hi) & (wavelen <= old / lo)
    return torch.where(medium, smoothed, out)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def forward(cfg, w, tokens):
    """Reference logits [B, T, V] in float64."""
    C, H, KVH = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", C // H)
    eps = cfg["rms_norm_eps"]
    B, T = tokens.shape
    w = {k: v.double() for k, v in w.items()}
    x = w["model.embed_tokens.weight"][tokens]
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq(cfg, hd)[None, :]
    cos = torch.cat((ang.cos(), ang.cos()), -1)
    sin = torch.cat((ang.sin(), ang.sin()), -1)
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."

        def lin(name, inp):
            y = inp @ w[p + name + ".weight"].T
            b = w.get(p + name + ".bias")
            return y + b if b is not None else y

        h = rmsnorm(x, w[p + "input_layernorm.weight"], eps)
        q = lin("self_attn.q_proj", h).view(B, T, H, hd).transpose(1, 2)
        k = lin("self_attn.k_proj", h).view(B, T, KVH, hd).transpose(1, 2)
        v = lin("self_attn.v_proj", h).view(B, T, KVH, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KVH, dim=1)
        v = v.repeat_interleave(H // KVH, dim=1)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd) + mask, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, H * hd)
        x = x + lin("self_attn.o_proj", y)
        h = rmsnorm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = lin("mlp.gate_proj", h)
        x = x + lin("mlp.down_proj", torch.nn.functional.silu(g) * lin("mlp.up_proj", h))
    x = rmsnorm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T


TRAIN_HP = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, clip=1.0, steps=10)


def write_grad_ref(d, cfg, w, tokens, seed):
    """grad.safetensors: loss, float64 gradients and 10 AdamW steps (see the top)."""
    gen = torch.Generator().manual_seed(seed + 7777)
    targets = torch.randint(0, cfg["vocab_size"], tokens.shape, generator=gen, dtype=torch.int64)
    V = cfg["vocab_size"]

    def loss_of(params):
        return torch.nn.functional.cross_entropy(forward(cfg, params, tokens).reshape(-1, V),
                                                 targets.reshape(-1))

    p = {k: v.double().clone().requires_grad_(True) for k, v in w.items()}
    loss = loss_of(p)
    loss.backward()
    ref = {"targets": targets.to(torch.int32), "loss": loss.detach().float().reshape(1)}
    for k, v in p.items():
        ref["grad." + k] = v.grad.float()
    p = {k: v.double().clone().requires_grad_(True) for k, v in w.items()}
    hp = TRAIN_HP
    opt = torch.optim.AdamW(list(p.values()), lr=hp["lr"], betas=hp["betas"], eps=hp["eps"],
                            weight_decay=hp["weight_decay"], foreach=False)
    losses = []
    for _ in range(hp["steps"]):
        opt.zero_grad()
        loss = loss_of(p)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), hp["clip"])
        opt.step()
        losses.append(loss.item())
    ref["adamw.loss"] = torch.tensor(losses, dtype=torch.float32)
    write_safetensors(os.path.join(d, "grad.safetensors"), ref,
                      {"format": "qatscope-grad-fixture", "version": "1"})


def write_safetensors(path, tensors, meta):
    """Our own writer of the format (header JSON + aligned raw little-endian data)."""
    header, blobs, off = {"__metadata__": meta}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype in (torch.bfloat16,) \
            else t.numpy().tobytes()
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    os.replace(path + ".tmp", path)


def write_fixture(out_dir, name, cfg, dtype, shards, B, T, seed):
    gen = torch.Generator().manual_seed(seed)
    w = {k: v.to(dtype) for k, v in make_weights(cfg, gen).items()}
    tokens = torch.randint(0, cfg["vocab_size"], (B, T), generator=gen, dtype=torch.int64)
    logits = forward(cfg, w, tokens)
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    cfg = dict(cfg, torch_dtype={torch.float32: "float32", torch.bfloat16: "bfloat16",
                                 torch.float16: "float16"}[dtype])
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    names = list(w)
    if shards == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), w, {"format": "pt"})
    else:
        per = (len(names) + shards - 1) // shards
        wmap = {}
        for s in range(shards):
            fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: w[n] for n in names[s * per:(s + 1) * per]}
            write_safetensors(os.path.join(d, fn), part, {"format": "pt"})
            wmap.update({n: fn for n in part})
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": wmap}, f, indent=1)
    write_grad_ref(d, cfg, w, tokens, seed)
    ref = {"tokens": tokens.to(torch.int32), "logits": logits.to(torch.float32)}
    write_safetensors(os.path.join(d, "ref.safetensors"), ref,
                      {"format": "qatscope-fixture", "version": FIXTURE_VERSION})
    print(f"{name}: B={B} T={T} V={cfg['vocab_size']} max|logit|={logits.abs().max():.3f}")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "data/fixtures"
    torch.manual_seed(0)
    for i, (name, (cfg, dtype, shards, B, T)) in enumerate(sorted(FIXTURES.items())):
        write_fixture(out_dir, name, cfg, dtype, shards, B, T, seed=1234 + i)


if __name__ == "__main__":
    main()
