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
    # richer: metadata shapes, both shards, order, unicode, repeats, odd names
    put(t, "valid_meta_first.json", json.dumps({"metadata": {"total_size": 12, "format": "pt",
                                                             "nested": {"a": [1, 2, {"b": None}]}},
                                                "weight_map": {"y": "b.safetensors", "x": "a.safetensors"}},
                                               indent=2))
    put(t, "only_b.json", json.dumps({"weight_map": {"y": "b.safetensors"}}))
    put(t, "x_in_both.json", json.dumps({"weight_map": {"x": "a.safetensors", "y": "a.safetensors"}}))
    put(t, "unicode_name.json", json.dumps({"weight_map": {"\u00e9\u4e2d": "a.safetensors"}}, ensure_ascii=False))
    put(t, "escaped_slash.json", '{"weight_map": {"x": "sub\\u002fa.safetensors"}}')
    put(t, "dotdot.json", json.dumps({"weight_map": {"x": ".."}}))
    put(t, "empty_name.json", json.dumps({"weight_map": {"x": ""}}))
    put(t, "nul_in_name.json", '{"weight_map": {"x": "a.safetensors\\u0000b"}}')
    put(t, "long_name.json", json.dumps({"weight_map": {"x": "a" * 5000 + ".safetensors"}}))
    put(t, "many_missing.json", json.dumps({"weight_map": {"t%d" % i: "a.safetensors" for i in range(40)}}))
    put(t, "weight_map_array.json", json.dumps({"weight_map": ["x", "a.safetensors"]}))
    put(t, "weight_map_null.json", json.dumps({"weight_map": None, "metadata": {}}))
    put(t, "top_array.json", "[]")
    put(t, "bom.json", b"\xef\xbb\xbf" + json.dumps({"weight_map": {"x": "a.safetensors"}}).encode())
    put(t, "trailing_garbage.json", json.dumps({"weight_map": {"x": "a.safetensors"}}) + " }")
    put(t, "deep.json", '{"metadata":' + "[" * 200 + "]" * 200 + ',"weight_map":{"x":"a.safetensors"}}')
    # c.safetensors: z BF16, h F16, ids I32, nan F32 (a NaN), raw U8 (no conversion)
    put(t, "mixed_dtypes.json", json.dumps({"weight_map": {"z": "c.safetensors", "h": "c.safetensors",
                                                           "ids": "c.safetensors", "x": "a.safetensors"}}))
    put(t, "mixed_refused.json", json.dumps({"weight_map": {"nan": "c.safetensors", "raw": "c.safetensors"}}))
    put(t, "all_three.json", json.dumps({"metadata": {"total_size": 42}, "weight_map": {
        "x": "a.safetensors", "y": "b.safetensors", "z": "c.safetensors", "h": "c.safetensors",
        "ids": "c.safetensors", "nan": "c.safetensors", "raw": "c.safetensors"}}))
    put(t, "wrong_shard_c.json", json.dumps({"weight_map": {"z": "a.safetensors", "x": "c.safetensors"}}))


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
    # richer: frame flavours, sizes and header fields the reader checks
    ids = list(range(0, 3000, 7))
    raw16 = b"".join(struct.pack("<H", i) for i in ids)
    put(t, "valid16_many.bin", shard_file(ids, n_docs=5))
    put(t, "valid32_big_ids.bin", shard_file([0, 2**31 - 1, 65536, 1], width=4))
    put(t, "negative32.bin", shard_file([1, 2**32 - 1], width=4))
    put(t, "no_content_size.bin", shard_file(ids, payload=subprocess.run(
        ["zstd", "-q", "-c", "--no-content-size"], input=raw16, stdout=subprocess.PIPE,
        check=True).stdout))
    put(t, "no_checksum.bin", shard_file(ids, payload=subprocess.run(
        ["zstd", "-q", "-c", "--content-size", "--no-check"], input=raw16,
        stdout=subprocess.PIPE, check=True).stdout))
    put(t, "two_frames.bin", shard_file(ids, payload=zstd(raw16[:100]) + zstd(raw16[100:])))
    put(t, "skippable_first.bin", shard_file(ids, payload=b"\x50\x2a\x4d\x18\x04\x00\x00\x00abcd" + zstd(raw16)))
    put(t, "trailing_bytes.bin", shard_file(ids, payload=zstd(raw16) + b"\0\0\0"))
    put(t, "content_too_big.bin", shard_file([1, 2, 3], n_tokens=2**40))
    put(t, "odd_raw.bin", shard_file([1, 2], payload=zstd(b"\x01\x00\x02")))
    put(t, "hash_other.bin", shard_file([1, 2, 3], h=0xdeadbeef))
    put(t, "payload_len_short.bin", v[:40] + struct.pack("<Q", len(v) - 64 - 5) + v[48:])
    put(t, "payload_len_long.bin", v[:40] + struct.pack("<Q", len(v)) + v[48:])
    put(t, "reserved_set.bin", v[:48] + b"\xff" * 16 + v[64:])
    put(t, "width0.bin", shard_file([1], width=0))
    put(t, "rle_big.bin", shard_file([7] * 20000))
    put(t, "bad_magic.bin", b"QSTOKSH2" + v[8:])


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


