#!/usr/bin/python3
"""bench_torch_train.py: PyTorch eager training throughput, the baseline of
tests/bench/bench_train.c.  Same Llama shape as the C bench (random weights, lm_head tied
to the embedding), forward + backward + AdamW per step, on the given thread count, in
fp32 or with bf16 autocast (torch.autocast("cpu", torch.bfloat16) around the forward and
the loss, fp32 master weights and AdamW: PyTorch's mixed-precision recipe on CPU).
Prints one JSON line: {"tok_per_s": median, "step_s": [..], "precision": ..,
"malloc": "tcmalloc"|"glibc", "omp_wait_policy": ..} (the last two from the environment
the caller set: LD_PRELOAD, OMP_WAIT_POLICY).
    /usr/bin/python3 tools/bench_torch_train.py --dim 288 --layers 6 --heads 6 \
        --kv-heads 6 --hidden 768 --vocab 32000 --batch 4 --seq 256 --steps 4 --threads 2 \
        --precision bf16
"""
import argparse, contextlib, json, os, statistics, sys, time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_tiny_model import Tiny  # noqa: E402  (the plain-torch Llama used for the demo model)


def main():
    ap = argparse.ArgumentParser()
    for k, v in [("dim", 288), ("layers", 6), ("heads", 6), ("kv-heads", 6), ("hidden", 768),
                 ("vocab", 32000), ("batch", 4), ("seq", 256), ("steps", 4), ("threads", 2)]:
        ap.add_argument("--" + k, type=int, default=v)
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    cfg = dict(hidden_size=a.dim, intermediate_size=a.hidden, num_hidden_layers=a.layers,
               num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
               head_dim=a.dim // a.heads, vocab_size=a.vocab, rms_norm_eps=1e-5,
               rope_theta=10000.0)
    model = Tiny(cfg)
    params = list(model.p.values())
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.0)
    x = torch.randint(0, a.vocab, (a.batch, a.seq))
    y = torch.randint(0, a.vocab, (a.batch, a.seq))
    amp = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.precision == "bf16" \
        else contextlib.nullcontext
    times = []
    for step in range(a.steps + 1):
        t0 = time.perf_counter()
        with amp():
            loss = F.cross_entropy(model(x).view(-1, a.vocab), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step > 0:   # the first step allocates optimizer state
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(json.dumps({"tok_per_s": a.batch * a.seq / med, "step_s": times,
                      "precision": a.precision,
                      "malloc": "tcmalloc" if "tcmalloc" in os.environ.get("LD_PRELOAD", "")
                      else "glibc",
                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")}))


if __name__ == "__main__":
    main()
