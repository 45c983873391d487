#!/usr/bin/python3
"""gen_tok_fixtures.py: reference token ids for the tokenizer tests.

Run from the repository root with Debian's interpreter:
    /usr/bin/python3 tools/gen_tok_fixtures.py [--shared ../shared]

Writes
  tests/data/tok/tiny_bytelevel.json, tests/data/tok/tiny_spm.json
      two self-made tokenizer.json files (merges learned here by a tiny BPE
      trainer on the hand-written TRAIN_TEXT below), so the suite means something
      without ../shared;
  tests/data/tok/fixtures.json
      {"texts": [...], "ids": {name: ["id id ...", ...]}}: ids WITHOUT BOS for
      every text under each tokenizer; texts are a few hundred lines taken from
      ../shared/corpora at generation time plus hand-written tricky strings.

References (independent of the C code):
  gpt2, tiny_bytelevel   our own Python GPT-2 byte-level BPE: bytes_to_unicode,
                         the pre-tokenizer regex run by Python's `re` with \\p{L},
                         \\p{N} expanded to classes from unicodedata, and the
                         classic lowest-rank-pair merge loop of GPT-2's encoder.py;
  llama2_model           sentencepiece (python3-sentencepiece) on tokenizer.model;
  llama2_json, stories260K, tiny_spm
                         our own Python HF BPE: Prepend/Replace "▁" normalizer,
                         character symbols, <0xXX> byte fallback, merges by rank.
Added/special tokens are split out of the text first and each piece in between
is encoded on its own, as HF tokenizers does, for every tokenizer.
"""
import json
import os
import re
import sys
import unicodedata

MS = "\u2581"

# ---------------------------------------------------------------- unicode classes


def _ranges(pred):
    out, start = [], None
    for cp in range(0x110000):
        hit = pred(chr(cp))
        if hit and start is None:
            start = cp
        if not hit and start is not None:
            out.append((start, cp - 1))
            start = None
    return out


def _cls(ranges):
    def esc(cp):
        return "\\U%08x" % cp
    return "".join(esc(a) if a == b else esc(a) + "-" + esc(b) for a, b in ranges)


WHITE_SPACE = [(0x9, 0xD), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
               (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
               (0x3000, 0x3000)]
L = _cls(_ranges(lambda c: unicodedata.category(c).startswith("L")))
N = _cls(_ranges(lambda c: unicodedata.category(c).startswith("N")))
W = _cls(WHITE_SPACE)


def regex_from_hf(pattern):
    """HF/Oniguruma pattern -> Python re pattern with explicit classes."""
    p = pattern
    p = p.replace("[^\\s\\p{L}\\p{N}]", "[^" + W + L + N + "]")
    p = p.replace("[^\\r\\n\\p{L}\\p{N}]", "[^\\r\\n" + L + N + "]")
    p = p.replace("\\p{L}", "[" + L + "]").replace("\\p{N}", "[" + N + "]")
    p = p.replace("(?!\\S)", "(?![^" + W + "])").replace("\\s", "[" + W + "]")
    return re.compile(p)


GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

# ---------------------------------------------------------------- shared helpers


def split_added(text, added):
    """[(is_added, str)] with leftmost-longest matching of the added strings."""
    out, seg, i = [], 0, 0
    by_len = sorted(added, key=len, reverse=True)
    while i < len(text):
        hit = next((a for a in by_len if text.startswith(a, i)), None)
        if hit is None:
            i += 1
            continue
        out.append((False, text[seg:i]))
        out.append((True, hit))
        i += len(hit)
        seg = i
    out.append((False, text[seg:]))
    return out


def bpe_merge(symbols, ranks):
    """GPT-2 encoder.py loop: merge the lowest-ranked adjacent pair, all occurrences."""
    word = list(symbols)
    while len(word) > 1:
        pairs = {(word[k], word[k + 1]) for k in range(len(word) - 1)}
        best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
        if best not in ranks:
            break
        new, k = [], 0
        while k < len(word):
            if k + 1 < len(word) and (word[k], word[k + 1]) == best:
                new.append(word[k] + word[k + 1])
                k += 2
            else:
                new.append(word[k])
                k += 1
        word = new
    return word


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def merge_pairs(merges):
    out = []
    for m in merges:
        out.append(tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)))
    return {p: r for r, p in reversed(list(enumerate(out)))}


class ByteLevelRef:
    def __init__(self, tj):
        self.vocab = tj["model"]["vocab"]
        self.ranks = merge_pairs(tj["model"]["merges"])
        self.added = {a["content"]: a["id"] for a in tj.get("added_tokens", [])}
        self.re = regex_from_hf(GPT2_RE)
        self.b2u = bytes_to_unicode()

    def encode(self, text):
        ids = []
        for is_added, seg in split_added(text, list(self.added)):
            if is_added:
                ids.append(self.added[seg])
                continue
            for word in self.re.findall(seg):
                sym = [self.b2u[b] for b in word.encode("utf-8")]
                ids += [self.vocab[s] for s in bpe_merge(sym, self.ranks)]
        return ids


