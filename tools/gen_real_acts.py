#!/usr/bin/python3
"""gen_real_acts.py: real MLP activations of a real tiny Llama while it trains.

Until the C trainer produces runs, this gives the quantizers real (not synthetic)
tensors: it loads ../shared/models/stories260K (HF layout, read with a minimal
safetensors parser), fine-tunes it with AdamW on TinyStories text, and streams,
for every step, the input activation and the weight of every MLP gate/up/down
projection as they are at that step's forward pass.  Pipe it into
bench_quant, which runs the quantizer set + saturation detector over the stream
and writes a run dir:

    /usr/bin/python3 tools/gen_real_acts.py --steps 150 \
        | bin/bench_quant --acts - --run-dir /tmp/qrun_real --warmup 50 --estimator most-recent

Stream format (little endian), consumed by bench_quant.c:
    b"QSACT1\\0\\0", u32 n_quant, u32 n_steps,
    n_quant x (u32 name_bytes, name, u64 n_elems),
    n_steps x n_quant x f32[n_elems]   (quantizer order as in the header)

Deterministic for a given seed.  Debian's /usr/bin/python3 has torch + numpy.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (hdr_len,) = struct.unpack("<Q", data[:8])
    hdr = json.loads(data[8 : 8 + hdr_len])
    base = 8 + hdr_len
    out = {}
    for name, meta in hdr.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] != "F32":
            raise SystemExit(f"{path}: tensor {name}: expected F32, found {meta['dtype']}")
        a, b = meta["data_offsets"]
        arr = np.frombuffer(data[base + a : base + b], dtype="<f4").reshape(meta["shape"])
        out[name] = torch.tensor(arr.copy())
    return out


def load_tok512(path):
    """llama2.c tokenizer: i32 max_len, then per token f32 score, i32 len, bytes."""
    with open(path, "rb") as f:
        data = f.read()
    off = 4
    vocab, scores = [], []
    while off < len(data):
        score, n = struct.unpack_from("<fi", data, off)
        off += 8
        vocab.append(data[off : off + n].decode("utf-8", "replace"))
        scores.append(score)
        off += n
    return vocab, scores


def encode(text, vocab, scores, lookup):
    """llama2.c BPE: characters (byte fallback +3), then best-score merges."""
    ids = []
    for ch in text:
        if ch in lookup:
            ids.append(lookup[ch])
        else:
            ids.extend(b + 3 for b in ch.encode("utf-8"))
    while True:
        best, best_i, best_id = -1e30, -1, -1
        for i in range(len(ids) - 1):
            tid = lookup.get(vocab[ids[i]] + vocab[ids[i + 1]])
            if tid is not None and scores[tid] > best:
                best, best_i, best_id = scores[tid], i, tid
        if best_i < 0:
            return ids
        ids[best_i : best_i + 2] = [best_id]


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, theta):
    # HF layout: rotate_half over the two halves of each head
    t, hd = x.shape[-2], x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    ang = torch.outer(torch.arange(t, dtype=torch.float32), inv)
    cos = torch.cat([ang.cos(), ang.cos()], -1)
    sin = torch.cat([ang.sin(), ang.sin()], -1)
    x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def forward(p, cfg, tokens, taps):
    n_h, n_kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    b, t = tokens.shape
    x = p["model.embed_tokens.weight"][tokens]
    mask = torch.full((t, t), float("-inf")).triu(1)
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        h = rms_norm(x, p[pre + "input_layernorm.weight"], eps)
        q = (h @ p[pre + "self_attn.q_proj.weight"].T).view(b, t, n_h, hd).transpose(1, 2)
        k = (h @ p[pre + "self_attn.k_proj.weight"].T).view(b, t, n_kv, hd).transpose(1, 2)
        v = (h @ p[pre + "self_attn.v_proj.weight"].T).view(b, t, n_kv, hd).transpose(1, 2)
        q, k = rope(q, theta), rope(k, theta)
        k = k.repeat_interleave(n_h // n_kv, 1)
        v = v.repeat_interleave(n_h // n_kv, 1)
        att = torch.softmax(q @ k.transpose(-1, -2) / hd**0.5 + mask, -1)
        o = (att @ v).transpose(1, 2).reshape(b, t, n_h * hd)
        x = x + o @ p[pre + "self_attn.o_proj.weight"].T
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"], eps)
        taps[f"layers.{i}.mlp.gate_proj.input"] = h
        taps[f"layers.{i}.mlp.up_proj.input"] = h
        g = h @ p[pre + "mlp.gate_proj.weight"].T
        u = h @ p[pre + "mlp.up_proj.weight"].T
        a = torch.nn.functional.silu(g) * u
        taps[f"layers.{i}.mlp.down_proj.input"] = a
        x = x + a @ p[pre + "mlp.down_proj.weight"].T
    x = rms_norm(x, p["model.norm.weight"], eps)
    return x @ p["model.embed_tokens.weight"].T


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="../shared/models/stories260K")
    ap.add_argument("--text", default="../shared/corpora/tinystories-sample/tinystories_train_head.txt")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    cfg = json.load(open(os.path.join(args.model, "config.json")))
    p = load_safetensors(os.path.join(args.model, "model.safetensors"))
    vocab, scores = load_tok512(os.path.join(args.model, "llama2c", "tok512.bin"))
    lookup = {s: i for i, s in enumerate(vocab)}
    text = open(args.text, encoding="utf-8").read()[:60000]
    ids = []
    for story in text.split("\n\n"):
        ids += [1] + encode(" " + story.strip(), vocab, scores, lookup)
    data = torch.tensor(ids, dtype=torch.long)
    params = {k: v.requires_grad_(True) for k, v in p.items() if k != "lm_head.weight"}
    opt = torch.optim.AdamW(params.values(), lr=args.lr, weight_decay=0.0)
    names = []
    for i in range(cfg["num_hidden_layers"]):
        for proj in ("gate_proj", "up_proj", "down_proj"):
            names += [f"layers.{i}.mlp.{proj}.input", f"layers.{i}.mlp.{proj}.weight"]
    bt = args.batch * args.seq
    sizes = []
    for n in names:
        if n.endswith(".weight"):
            w = p["model." + n]
            sizes.append(w.numel())
        else:
            width = cfg["intermediate_size"] if "down_proj" in n else cfg["hidden_size"]
            sizes.append(bt * width)
    out = sys.stdout.buffer
    out.write(b"QSACT1\0\0" + struct.pack("<II", len(names), args.steps))
    for n, sz in zip(names, sizes):
        nb = n.encode()
        out.write(struct.pack("<I", len(nb)) + nb + struct.pack("<Q", sz))
    gen = torch.Generator().manual_seed(args.seed)
    for step in range(args.steps):
        starts = torch.randint(0, len(data) - args.seq - 1, (args.batch,), generator=gen)
        x = torch.stack([data[s : s + args.seq] for s in starts])
        y = torch.stack([data[s + 1 : s + args.seq + 1] for s in starts])
        taps = {}
        logits = forward(params, cfg, x, taps)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        for n in names:
            t = params["model." + n] if n.endswith(".weight") else taps[n]
            out.write(t.detach().contiguous().numpy().astype("<f4").tobytes())
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step}: loss {loss.item():.4f}", file=sys.stderr)
    out.flush()


if __name__ == "__main__":
    main()
