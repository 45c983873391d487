#!/usr/bin/python3
"""gen_tiny_model.py: the bundled demo's self-made inputs, written to data/demo/.

  data/demo/train.txt              procedurally generated short stories (seeded grammar)
  data/demo/model/                 a tiny Llama in Hugging Face layout:
     config.json, model.safetensors (BF16), tokenizer.model (SentencePiece BPE,
     byte fallback), tokenizer.json (the same vocabulary in HF form), tokenizer_config.json

The model is briefly pretrained in plain torch on the text, so the demo's
continued pretraining (BF16 warmup, then HiF8 QAT) starts from a model whose
activations have structure.  Run with Debian's interpreter:
    /usr/bin/python3 tools/gen_tiny_model.py [--out data/demo]
Needs torch and sentencepiece; everything is seeded (the output is reproducible
on one machine; the committed copy is the reference).
"""
import argparse, json, math, os, random, struct, sys

import numpy as np
import torch
import torch.nn.functional as F

CFG = dict(hidden_size=48, intermediate_size=128, num_hidden_layers=8, num_attention_heads=4,
           num_key_value_heads=2, head_dim=12, vocab_size=512, max_position_embeddings=256,
           rms_norm_eps=1e-5, rope_theta=10000.0)

NAMES = ["Tom", "Mia", "Ben", "Lily", "Sam", "Zoe", "Max", "Ana", "Leo", "Ivy"]
ANIMALS = ["cat", "dog", "bird", "fox", "frog", "duck", "bear", "fish", "owl", "mouse"]
PLACES = ["park", "garden", "forest", "river", "house", "hill", "beach", "farm", "town", "lake"]
THINGS = ["ball", "kite", "box", "hat", "apple", "cake", "book", "boat", "star", "shell"]
ADJS = ["big", "small", "red", "blue", "happy", "sad", "old", "shiny", "soft", "funny"]
VERBS = ["found", "saw", "lost", "made", "liked", "wanted", "took", "gave", "hid", "painted"]
FEEL = ["happy", "sad", "tired", "brave", "scared", "proud", "calm", "hungry", "sleepy", "glad"]


def story(rng):
    n, a, p = rng.choice(NAMES), rng.choice(ANIMALS), rng.choice(PLACES)
    t, adj, v = rng.choice(THINGS), rng.choice(ADJS), rng.choice(VERBS)
    s = [f"Once upon a time, {n} went to the {p}.",
         f"{n} {v} a {adj} {t} near a {a}.",
         f"The {a} was {rng.choice(FEEL)} and said, \"Can I play with the {t}?\"",
         f"{n} said, \"Yes, let us play!\""]
    for _ in range(rng.randint(1, 4)):
        s.append(rng.choice([
            f"They ran to the {rng.choice(PLACES)} with the {t}.",
            f"The {a} {rng.choice(VERBS)} a {rng.choice(ADJS)} {rng.choice(THINGS)}.",
            f"{n} felt {rng.choice(FEEL)}.",
            f"It was {rng.randint(2, 9)} o'clock and the sun was {rng.choice(ADJS)}.",
            f"\"Look, a {rng.choice(ADJS)} {rng.choice(ANIMALS)}!\" said {n}."]))
    s.append(f"At the end of the day, {n} and the {a} were {rng.choice(FEEL)}. The end.")
    return " ".join(s)


