#!/usr/bin/python3
"""gen_fuzz_corpus.py: the seed corpora of tests/fuzz/corpus/<target>/ (make test
replays them; make fuzz starts from them).  Small self-made valid and invalid
inputs per parser, plus copies of the repository's own small fixtures.  Run from
the repository root: /usr/bin/python3 tools/gen_fuzz_corpus.py
Reproducers found by make fuzz (crash-*, leak-*, ...) are kept, never regenerated."""
import glob, json, os, shutil, struct, subprocess

ROOT = "tests/fuzz/corpus"


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def copy(target, src, name=None):
    os.makedirs(os.path.join(ROOT, target), exist_ok=True)
    if os.path.getsize(src) <= 64 * 1024:
        shutil.copyfile(src, os.path.join(ROOT, target, name or os.path.basename(src)))


def zstd(data):
    return subprocess.run(["zstd", "-q", "-c", "--content-size"], input=data,
                          stdout=subprocess.PIPE, check=True).stdout


def st_file(tensors):
    """tensors: [(name, dtype, shape, bytes)] -> safetensors bytes"""
    hdr, blob = {"__metadata__": {"format": "pt"}}, b""
    for name, dtype, shape, raw in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape,
                     "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + blob


def safetensors():
    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)
    put("safetensors", "valid_f32.safetensors", st_file([("w", "F32", [2, 2], f32)]))
    put("safetensors", "valid_mixed.safetensors", st_file([
        ("a", "BF16", [2], struct.pack("<2H", 0x3f80, 0xc000)),
        ("b", "F16", [1, 2], struct.pack("<2H", 0x3c00, 0x4000)),
        ("ids", "I32", [3], struct.pack("<3i", 1, 2, 3)),
        ("s", "F32", [], struct.pack("<f", 2.0)),
        ("e", "F32", [0, 4], b"")]))
    put("safetensors", "empty.safetensors", b"")
    put("safetensors", "len_only.safetensors", struct.pack("<Q", 2))
    for f in sorted(glob.glob("tests/data/safetensors/*.safetensors")):
        copy("safetensors", f)


def safetensors_index():
    t = "safetensors_index"
    put(t, "valid.json", json.dumps({"metadata": {"total_size": 12},
                                      "weight_map": {"x": "a.safetensors", "y": "b.safetensors"}}))
    put(t, "missing_tensor.json", json.dumps({"weight_map": {"z": "a.safetensors"}}))
    put(t, "wrong_shard.json", json.dumps({"weight_map": {"x": "b.safetensors"}}))
    put(t, "no_file.json", json.dumps({"weight_map": {"x": "c.safetensors"}}))
    put(t, "escape.json", json.dumps({"weight_map": {"x": "../a.safetensors"}}))
    put(t, "dot.json", json.dumps({"weight_map": {"x": "."}}))
    put(t, "empty_map.json", json.dumps({"weight_map": {}}))
    put(t, "not_string.json", '{"weight_map": {"x": 3}}')
    put(t, "duplicate.json", '{"weight_map": {"x": "a.safetensors", "x": "a.safetensors"}}')
    put(t, "truncated.json", '{"weight_map": {"x": "a.safe')


def hfconfig():
    t = "hfconfig"
    for f in sorted(glob.glob("data/fixtures/*/config.json")):
        copy(t, f, os.path.basename(os.path.dirname(f)) + ".json")
    base = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
            "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 128,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False}
    put(t, "valid_small.json", json.dumps(base))
    for key, val, name in [("num_key_value_heads", 3, "kv_not_divisor"),
                           ("hidden_size", -64, "negative_dim"),
                           ("hidden_size", 2**40, "huge_dim"),
                           ("num_attention_heads", 0, "zero_heads"),
                           ("rope_theta", "x", "theta_string"),
                           ("head_dim", 7, "odd_head_dim"),
                           ("sliding_window", 16, "sliding_window"),
                           ("rope_scaling", {"type": "linear", "factor": 0}, "rope_zero_factor"),
                           ("rope_scaling", {"rope_type": "llama3", "factor": 8.0,
                                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                             "original_max_position_embeddings": 8192},
                            "rope_llama3")]:
        c = dict(base)
        c[key] = val
        put(t, name + ".json", json.dumps(c))
    put(t, "array.json", "[1,2,3]")
    put(t, "truncated.json", json.dumps(base)[:40])
    put(t, "empty.json", "")


