#!/usr/bin/python3
"""bench_torch_scale.py: PyTorch's forward on the token batches bench_scale feeds
our model (the baseline of tests/bench/bench_scale.c), on the same weights.

usage: /usr/bin/python3 tools/bench_torch_scale.py MODEL_DIR BATCHES REPS THREADS

MODEL_DIR: an HF Llama-family checkpoint (config.json + model.safetensors; one
file, F32/BF16) such as `qatscope init` writes; read here with a small
safetensors reader (this torch has no safetensors package).  The model is the
HF eager Llama forward in plain torch: RMSNorm in fp32, RoPE rotate_half
(rope_theta from the config), grouped-query causal softmax attention, SwiGLU,
q/k/v/o biases when the config has them, tied or untied head.  Weights are
kept in bf16 (the checkpoint's precision; no fp32 copy) and the forward runs
under torch.autocast("cpu", torch.bfloat16) and torch.inference_mode(), with
torch.set_num_threads(THREADS): how PyTorch's CPU documentation runs bf16
inference.  The lm_head runs only on the rows bench_scale scores (each
sequence's last real token), as our eval does.

BATCHES: little-endian int32 words: n_batches, then per batch B, T, B*T tokens
(row-major, right-padded), B row indices (the row of each sequence whose
logits are wanted).

Prints one line per measurement:
  setup torch <version> threads <n> tcmalloc <yes|no> omp_wait_policy <value>
  torch bf16 <median seconds per pass over all batches> <tokens/s>
(tokens = the B*T tokens of every batch, padding included, as bench_scale counts
ours).  Environment (LD_PRELOAD, OMP_WAIT_POLICY) is set by the caller.
"""
import json
import os
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def load_safetensors(path):
    """{name: bf16 tensor}, each read straight from the file (no mapping kept)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    base, out = 8 + n, {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        if t["dtype"] == "BF16":
            raw = np.fromfile(path, dtype="<i2", count=(e - b) // 2, offset=base + b)
            arr = torch.from_numpy(raw).view(torch.bfloat16)
        elif t["dtype"] == "F32":
            raw = np.fromfile(path, dtype="<f4", count=(e - b) // 4, offset=base + b)
            arr = torch.from_numpy(raw).to(torch.bfloat16)
        else:
            raise SystemExit("bench_torch_scale: %s: dtype %s (want BF16 or F32)" % (name, t["dtype"]))
        out[name] = arr.reshape(t["shape"])
    return out


def rms(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(w.dtype) * w


def rot(x, cos, sin):
    h = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., h:], x[..., :h]), -1) * sin


class Model:
    def __init__(self, cfg, w):
        self.cfg, self.w = cfg, w
        self.L = cfg["num_hidden_layers"]
        self.H = cfg["num_attention_heads"]
        self.KVH = cfg.get("num_key_value_heads", self.H)
        self.hd = cfg.get("head_dim", cfg["hidden_size"] // self.H)
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        theta = cfg.get("rope_theta", 10000.0)
        self.inv = 1.0 / theta ** (torch.arange(0, self.hd, 2).float() / self.hd)
        self.head = w.get("lm_head.weight", w["model.embed_tokens.weight"])

    def lin(self, x, name):
        b = self.w.get(name + ".bias")
        return F.linear(x, self.w[name + ".weight"], b)

    def forward(self, tok, rows):
        w, H, KVH, hd = self.w, self.H, self.KVH, self.hd
        B, T = tok.shape
        x = w["model.embed_tokens.weight"][tok]
        ang = torch.arange(T).float()[:, None] * self.inv[None, :]
        cos = torch.cat((ang.cos(),) * 2, -1).to(x.dtype)
        sin = torch.cat((ang.sin(),) * 2, -1).to(x.dtype)
        mask = torch.full((T, T), float("-inf")).triu(1)
        for l in range(self.L):
            p = "model.layers.%d." % l
            h = rms(x, w[p + "input_layernorm.weight"], self.eps)
            q = self.lin(h, p + "self_attn.q_proj").view(B, T, H, hd).transpose(1, 2)
            k = self.lin(h, p + "self_attn.k_proj").view(B, T, KVH, hd).transpose(1, 2)
            v = self.lin(h, p + "self_attn.v_proj").view(B, T, KVH, hd).transpose(1, 2)
            q, k = rot(q, cos, sin), rot(k, cos, sin)
            k = k.repeat_interleave(H // KVH, dim=1)
            v = v.repeat_interleave(H // KVH, dim=1)
            att = (q @ k.transpose(-1, -2)).float() * hd ** -0.5 + mask
            y = torch.softmax(att, -1).to(q.dtype) @ v
            x = x + self.lin(y.transpose(1, 2).reshape(B, T, H * hd), p + "self_attn.o_proj")
            h = rms(x, w[p + "post_attention_layernorm.weight"], self.eps)
            x = x + self.lin(F.silu(self.lin(h, p + "mlp.gate_proj")) * self.lin(h, p + "mlp.up_proj"),
                             p + "mlp.down_proj")
        last = x[torch.arange(B), rows]
        return F.linear(rms(last, w["model.norm.weight"], self.eps), self.head)


def read_batches(path):
    words = np.fromfile(path, dtype="<i4")
    n, i, out = int(words[0]), 1, []
    for _ in range(n):
        B, T = int(words[i]), int(words[i + 1])
        i += 2
        tok = torch.from_numpy(words[i:i + B * T].astype(np.int64)).view(B, T)
        i += B * T
        rows = torch.from_numpy(words[i:i + B].astype(np.int64))
        i += B
        out.append((tok, rows))
    return out


def main():
    model_dir, batches_path, reps, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    model = Model(cfg, load_safetensors(os.path.join(model_dir, "model.safetensors")))
    batches = read_batches(batches_path)
    tokens = sum(t.numel() for t, _ in batches)
    tc = "yes" if "tcmalloc" in os.environ.get("LD_PRELOAD", "") else "no"
    print("setup torch %s threads %d tcmalloc %s omp_wait_policy %s" %
          (torch.__version__, torch.get_num_threads(), tc, os.environ.get("OMP_WAIT_POLICY", "default")),
          flush=True)
    times = []
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        for tok, rows in batches[:1]:
            model.forward(tok, rows)   # warm-up
        for _ in range(reps):
            t0 = time.perf_counter()
            for tok, rows in batches:
                model.forward(tok, rows)
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print("torch bf16 %.6f %.1f" % (med, tokens / med), flush=True)


if __name__ == "__main__":
    main()