def write_safetensors(path, tensors):
    """tensors: name -> float32 numpy array; stored as BF16 (round to nearest even)."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        u = a.view(np.uint32).astype(np.uint64)
        b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
        header[name] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    os.replace(path + ".tmp", path)


def hf_tokenizer_json(sp):
    """The SentencePiece BPE vocabulary as a Llama-2 style tokenizer.json."""
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    merges = []
    for piece, pid in vocab.items():
        if pid < 3 + 256 or len(piece) < 2:
            continue
        for k in range(1, len(piece)):
            l, r = piece[:k], piece[k:]
            if l in vocab and r in vocab:
                merges.append((pid, vocab[l], vocab[r], f"{l} {r}"))
    merges.sort()
    special = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [m[3] for m in merges]},
    }


class Tiny(torch.nn.Module):
    """Plain-torch Llama (RMSNorm, half-split RoPE, GQA, SwiGLU, tied lm_head)."""

    def __init__(self, c):
        super().__init__()
        C, Hd, H, KV, FF = (c["hidden_size"], c["head_dim"], c["num_attention_heads"],
                            c["num_key_value_heads"], c["intermediate_size"])
        self.c = c
        lin = lambda o, i: torch.nn.Parameter(torch.randn(o, i) * 0.02)
        self.p = {}
        self.p["model.embed_tokens.weight"] = lin(c["vocab_size"], C)
        self.p["model.norm.weight"] = torch.nn.Parameter(torch.ones(C))
        for l in range(c["num_hidden_layers"]):
            pre = f"model.layers.{l}."
            self.p[pre + "input_layernorm.weight"] = torch.nn.Parameter(torch.ones(C))
            self.p[pre + "post_attention_layernorm.weight"] = torch.nn.Parameter(torch.ones(C))
            for n, o, i in [("self_attn.q_proj", H * Hd, C), ("self_attn.k_proj", KV * Hd, C),
                            ("self_attn.v_proj", KV * Hd, C), ("self_attn.o_proj", C, H * Hd),
                            ("mlp.gate_proj", FF, C), ("mlp.up_proj", FF, C), ("mlp.down_proj", C, FF)]:
                self.p[pre + n + ".weight"] = lin(o, i)
        self.plist = torch.nn.ParameterList(list(self.p.values()))

    def forward(self, idx):
        c, p = self.c, self.p
        B, T = idx.shape
        H, KV, Hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, Hd, 2, dtype=torch.float64) / Hd))
        ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
        cos, sin = torch.cat([ang.cos()] * 2, -1).float(), torch.cat([ang.sin()] * 2, -1).float()
        rot = lambda x: torch.cat([-x[..., Hd // 2:], x[..., :Hd // 2]], -1)
        norm = lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["rms_norm_eps"]) * w
        x = p["model.embed_tokens.weight"][idx]
        for l in range(c["num_hidden_layers"]):
            pre = f"model.layers.{l}."
            h = norm(x, p[pre + "input_layernorm.weight"])
            q = (h @ p[pre + "self_attn.q_proj.weight"].T).view(B, T, H, Hd).transpose(1, 2)
            k = (h @ p[pre + "self_attn.k_proj.weight"].T).view(B, T, KV, Hd).transpose(1, 2)
            v = (h @ p[pre + "self_attn.v_proj.weight"].T).view(B, T, KV, Hd).transpose(1, 2)
            q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
            k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
            att = (q @ k.transpose(-1, -2)) / math.sqrt(Hd)
            att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
            a = att.softmax(-1) @ v
            x = x + a.transpose(1, 2).reshape(B, T, H * Hd) @ p[pre + "self_attn.o_proj.weight"].T
            h = norm(x, p[pre + "post_attention_layernorm.weight"])
            g = F.silu(h @ p[pre + "mlp.gate_proj.weight"].T) * (h @ p[pre + "mlp.up_proj.weight"].T)
            x = x + g @ p[pre + "mlp.down_proj.weight"].T
        x = norm(x, p["model.norm.weight"])
        return x @ p["model.embed_tokens.weight"].T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="data/demo")
    ap.add_argument("--stories", type=int, default=400)
    ap.add_argument("--pretrain-steps", type=int, default=300)
    args = ap.parse_args()
    rng = random.Random(1234)
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    mdir = os.path.join(args.out, "model")
    os.makedirs(mdir, exist_ok=True)

    text = "\n\n".join(story(rng) for _ in range(args.stories)) + "\n"
    with open(os.path.join(args.out, "train.txt"), "w") as f:
        f.write(text)

    import sentencepiece as spm  # here: bench_torch_train.py imports Tiny without it

    prefix = os.path.join(mdir, "tokenizer")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text.split("\n\n")), model_prefix=prefix, model_type="bpe",
        vocab_size=CFG["vocab_size"], byte_fallback=True, character_coverage=1.0,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, add_dummy_prefix=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False, split_digits=True,
        num_threads=1, minloglevel=2)
    os.remove(prefix + ".vocab")
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    with open(os.path.join(mdir, "tokenizer.json"), "w") as f:
        json.dump(hf_tokenizer_json(sp), f, ensure_ascii=False, indent=1)
    with open(os.path.join(mdir, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
                   "eos_token": "</s>", "unk_token": "<unk>", "tokenizer_class": "LlamaTokenizer",
                   "model_max_length": CFG["max_position_embeddings"]}, f, indent=2)

    ids = []
    for doc in text.split("\n\n"):
        ids += [1] + sp.encode(doc) + [2]
    data = torch.tensor(ids, dtype=torch.long)
    model = Tiny(CFG)
    opt = torch.optim.AdamW(list(model.p.values()), lr=3e-3, weight_decay=0.0)
    B, T = 16, 64
    for step in range(args.pretrain_steps):
        ix = torch.randint(0, len(data) - T - 1, (B,))
        xb = torch.stack([data[i:i + T] for i in ix])
        yb = torch.stack([data[i + 1:i + T + 1] for i in ix])
        loss = F.cross_entropy(model(xb).view(-1, CFG["vocab_size"]), yb.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == args.pretrain_steps - 1:
            print(f"pretrain step {step}: loss {loss.item():.3f}", file=sys.stderr)

    write_safetensors(os.path.join(mdir, "model.safetensors"),
                      {k: v.detach().numpy() for k, v in model.p.items()})
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **CFG,
           "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
           "tie_word_embeddings": True, "rope_scaling": None, "bos_token_id": 1,
           "eos_token_id": 2, "torch_dtype": "bfloat16", "initializer_range": 0.02}
    with open(os.path.join(mdir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    print(f"wrote {args.out}: {len(text)} bytes of text, {len(ids)} tokens, "
          f"{sum(v.numel() for v in model.p.values())} parameters", file=sys.stderr)


if __name__ == "__main__":
    main()