def tokenizers():
    for f in sorted(glob.glob("tests/data/tok/*.json")) + sorted(glob.glob("tests/data/tok/bad/*.json")):
        if os.path.basename(f) != "fixtures.json":
            copy("tokenizer_json", f, ("bad_" if "/bad/" in f else "") + os.path.basename(f))
    put("tokenizer_json", "empty_object.json", "{}")
    for f in sorted(glob.glob("tests/data/tok/*.model")) + sorted(glob.glob("tests/data/tok/bad/*.model")):
        copy("tokenizer_model", f, ("bad_" if "/bad/" in f else "") + os.path.basename(f))
    put("tokenizer_model", "empty.model", b"")
    put("tokenizer_model", "huge_varint.model", b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")


def shard_file(ids, width=2, n_docs=1, h=0x1234, payload=None, n_tokens=None, version=1):
    raw = b"".join(struct.pack("<H" if width == 2 else "<I", i) for i in ids)
    if payload is None:
        payload = subprocess.run(["zstd", "-q", "-c", "--content-size", "--check"], input=raw,
                                 stdout=subprocess.PIPE, check=True).stdout
    hdr = b"QSTOKSH1" + struct.pack("<IIQQQQ", version, width,
                                    len(ids) if n_tokens is None else n_tokens,
                                    h, n_docs, len(payload)) + b"\0" * 16
    return hdr + payload


def shards():
    t = "shard"
    put(t, "valid16.bin", shard_file([1, 2, 3, 65535, 0]))
    put(t, "valid32.bin", shard_file([1, 70000, 3], width=4))
    put(t, "empty.bin", shard_file([]))
    put(t, "count_mismatch.bin", shard_file([1, 2, 3], n_tokens=4))
    put(t, "count_huge.bin", shard_file([1, 2, 3], n_tokens=2**62))
    put(t, "width3.bin", shard_file([1, 2, 3], width=3))
    put(t, "version9.bin", shard_file([1], version=9))
    put(t, "garbage_payload.bin", shard_file([1, 2], payload=b"\x28\xb5\x2f\xfd" + b"\x00" * 12))
    v = shard_file([5, 6, 7, 8])
    put(t, "truncated.bin", v[:-3])
    put(t, "header_only.bin", v[:64])
    put(t, "short.bin", v[:20])


LINES = ('{"type":"train","step":1,"loss":2.5}\n{"type":"eval","step":2,"acc":0.5}\n'
         '{"type":"train","step":3,"lo')


def zlogs():
    put("zlog_plain", "lines.jsonl", LINES)
    put("zlog_plain", "crlf_empty.jsonl", "a\r\n\n\nb\n")
    put("zlog_plain", "nul.jsonl", b"{\"a\":1}\n\0\0\n")
    put("zlog_plain", "empty.jsonl", b"")
    z = zstd(LINES.encode())
    put("zlog_zstd", "one_frame.zst", z)
    put("zlog_zstd", "two_frames.zst", zstd(b'{"a":1}\n') + zstd(b'{"b":2}\n'))
    put("zlog_zstd", "cut_frame.zst", z[: len(z) // 2])
    put("zlog_zstd", "frame_then_junk.zst", z + b"junk\n")
    put("zlog_zstd", "skippable.zst", b"\x50\x2a\x4d\x18\x04\x00\x00\x00abcd" + z)
    put("zlog_zstd", "magic_only.zst", b"\x28\xb5\x2f\xfd")


def qlogs():
    t = "qlog"
    names = ["blk1.mlp.gate_proj.input", "blk1.mlp.gate_proj.weight"]
    hdr = {"v": 1, "type": "header", "run": "fz", "recipe": {"estimator": "max-window:64",
           "margin": 0, "history": 1024, "saturate": True}, "quantizers": names}

    def q(name, mode="quant", amax=1.5):
        return {"name": name, "mode": mode, "est": "max-window:64", "pred_amax": amax,
                "amax": amax, "scale": 0.125, "n": 64, "clip": 1, "clip_rate": 0.015625,
                "under": 2, "under_rate": 0.03125, "qsnr_db": 31.5}
    steps = [{"v": 1, "type": "step", "step": s, "phase": "warmup" if s < 2 else "qat",
              "q": [q(n, "observe" if s < 2 else "quant", 1.0 + s) for n in names]}
             for s in range(4)]
    good = "".join(json.dumps(r) + "\n" for r in [hdr] + steps)
    put(t, "valid.jsonl", good)
    put(t, "truncated.jsonl", good[:-30])
    nulls = dict(steps[0])
    nulls["q"] = [{"name": n, "mode": "none", "est": None, "pred_amax": None, "amax": None,
                   "scale": None, "n": None, "clip": None, "clip_rate": None, "under": None,
                   "under_rate": None, "qsnr_db": None} for n in names]
    put(t, "nulls.jsonl", json.dumps(hdr) + "\n" + json.dumps(nulls) + "\n")
    back = [hdr] + steps + [hdr, steps[1]]
    put(t, "resume_back.jsonl", "".join(json.dumps(r) + "\n" for r in back))
    few = dict(steps[2])
    few["q"] = few["q"][:1]
    put(t, "too_few_q.jsonl", json.dumps(hdr) + "\n" + json.dumps(few) + "\n")
    put(t, "no_header.jsonl", json.dumps(steps[0]) + "\n")
    put(t, "bad_types.jsonl", json.dumps(hdr) + "\n" +
        '{"v":1,"type":"step","step":"x","phase":7,"q":[{"name":1,"amax":"y"}]}\n')
    ests = dict(steps[3])
    ests["q"] = [dict(q(n), est="est%d" % i) for i, n in enumerate(names * 10)]
    hdr20 = dict(hdr, quantizers=[n + str(i) for i, n in enumerate(names * 10)])
    put(t, "many_estimators.jsonl", json.dumps(hdr20) + "\n" + json.dumps(ests) + "\n")
    put(t, "empty.jsonl", "")


def results():
    t = "resfile"
    for f in sorted(glob.glob("tests/data/gate/*.json")):
        copy(t, f)
    put(t, "qatscope_min.json", json.dumps({"results": {"mmlu": {"acc": 0.25, "n": 4},
                                                       "hellaswag": {"acc": 0.5, "acc_norm": 0.6}}}))
    put(t, "group_cycle.json", json.dumps({"results": {"mmlu": {"acc,none": 0.3}},
                                           "group_subtasks": {"mmlu": ["mmlu"]}}))
    put(t, "empty.json", "")


def itemlogs():
    t = "itemlog_qatscope"
    rows = [{"task": "mmlu", "subject": "anatomy", "doc_id": i, "pred": i % 4, "pred_norm": 1,
             "gold": 1} for i in range(3)]
    rows += [{"task": "hellaswag", "doc_id": 0, "pred": 2, "pred_norm": 2, "gold": 2}]
    good = "".join(json.dumps(r) + "\n" for r in rows)
    put(t, "valid.jsonl", good)
    put(t, "duplicate.jsonl", good + json.dumps(rows[0]) + "\n")
    put(t, "truncated.jsonl", good[:-10])
    put(t, "bad_types.jsonl", '{"task":3,"doc_id":"x","pred":null,"gold":[1]}\n')
    put(t, "empty.jsonl", "")
    t = "itemlog_harness"
    rows = [{"doc_id": i, "doc": {"q": "x"}, "target": 1, "acc": float(i % 2),
             "acc_norm": 1.0} for i in range(3)]
    good = "".join(json.dumps(r) + "\n" for r in rows)
    put(t, "valid.jsonl", good)
    put(t, "duplicate.jsonl", good + json.dumps(rows[0]) + "\n")
    put(t, "no_metrics.jsonl", '{"doc_id":1}\n')
    put(t, "bad_values.jsonl", '{"doc_id":-1,"acc":7,"acc_norm":"1"}\n')
    put(t, "truncated.jsonl", good[:-10])


def metrics():
    t = "metrics"
    items_a, items_b = "1" * 30 + "0" * 10, "1" * 20 + "0" * 20
    rows = [{"type": "train", "step": s, "phase": "warmup" if s < 3 else "qat", "loss": 3.0 - s / 10,
             "lr": 1e-5, "max_clip_rate": 0.01 * s} for s in range(6)]
    rows += [{"type": "eval", "step": 0, "task": "hellaswag", "acc": 0.5, "acc_norm": 0.75,
              "items_acc": items_a, "items_acc_norm": items_a},
             {"type": "eval", "step": 5, "task": "hellaswag", "acc": 0.4, "acc_norm": 0.5,
              "items_acc": items_b, "items_acc_norm": items_b},
             {"type": "eval", "step": 5, "task": "mmlu", "acc": 0.3}]
    good = "".join(json.dumps(r) + "\n" for r in rows)
    put(t, "valid.jsonl", good)
    put(t, "truncated.jsonl", good[:-25])
    bad = dict(rows[-2], items_acc="10x", items_acc_norm="1")
    put(t, "bad_items.jsonl", json.dumps(rows[-3]) + "\n" + json.dumps(bad) + "\n")
    put(t, "nan_loss.jsonl", '{"type":"train","step":1,"loss":NaN}\n{"type":"train","step":-5,"loss":1e999}\n')
    put(t, "empty.jsonl", "")


def tasks():
    """eval task definitions and data (the eval branch's own fixtures + a few more)"""
    TD = "tests/data/tasks/"
    for f in sorted(glob.glob("tasks/*.json")) + sorted(glob.glob(TD + "defs/*.json")):
        copy("task_def", f, ("defs_" if "/defs/" in f else "") + os.path.basename(f))
    put("task_def", "unknown_key.json", '{"name":"x","loader":"arc","bogus":1}')
    put("task_def", "template_field.json",
        '{"name":"x","loader":"arc","doc_to_text":"{{nope}} {{question","eval_paths":["a"]}')
    for f in sorted(glob.glob(TD + "data/mmlu/*/*.csv")) + sorted(glob.glob(TD + "bad/mmlu_*.csv")):
        copy("task_mmlu_csv", f, f.split("/")[-2] + "_" + os.path.basename(f))
    put("task_mmlu_csv", "quotes.csv", '"a ""b"", c",1,2,3,4,B\r\nq,"multi\nline",x,y,z,D\n')
    put("task_mmlu_csv", "empty.csv", "")
    for f in sorted(glob.glob(TD + "data/hellaswag/*.jsonl")) + sorted(glob.glob(TD + "bad/hs_*.jsonl")):
        copy("task_hellaswag_jsonl", f, f.split("/")[-2] + "_" + os.path.basename(f))
    put("task_hellaswag_jsonl", "empty.jsonl", "")
    for f in sorted(glob.glob(TD + "text/hellaswag/*.txt")) + sorted(glob.glob(TD + "bad/hs_*.txt")):
        copy("task_hellaswag_text", f, f.split("/")[-2] + "_" + os.path.basename(f))
    put("task_hellaswag_text", "empty.txt", "")
    for f in sorted(glob.glob(TD + "data/arc/*/*.jsonl")) + sorted(glob.glob(TD + "bad/arc_*.jsonl")):
        copy("task_arc", f, f.split("/")[-2] + "_" + os.path.basename(f))
    put("task_arc", "empty.jsonl", "")


if __name__ == "__main__":
    for fn in (safetensors, safetensors_index, hfconfig, tokenizers, shards, zlogs, qlogs,
               results, itemlogs, metrics, tasks):
        fn()
