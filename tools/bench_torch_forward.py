#!/usr/bin/python3
"""bench_torch_forward.py: PyTorch eager forward throughput on the same model
shapes as tests/bench/bench_forward.c (the comparison baseline of make bench).

usage: /usr/bin/python3 tools/bench_torch_forward.py DIM LAYERS HEADS HIDDEN VOCAB B T REPS THREADS
Prints one line per precision:  torch fp32 <median seconds> <tokens/s>
The model is a plain-torch Llama block stack (RMSNorm, RoPE rotate_half, causal
softmax attention as HF's eager path (this torch has no SDPA), SwiGLU, untied head) with random weights, under torch.inference_mode().
"""
import statistics
import sys
import time

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, C, H, Fh):
        super().__init__()
        self.H = H
        self.q = torch.nn.Linear(C, C, bias=False)
        self.k = torch.nn.Linear(C, C, bias=False)
        self.v = torch.nn.Linear(C, C, bias=False)
        self.o = torch.nn.Linear(C, C, bias=False)
        self.gate = torch.nn.Linear(C, Fh, bias=False)
        self.up = torch.nn.Linear(C, Fh, bias=False)
        self.down = torch.nn.Linear(Fh, C, bias=False)
        self.n1 = torch.nn.Parameter(torch.ones(C))
        self.n2 = torch.nn.Parameter(torch.ones(C))


def rms(x, w, eps=1e-5):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rot(x, cos, sin):
    h = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., h:], x[..., :h]), -1) * sin


def forward(emb, blocks, norm, head, tok, cos, sin):
    x = emb[tok]
    B, T, C = x.shape
    mask = torch.full((T, T), float("-inf"), dtype=x.dtype).triu(1)
    for b in blocks:
        H = b.H
        hd = C // H
        h = rms(x, b.n1)
        q = b.q(h).view(B, T, H, hd).transpose(1, 2)
        k = b.k(h).view(B, T, H, hd).transpose(1, 2)
        v = b.v(h).view(B, T, H, hd).transpose(1, 2)
        q, k = rot(q, cos, sin), rot(k, cos, sin)
        att = (q @ k.transpose(-1, -2)) * hd ** -0.5 + mask
        y = torch.softmax(att.float(), -1).to(q.dtype) @ v
        x = x + b.o(y.transpose(1, 2).reshape(B, T, C))
        h = rms(x, b.n2)
        x = x + b.down(F.silu(b.gate(h)) * b.up(h))
    return head(rms(x, norm))


def main():
    C, L, H, Fh, V, B, T, reps, threads = (int(a) for a in sys.argv[1:10])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList(Block(C, H, Fh) for _ in range(L))
    head = torch.nn.Linear(C, V, bias=False)
    emb = torch.randn(V, C) * 0.02
    norm = torch.ones(C)
    hd = C // H
    inv = 1.0 / 10000 ** (torch.arange(0, hd, 2).float() / hd)
    ang = torch.arange(T).float()[:, None] * inv[None, :]
    cos, sin = torch.cat((ang.cos(),) * 2, -1), torch.cat((ang.sin(),) * 2, -1)
    tok = torch.randint(0, V, (B, T))
    for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        blocks.to(dt)
        head.to(dt)
        args = (emb.to(dt), blocks, norm.to(dt), head, tok, cos.to(dt), sin.to(dt))
        times = []
        with torch.inference_mode():
            forward(*args)   # warm-up
            for _ in range(reps):
                t0 = time.perf_counter()
                forward(*args)
                times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        print(f"torch {name} {med:.6f} {B * T / med:.1f}", flush=True)


if __name__ == "__main__":
    main()