# ---- issue 16: targets for the run config, train state, manifests, tokenizer
# configs, events, tokenize corpora, hif8 text, detokenize ids, log truncation ----

def runcfg():
    t = "runcfg"
    base = {"model": "m", "train_data": "d", "out_dir": "o"}
    put(t, "minimal.json", json.dumps(base))
    full = dict(base, run_name="r", seed=7, batch_size=2, seq_len=16, grad_accum=2, steps=6,
                lr=1e-3, lr_min=1e-5, lr_warmup_steps=2, lr_decay="cosine", beta1=0.9,
                beta2=0.95, eps=1e-8, weight_decay=0.1, grad_clip=1.0, precision="bf16",
                qat=True, quant_modules=["layers.*.mlp.*", "!layers.0.*"], bf16_warmup_steps=3,
                ste="masked", amax_estimator="max-window:16", amax_history=32, amax_margin=1,
                stop_on_saturation=True, saturation_clip_rate=0.001, saturation_alarm_steps=2,
                ckpt_every=2, log_every=1, eval_every=2, eval_tasks=["arc_easy", "mmlu"],
                eval_data_dir="b", eval_tasks_dir="tasks", eval_subset=10, eval_val_batches=2,
                plot_every=3, stop_on_forgetting=False, forgetting_drop_points=2.0,
                forgetting_alpha=0.05, max_memory_gb=1.5)
    put(t, "full.json", json.dumps(full, indent=1))
    put(t, "unknown_key.json", json.dumps(dict(base, bogus=1)))
    put(t, "bad_types.json", json.dumps(dict(base, steps="ten", qat=1, lr=[1], quant_modules="x")))
    put(t, "out_of_range.json", json.dumps(dict(base, steps=0, lr=2, seq_len=1, amax_margin=99,
                                                  beta2=1.0, eps=0)))
    put(t, "enum_bad.json", json.dumps(dict(base, lr_decay="linear", precision="fp8", ste="x")))
    put(t, "big_numbers.json", json.dumps(dict(base, steps=1e300, seed=-1, batch_size=2**63)))
    put(t, "long_string.json", json.dumps(dict(base, model="x" * 2000)))
    put(t, "list_empty.json", json.dumps(dict(base, quant_modules=[], eval_tasks=[""])))
    put(t, "duplicate_key.json", '{"model":"a","model":"b","train_data":"d","out_dir":"o"}')
    put(t, "not_object.json", "[1, 2]")
    put(t, "truncated.json", json.dumps(full)[:77])
    put(t, "set_lines.txt", "steps=12\nlr=3e-4\nqat=false\nquant_modules=layers.1-3.mlp.*,!layers.2.*\n"
        "amax_estimator=exp-smoothing:0.5\nmodel=m\ntrain_data=d\nout_dir=o\n")
    put(t, "set_bad_lines.txt", "steps\n=5\nsteps=\nsteps=1e3\nlr=nan\nqat=yes\nbogus=1\n"
        "seq_len=-4\nrun_name=" + "y" * 600 + "\n")
    put(t, "empty.json", "")


def ts_tokens():
    """the fixture shard of fuzz_trainstate.c"""
    return [(i * 37 + 11) % 349 for i in range(64)]