class SpmStyleRef:
    """HF BPE with the legacy Llama normalizer (Prepend + Replace) and byte fallback."""

    def __init__(self, tj):
        self.vocab = tj["model"]["vocab"]
        self.ranks = merge_pairs(tj["model"]["merges"])
        self.added = {a["content"]: a["id"] for a in tj.get("added_tokens", [])}
        self.unk = self.vocab.get(tj["model"].get("unk_token") or "", None)

    def encode(self, text):
        ids = []
        for is_added, seg in split_added(text, list(self.added)):
            if is_added:
                ids.append(self.added[seg])
                continue
            if not seg:
                continue
            norm = MS + seg.replace(" ", MS)
            # unknown characters become ('byte', b) symbols, which never merge
            sym = []
            for ch in norm:
                if ch in self.vocab:
                    sym.append(ch)
                else:
                    sym += [("<0x%02X>" % b,) for b in ch.encode("utf-8")]
            for s in bpe_merge_safe(sym, self.ranks):
                ids.append(self.vocab[s[0]] if isinstance(s, tuple) else self.vocab[s])
        return ids


def bpe_merge_safe(symbols, ranks):
    """bpe_merge where tuple symbols (byte fallback) never take part in a merge."""
    out, run = [], []
    for s in symbols:
        if isinstance(s, tuple):
            out += bpe_merge(run, ranks) if run else []
            run = []
            out.append(s)
        else:
            run.append(s)
    out += bpe_merge(run, ranks) if run else []
    return out


class SentencePieceRef:
    def __init__(self, path):
        import sentencepiece as spm
        self.sp = spm.SentencePieceProcessor(model_file=path)
        self.added = {}
        for i in range(self.sp.get_piece_size()):
            if self.sp.is_control(i) or self.sp.is_unknown(i):
                self.added[self.sp.id_to_piece(i)] = i

    def encode(self, text):
        ids = []
        for is_added, seg in split_added(text, list(self.added)):
            if is_added:
                ids.append(self.added[seg])
            elif seg:
                ids += self.sp.encode(seg)
        return ids

# ---------------------------------------------------------------- self-made tokenizers


TRAIN_TEXT = """The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs.
Numbers like 12, 345 and 6789 appear here and there, and so do words such as tokenizer,
token, tokens, merge, merges and merging. It's the tokenizer's job: they'll see, we've seen.
Tabs\tand  double  spaces   stay. Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u65e5\u672c\u8a9e \U0001F600."""


def train_merges(words, n_merges):
    """Tiny BPE trainer: most frequent adjacent pair, ties by first appearance."""
    corpus = [list(w) for w in words]
    merges = []
    for _ in range(n_merges):
        counts, first = {}, {}
        for w in corpus:
            for k in range(len(w) - 1):
                p = (w[k], w[k + 1])
                counts[p] = counts.get(p, 0) + 1
                first.setdefault(p, len(first))
        if not counts:
            break
        best = max(counts, key=lambda p: (counts[p], -first[p]))
        if counts[best] < 2:
            break
        merges.append(best)
        for i, w in enumerate(corpus):
            corpus[i] = bpe_merge(w, {best: 0})
    return merges


def tiny_bytelevel():
    b2u = bytes_to_unicode()
    rx = regex_from_hf(GPT2_RE)
    words = ["".join(b2u[b] for b in w.encode()) for w in rx.findall(TRAIN_TEXT)]
    merges = train_merges(words, 120)
    vocab = {b2u[b]: i for i, b in enumerate(range(256))}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    eot = len(vocab)
    vocab["<|endoftext|>"] = eot
    return {
        "version": "1.0",
        "added_tokens": [{"id": eot, "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": False,
                          "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "vocab": vocab,
                  "merges": [a + " " + b for a, b in merges]},
    }


def tiny_spm():
    # \n and \t stay out of the vocabulary: they exercise byte fallback
    norm = MS + TRAIN_TEXT.replace("\n", " ").replace("\t", " ").replace(" ", MS)
    words = [MS + w for w in norm.split(MS) if w]
    merges = train_merges(words, 100)
    specials = ["<unk>", "<s>", "</s>"]
    vocab = {s: i for i, s in enumerate(specials)}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for ch in sorted(set(norm)):
        vocab.setdefault(ch, len(vocab))
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(specials)]
    return {
        "version": "1.0",
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": MS},
            {"type": "Replace", "pattern": {"String": " "}, "content": MS}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1],
                                                                   "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": MS}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "vocab": vocab,
                  "merges": [[a, b] for a, b in merges]},
    }

# ---------------------------------------------------------------- texts


