#!/usr/bin/python3
"""gen_compare_fixture.py: two tiny models + the statistics `qatscope compare`
must reproduce, computed independently in float64 torch.

Run with Debian's interpreter:  /usr/bin/python3 tools/gen_compare_fixture.py [OUT_DIR]
(default data/fixtures/compare).  Writes
  ref/    config.json + model.safetensors (F32): the reference
  model/  the same architecture, every weight of ref plus N(0, 0.05^2) noise
  expected.json  {"version": 1, "window": W, "stride": S, "ids": [...],
                  "tokens": per scored position {"pos", "kl", "dlogp", "nll",
                  "nll_ref", "top", "top_ref", "margin", "margin_ref"},
                  "summary": {...}}
The windows are Hugging Face's perplexity scheme (model_ppl_compute): windows
of W tokens every S tokens, each scoring the tokens the previous did not; each
window is one float64 forward of gen_fixtures.forward (plain torch, not our
code).  Per position: log-softmax in float64, kl = sum p_ref (logp_ref -
logp_model), dlogp = |logp_ref[top_ref] - logp_model[top_ref]|, the first
argmax of each (torch.argmax) and the gap between its two largest logits
(margin: a top-1 decision closer than the fp32 logit error may flip).
Summary: mean, median and 99th percentile by nearest rank (the ceil(q n)-th
smallest), max of kl; top-1 agreement; mean dlogp; mean nll of both.
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_fixtures  # noqa: E402  (the independent float64 Llama and safetensors writer)

CFG = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=32,
           intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
           num_key_value_heads=2, vocab_size=64, max_position_embeddings=64, rms_norm_eps=1e-5,
           rope_theta=10000.0, rope_scaling=None, hidden_act="silu", tie_word_embeddings=False,
           bos_token_id=1, eos_token_id=2, torch_dtype="float32")
N_IDS, WINDOW, STRIDE, NOISE = 45, 16, 6, 0.05


def windows(n_ids, window, stride):
    """(begin, end, first scored token) as model_ppl_compute walks them."""
    win = min(window, n_ids)
    prev_end, begin = 0, 0
    while prev_end < n_ids:
        end = min(begin + win, n_ids)
        yield begin, end, max(prev_end, begin + 1)
        prev_end = end
        begin += stride


def margin(row):
    top2 = torch.topk(row, 2).values
    return float(top2[0] - top2[1])


def nearest_rank(sorted_vals, q):
    k = math.ceil(q * len(sorted_vals))
    return sorted_vals[max(k, 1) - 1]


def write_model(d, w):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(CFG, f, indent=2)
        f.write("\n")
    gen_fixtures.write_safetensors(os.path.join(d, "model.safetensors"), w, {"format": "pt"})


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "data/fixtures/compare"
    gen = torch.Generator().manual_seed(4242)
    ref = gen_fixtures.make_weights(CFG, gen)
    model = {k: (v + torch.randn(v.shape, generator=gen) * NOISE).float() for k, v in ref.items()}
    ids = torch.randint(0, CFG["vocab_size"], (N_IDS,), generator=gen, dtype=torch.int64)
    toks = []
    for begin, end, first in windows(N_IDS, WINDOW, STRIDE):
        x = ids[begin:end][None]
        lp = torch.log_softmax(gen_fixtures.forward(CFG, model, x)[0], -1)
        lp_ref = torch.log_softmax(gen_fixtures.forward(CFG, ref, x)[0], -1)
        for t in range(first, end):
            j = t - begin - 1  # row predicting ids[t]
            a, r = lp[j], lp_ref[j]
            top, top_ref = int(torch.argmax(a)), int(torch.argmax(r))
            toks.append(dict(pos=t - 1, kl=float((r.exp() * (r - a)).sum()),
                             dlogp=abs(float(r[top_ref] - a[top_ref])),
                             nll=-float(a[ids[t]]), nll_ref=-float(r[ids[t]]), top=top,
                             top_ref=top_ref, margin=margin(a), margin_ref=margin(r)))
    kl = sorted(t["kl"] for t in toks)
    n = len(toks)
    summary = dict(n_scored=n, n_windows=len(list(windows(N_IDS, WINDOW, STRIDE))),
                   kl_mean=sum(kl) / n, kl_median=nearest_rank(kl, 0.5),
                   kl_p99=nearest_rank(kl, 0.99), kl_max=kl[-1],
                   top1_agree=sum(t["top"] == t["top_ref"] for t in toks) / n,
                   dlogp_mean=sum(t["dlogp"] for t in toks) / n,
                   nll=sum(t["nll"] for t in toks) / n, nll_ref=sum(t["nll_ref"] for t in toks) / n)
    write_model(os.path.join(out, "ref"), ref)
    write_model(os.path.join(out, "model"), model)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(dict(version=1, window=WINDOW, stride=STRIDE, ids=ids.tolist(), tokens=toks,
                       summary=summary), f, indent=1)
        f.write("\n")
    print(f"compare fixture: {n} positions, {summary['n_windows']} windows, "
          f"kl mean {summary['kl_mean']:.4f} max {summary['kl_max']:.4f}, "
          f"top-1 agreement {summary['top1_agree']:.3f}")


if __name__ == "__main__":
    main()