def fnv1a64(b):
    h = 1469598103934665603
    for x in b:
        h = ((h ^ x) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def fnv1a64_from(h, b):
    for x in b:
        h = ((h ^ x) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def lanes64(b, seed=1469598103934665603):
    """digest_lanes64 (src/base/digest_lanes.c), written again from its comment:
    the checksum of train_state.bin sections from version 3"""
    m64, k = 0xFFFFFFFFFFFFFFFF, 0x9E3779B97F4A7C15
    h = [seed ^ ((k * (j + 1)) & m64) for j in range(8)]
    whole = len(b) // 64 * 64
    for off in range(0, whole, 64):
        for j in range(8):
            x = ((h[j] ^ struct.unpack_from("<Q", b, off + 8 * j)[0]) * k) & m64
            h[j] = ((x << 31) | (x >> 33)) & m64
    f = 14695981039346656037
    for j in range(8):
        f = fnv1a64_from(f, struct.pack("<Q", h[j]))
    f = fnv1a64_from(f, b[whole:])
    return fnv1a64_from(f, struct.pack("<Q", len(b)))


def trainstate_file(sections, version=3):
    out = b"QSTRAIN1" + struct.pack("<II", version, len(sections))
    for tag, payload in sections:
        ck = lanes64(payload) if version >= 3 else fnv1a64(payload)
        out += tag.encode().ljust(16, b"\0") + struct.pack("<QQ", len(payload), ck)
        out += payload
    return out


def trainstate():
    """seeds for fuzz_trainstate.c's fixture: 12 quantizers, 7 windows; the parameter
    block holds each tensor padded to 16 floats: 4032 parameters"""
    t = "trainstate"
    sizes = [349 * 8] + [8, 64, 32, 32, 64, 8, 128, 128, 128] * 2 + [8]
    n_params, names = sum((n + 15) // 16 * 16 for n in sizes), []
    for layer in range(2):
        for mod in ("gate_proj", "up_proj", "down_proj"):
            names += ["layers.%d.mlp.%s.input" % (layer, mod), "layers.%d.mlp.%s.weight" % (layer, mod)]
    data_hash = 14695981039346656037
    for tok in ts_tokens():
        for k in range(4):
            data_hash = ((data_hash ^ ((tok >> (8 * k)) & 0xFF)) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    meta = json.dumps({"format": "qatscope-train-state", "step": 5, "adam_t": 5,
                       "n_params": n_params, "seed": 1337, "n_quant": 12},
                      separators=(",", ":")).encode()
    adam_m = struct.pack("<%df" % n_params, *[(i % 13) * 1e-4 for i in range(n_params)])
    adam_v = struct.pack("<%df" % n_params, *[(i % 7) * 1e-8 for i in range(n_params)])
    data = struct.pack("<4Q", 0, 3, 7, data_hash)
    amax = b"".join(struct.pack("<I", len(n)) + n.encode() + struct.pack("<I", 3) +
                    struct.pack("<3f", 0.5, 1.0 + i, 0.75) for i, n in enumerate(names))
    qsnr = struct.pack("<I", 12) + b"".join(struct.pack("<Q", 10 + i) for i in range(12))
    alarm = struct.pack("<I", 12) + b"".join(struct.pack("<I", i % 3) for i in range(12))
    ev = struct.pack("<I", 1) + struct.pack("<I", 8) + b"arc_easy" + struct.pack("<Q", 4) + b"\1\0\1\1"
    v1 = [("meta", meta), ("adam_m", adam_m), ("adam_v", adam_v), ("data", data), ("amax", amax)]
    v2 = v1 + [("qsnr", qsnr), ("alarm", alarm), ("eval", ev)]
    put(t, "valid_v3.bin", trainstate_file(v2))
    put(t, "valid_v2.bin", trainstate_file(v2, version=2))
    put(t, "valid_v1.bin", trainstate_file(v1, version=1))
    put(t, "v2_no_eval.bin", trainstate_file(v2[:-1]))
    put(t, "v2_missing_alarm.bin", trainstate_file(v2[:6]))
    put(t, "v3_with_v2_checksums.bin", trainstate_file(v2, version=2)[:8] + struct.pack("<I", 3) +
        trainstate_file(v2, version=2)[12:])
    put(t, "version4.bin", trainstate_file(v2, version=4))
    put(t, "meta_bad_json.bin", trainstate_file([("meta", b'{"step":')] + v2[1:]))
    put(t, "meta_wrong_params.bin", trainstate_file([("meta", meta.replace(b'"n_params":%d' % n_params, b'"n_params":%d' % (n_params + 1)))] + v2[1:]))
    put(t, "meta_negative_step.bin", trainstate_file([("meta", meta.replace(b'"step":5', b'"step":-5'))] + v2[1:]))
    put(t, "adam_short.bin", trainstate_file([v2[0], ("adam_m", adam_m[:-4])] + v2[2:]))
    put(t, "data_other.bin", trainstate_file(v2[:3] + [("data", struct.pack("<4Q", 0, 3, 8, 1))] + v2[4:]))
    put(t, "data_cursor_past.bin", trainstate_file(v2[:3] + [("data", struct.pack("<4Q", 9, 99, 7, data_hash))] + v2[4:]))
    put(t, "data_short.bin", trainstate_file(v2[:3] + [("data", data[:20])] + v2[4:]))
    put(t, "amax_renamed.bin", trainstate_file(v2[:4] + [("amax", amax.replace(b"layers.1", b"layers.7"))] + v2[5:]))
    put(t, "amax_long_history.bin", trainstate_file(v2[:4] + [("amax", b"".join(
        struct.pack("<I", len(n)) + n.encode() + struct.pack("<I", 9) + struct.pack("<9f", *range(9))
        for n in names))] + v2[5:]))
    put(t, "amax_extra.bin", trainstate_file(v2[:4] + [("amax", amax + b"\1\0\0\0x\0\0\0\0")] + v2[5:]))
    put(t, "qsnr_count.bin", trainstate_file(v2[:5] + [("qsnr", struct.pack("<I", 11) + qsnr[4:])] + v2[6:]))
    put(t, "alarm_huge.bin", trainstate_file(v2[:6] + [("alarm", struct.pack("<I", 12) + b"\xff" * 48)] + v2[7:]))
    put(t, "eval_bad_item.bin", trainstate_file(v2[:7] + [("eval", ev[:-1] + b"\2")]))
    put(t, "eval_trailing.bin", trainstate_file(v2[:7] + [("eval", ev + b"\0")]))
    good = trainstate_file(v2)
    put(t, "checksum_off.bin", good[:200] + bytes([good[200] ^ 1]) + good[201:])
    put(t, "truncated.bin", good[:1000])
    put(t, "trailing.bin", good + b"\0")
    put(t, "empty.bin", b"")


def manifest():
    t = "manifest"
    ok = {"format": "qatscope-shards", "tokenizer": "t", "splits": {
        "train": {"shards": ["train_000000.qst"], "tokens": 40, "docs": 3},
        "val": {"shards": ["val_000000.qst"], "tokens": 12, "docs": 1}}}
    put(t, "valid.json", json.dumps(ok, indent=1))
    put(t, "train_only.json", json.dumps({"splits": {"train": ok["splits"]["train"]}}))
    put(t, "tokens_mismatch.json", json.dumps({"splits": {"train": {"shards": ["train_000000.qst"], "tokens": 41}}}))
    put(t, "tokens_huge.json", json.dumps({"splits": {"train": {"shards": ["train_000000.qst"], "tokens": 2**62}}}))
    put(t, "tokens_wrap.json", json.dumps({"splits": {"train": {"shards": ["train_000000.qst"], "tokens": 2**62 + 10}}}))
    put(t, "tokens_negative.json", json.dumps({"splits": {"train": {"shards": [], "tokens": -1}}}))
    put(t, "same_shard_twice.json", json.dumps({"splits": {"train": {"shards": ["train_000000.qst"] * 2, "tokens": 80}}}))
    put(t, "escape.json", json.dumps({"splits": {"train": {"shards": ["../x.qst"], "tokens": 40}}}))
    put(t, "missing_file.json", json.dumps({"splits": {"train": {"shards": ["nope.qst"], "tokens": 40}}}))
    put(t, "dir_as_shard.json", json.dumps({"splits": {"train": {"shards": ["."], "tokens": 40}}}))
    put(t, "not_string.json", json.dumps({"splits": {"train": {"shards": [7], "tokens": 40}}}))
    put(t, "too_few_tokens.json", json.dumps({"splits": {"val": {"shards": [], "tokens": 0}}}))
    put(t, "split_array.json", json.dumps({"splits": [1]}))
    put(t, "truncated.json", json.dumps(ok)[:60])
    put(t, "empty.json", "")


def tokenizer_config():
    t = "tokenizer_config"
    copy(t, "data/demo/model/tokenizer_config.json", "demo.json")
    put(t, "objects.json", json.dumps({"bos_token": {"content": "<s>", "lstrip": False},
                                       "eos_token": {"content": "</s>"}, "add_bos_token": False,
                                       "add_eos_token": True}))
    put(t, "added_decoder.json", json.dumps({"added_tokens_decoder": {
        "0": {"content": "<unk>", "special": True},
        "300": {"content": "<|im_start|>", "special": True, "lstrip": True, "rstrip": True},
        "301": {"content": "caf", "special": False, "single_word": True},
        "302": {"content": "", "special": True}}, "bos_token": "<|im_start|>"}))
    put(t, "added_bad_id.json", json.dumps({"added_tokens_decoder": {"99999": {"content": "x"}}}))
    put(t, "added_neg_id.json", json.dumps({"added_tokens_decoder": {"-1": {"content": "x"}}}))
    put(t, "added_space_id.json", json.dumps({"added_tokens_decoder": {" 5": {"content": "x"}}}))
    put(t, "added_no_content.json", json.dumps({"added_tokens_decoder": {"5": {"special": True}}}))
    put(t, "unknown_bos.json", json.dumps({"bos_token": "<nope>"}))
    put(t, "null_tokens.json", json.dumps({"bos_token": None, "eos_token": 3, "add_bos_token": "yes"}))
    put(t, "not_object.json", "[]")
    put(t, "truncated.json", '{"bos_token": "<s')
    put(t, "empty.json", "")


def events():
    t = "events"
    lines = [{"step": 1, "type": "phase", "phase": "qat", "msg": "QAT on"},
             {"step": 1, "type": "saturation", "tensor": "layers.3.mlp.up_proj.input",
              "clip_rate": 0.01, "pred_amax": 1.0, "amax": 1.5, "clip": 3, "n": 300,
              "consecutive_steps": 1},
             {"step": 1, "type": "forgetting", "task": "arc_easy", "baseline": 0.5, "acc": 0.25,
              "drop_points": 25, "p_value": 0.01, "n": 4},
             {"step": 2, "type": "stop", "reason": "done"}]
    good = "".join(json.dumps(x) + "\n" for x in lines)
    put(t, "valid.jsonl", good)
    put(t, "truncated.jsonl", good[:-9])
    put(t, "many_forgetting.jsonl", "".join(json.dumps(dict(lines[2], step=i % 3, task="t%d" % i)) + "\n"
                                            for i in range(80)))
    put(t, "bad_types.jsonl", '{"step":"1","type":"phase"}\n{"step":1,"type":7}\n{"step":1.5,"type":"stop"}\n')
    put(t, "phase_odd.jsonl", '{"step":-4,"type":"phase","phase":"warmup"}\n{"step":9e18,"type":"phase","phase":"qat"}\n')
    put(t, "not_json.jsonl", "step 1 phase qat\n")
    put(t, "empty.jsonl", "")


def tokenize_corpus():
    t = "tokenize_corpus"
    txt = "Once upon a time there was a cat.\nIt sat.\n\n\n  \nThe end. caf\u00e9 \u4e2d\u6587\n\nlast"
    put(t, "paragraphs.txt", txt)
    put(t, "crlf.txt", txt.replace("\n", "\r\n"))
    put(t, "docs.jsonl", "".join(json.dumps({"text": s, "id": i}) + "\n"
                                 for i, s in enumerate(["hello world", "", "a\nb", "\u00e9\u00e9"])) + "\n\n")
    put(t, "jsonl_bad_line.jsonl", '{"text":"ok"}\n{"text":5}\n{"txt":"x"}\nnot json\n')
    put(t, "jsonl_zstd.jsonl.zst", zstd(b'{"text":"compressed doc"}\n{"text":"two"}\n'))
    put(t, "invalid_utf8.txt", b"\xff\xfe\xc3 bad \xe2\x82\n\nok")
    put(t, "nul.txt", b"a\0b\n\nc")
    put(t, "long_doc.txt", "word " * 3000)
    put(t, "empty.txt", "")


def hif8_text():
    t = "hif8_text"
    put(t, "numbers.txt", "1.0 1.0625\n0x1p-22  -5e10 nan 40960 -0\ninf -inf 1e-45 3.4e38\n")
    put(t, "bits.txt", "0x3F800000 0xFF800000 7FC00000 0x34000000 0\n")
    put(t, "codes.txt", "8 0x09 0x80\r\n0x6F 239 0 0x01 0xee 255\n")
    put(t, "bad_token.txt", "1.0\n2.0 abc 3\n")
    put(t, "long_token.txt", "1" * 300 + " 2\n")
    put(t, "nul_token.txt", b"1.0\x002 3\n")
    put(t, "hex_edge.txt", "0x 0X1 0x100 1000 0x123456789 -1 +1\n")
    put(t, "empty.txt", "")


def detokenize_ids():
    t = "detokenize_ids"
    put(t, "spaces.txt", "1 2 3 100 200\n")
    put(t, "commas.txt", "5,6,,7\r\n8\t9")
    put(t, "plus.txt", "+5 +0")
    put(t, "negative.txt", "5 -1")
    put(t, "huge.txt", "2147483647 2147483648 99999999999999999999")
    put(t, "out_of_vocab.txt", "0 348 349 99999")
    put(t, "junk.txt", "5 x7")
    put(t, "nul.txt", b"5\x006")
    put(t, "all_ids.txt", " ".join(str(i) for i in range(0, 360)))
    put(t, "empty.txt", "")


def log_truncate():
    """first byte % 8 = the resume step"""
    t = "log_truncate"
    metrics = "".join(json.dumps({"type": "train", "step": s, "loss": 3.0}) + "\n" for s in range(6))
    metrics += json.dumps({"type": "eval", "step": 4, "tasks": {}}) + "\n"
    metrics += json.dumps({"step": 4, "type": "forgetting", "task": "x"}) + "\n"
    put(t, "metrics_step4.jsonl", "\x04" + metrics)   # the first line is junk: dropped
    put(t, "events_step3.jsonl", "\x03\n" + '{"step":1,"type":"phase"}\n{"type":"nostep"}\n'
        '{"step":3,"type":"stop"}\n{"step":2,"type":"satur')
    hdr = {"v": 1, "type": "header", "run": "fz", "recipe": {"estimator": "max-window:64",
           "margin": 0, "history": 1024, "saturate": True},
           "quantizers": ["blk1.mlp.gate_proj.input", "blk1.mlp.gate_proj.weight"]}
    hline = (json.dumps(hdr, separators=(",", ":")) + "\n").encode()
    steps = [(json.dumps({"v": 1, "type": "step", "step": s, "phase": "qat", "q": []},
                         separators=(",", ":")) + "\n").encode() for s in range(6)]
    # the first byte of a zstd file is 0x28: step 0x28 % 8 = 0
    frames = zstd(hline) + b"".join(zstd(x) for x in steps)
    put(t, "qlog_frames.zst", frames)
    put(t, "qlog_cut_frame.zst", frames[:-4])
    # a skippable frame first sets the step: its magic's first byte 0x53 % 8 = 3
    put(t, "qlog_skippable_step3.zst", b"\x53\x2a\x4d\x18\x00\x00\x00\x00" + frames)
    put(t, "qlog_mixed_frame.zst", zstd(hline + b"".join(steps)))
    put(t, "qlog_corrupt_mid.zst", frames[:30] + b"JUNK" + frames[34:])
    put(t, "qlog_other_header.zst", zstd(hline.replace(b'"fz"', b'"other"')) + zstd(steps[0]))
    put(t, "plain_qlog.jsonl", "\x05\n" + hline.decode() + "".join(x.decode() for x in steps))
    put(t, "huge_step.jsonl", '\x07\n{"step":99999999999999999999999}\n{"step":-9}\n{"step":"3"}\n')
    put(t, "empty.jsonl", "")


if __name__ == "__main__":
    for fn in (safetensors, safetensors_index, hfconfig, tokenizers, shards, zlogs, qlogs,
               results, itemlogs, metrics, tasks, runcfg, trainstate, manifest, tokenizer_config,
               events, tokenize_corpus, hif8_text, detokenize_ids, log_truncate):
        fn()