TRICKY = [
    "", " ", "  ", "\n", "\t", "a", "Hello world", " Hello world", "  leading two spaces",
    "trailing spaces   ", "multiple    inner     spaces", "tabs\tbetween\twords\t\t",
    "line one\nline two\n\nline four\r\nwindows", "it's they'll we've I'm you'd she's",
    "IT'S THEY'LL", "don't won't can't", "digits 0 12 345 6789 12345678901234567890",
    "3.14159 -42 +7 1e10 0x1F", "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \u4e2d\u6587 \ud55c\uad6d\uc5b4",
    "emoji \U0001F600\U0001F389 \U0001F468\u200d\U0001F469\u200d\U0001F467 flags \U0001F1EB\U0001F1F7",
    "math \u2211 \u222b \u221e \u2260 \u2264 \u03b1\u03b2\u03b3",
    "punctuation!!! ??? ... --- (parens) [brackets] {braces} \"quotes\" 'single'",
    "<s>", "</s>", "a</s>b", "a </s> b", "</s></s>", "text<s>inside", "<unk> tokens <unk>",
    "<|endoftext|>", "before<|endoftext|>after", " <|endoftext|> spaced <|endoftext|>",
    "\u2581already metaspace", "URL https://example.com/path?q=1&r=2#frag",
    "email someone@example.org", "\u00a0non-breaking\u00a0space", "mixed\u3000ideographic space",
    "Ελληνικά и русский текст", "\u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd",
    "combining e\u0301 a\u0308", "zero\u200bwidth", "   \n  \n", "end with newline\n",
]


def corpus_texts(shared):
    root = os.path.join(shared, "corpora")
    files = ["sherlock-holmes/sherlock.txt", "taylorswift-wiki/taylorswift.txt",
             "tinyshakespeare/input.txt", "tinystories-sample/tinystories_train_head.txt",
             "wikitext-2/test.txt"]
    out = []
    for rel in files:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            lines = [ln.rstrip("\n") for ln in f]
        lines = [ln.lstrip("\ufeff") for ln in lines if ln.strip()]
        step = max(1, len(lines) // 32)
        for k in range(0, len(lines), step)[:32]:
            out.append(lines[k][:200])
        # a few multi-line chunks with their blank lines kept
        for k in range(3):
            s = len(lines) // 4 * (k + 1)
            out.append("\n".join(lines[s:s + 3])[:300])
    return out


def main():
    shared = "../shared"
    if "--shared" in sys.argv:
        shared = sys.argv[sys.argv.index("--shared") + 1]
    os.makedirs("tests/data/tok", exist_ok=True)
    tiny = {"tiny_bytelevel": tiny_bytelevel(), "tiny_spm": tiny_spm()}
    for name, tj in tiny.items():
        with open("tests/data/tok/%s.json" % name, "w", encoding="utf-8") as f:
            json.dump(tj, f, ensure_ascii=False, indent=1)
    refs = {"tiny_bytelevel": ByteLevelRef(tiny["tiny_bytelevel"]),
            "tiny_spm": SpmStyleRef(tiny["tiny_spm"])}
    tok = os.path.join(shared, "tokenizers")

    def load(p):
        with open(p, encoding="utf-8") as f:
            return json.load(f)
    refs["gpt2"] = ByteLevelRef(load(os.path.join(tok, "gpt2/tokenizer.json")))
    refs["llama2_json"] = SpmStyleRef(load(os.path.join(tok, "llama2/tokenizer.json")))
    refs["llama2_model"] = SentencePieceRef(os.path.join(tok, "llama2/tokenizer.model"))
    refs["stories260K"] = SpmStyleRef(load(os.path.join(shared, "models/stories260K/tokenizer.json")))
    texts = TRICKY + corpus_texts(shared)
    # the tiny tokenizers (many ids per text) are checked on the tricky strings only
    fix = {"texts": texts, "ids": {}}
    for name, ref in refs.items():
        subset = TRICKY if name.startswith("tiny_") else texts
        fix["ids"][name] = [" ".join(map(str, ref.encode(t))) for t in subset]
    # llama2's tokenizer.json and tokenizer.model share one list when the two
    # independent references agree (the C tests compare both files against it)
    agree = sum(a == b for a, b in zip(fix["ids"]["llama2_json"], fix["ids"]["llama2_model"]))
    if agree == len(texts):
        fix["ids"]["llama2"] = fix["ids"].pop("llama2_json")
        del fix["ids"]["llama2_model"]
    with open("tests/data/tok/fixtures.json", "w", encoding="utf-8") as f:
        json.dump(fix, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    size = os.path.getsize("tests/data/tok/fixtures.json")
    print("fixtures.json: %d texts, %d bytes; llama2 json/model references agree on %d/%d"
          % (len(texts), size, agree, len(texts)))


main()
