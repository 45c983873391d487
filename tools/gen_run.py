#!/usr/bin/python3
"""gen_run.py: write a synthetic run directory (README "## File formats") for looking at the plots.

Usage: /usr/bin/python3 tools/gen_run.py RUN_DIR [--steps N] [--layers L] [--warmup W]
                                         [--estimator NAME] [--seed S] [--forget]
Writes RUN_DIR/quant.jsonl.zst (via the zstd program), metrics.jsonl and events.jsonl.
The numbers are invented (seeded numpy), shaped like a QAT run: BF16 warmup in observe
mode (under/qsnr null), then quantization; the down_proj inputs carry rare clipping
bursts, one isolated single-step spike sits in the middle of the run, loss decays,
in-loop evals every 10% of the run (with --forget, arc_easy degrades late in the run).
Nothing here comes from a real model.
"""
import argparse
import json
import os
import subprocess

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--estimator", default="max-window:64")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--forget", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.run_dir, exist_ok=True)
    name = os.path.basename(os.path.normpath(a.run_dir))
    layers = range(3, a.layers - 2) if a.layers > 6 else range(a.layers)
    quant = [f"layers.{i}.mlp.{m}.{t}" for i in layers
             for m in ("gate_proj", "up_proj", "down_proj") for t in ("input", "weight")]
    recent = a.estimator.startswith("most-recent")
    lines = [json.dumps({"v": 1, "type": "header", "run": name,
                         "recipe": {"estimator": a.estimator, "margin": 0, "history": 1024,
                                    "saturate": True}, "quantizers": quant})]
    base_amax = {q: rng.uniform(0.5, 4.0) for q in quant}
    spike_step = a.steps // 2 + 17
    for s in range(a.steps):
        qat = s >= a.warmup
        rec = []
        for qi, q in enumerate(quant):
            amax = base_amax[q] * (1 + 0.015 * rng.standard_normal())
            burst = "down_proj.input" in q and rng.random() < (0.02 if recent else 0.004)
            if burst:
                amax *= rng.uniform(1.3, 3.0)
            if s == spike_step and qi == len(quant) // 2:
                amax *= 5.0
                burst = True
            pred = base_amax[q] * (1.05 if not recent else 1.0)
            clip_rate = 0.0 if amax <= pred else min(1.0, 10 ** rng.uniform(-5, -2.5))
            if s == 0:
                clip_rate = 0.0
            n = 65536
            rec.append({"name": q, "mode": "quant" if qat else "observe", "est": a.estimator,
                        "pred_amax": round(pred, 5), "amax": round(amax, 5), "scale": 32768 / pred,
                        "n": n, "clip": int(clip_rate * n), "clip_rate": clip_rate,
                        "under": int(n * 2e-4) if qat else None,
                        "under_rate": float(rng.uniform(1e-5, 4e-4)) if qat else None,
                        "qsnr_db": round(float(31 + 2 * rng.standard_normal() - 6 * burst), 3) if qat else None})
        lines.append(json.dumps({"v": 1, "type": "step", "step": s, "phase": "qat" if qat else "warmup", "q": rec}))
    raw = ("\n".join(lines) + "\n").encode()
    out = os.path.join(a.run_dir, "quant.jsonl.zst")
    subprocess.run(["zstd", "-q", "-f", "-3", "-o", out], input=raw, check=True)

    metrics, events = [], [{"step": a.warmup, "type": "phase", "phase": "qat", "msg": "QAT on"}]
    every = max(1, a.steps // 10)
    acc = {"arc_easy": 0.42, "hellaswag": 0.31, "mmlu": 0.26}
    for s in range(a.steps):
        if s % every == 0:
            tasks = {}
            for t, v in acc.items():
                drift = 0.004 * rng.standard_normal()
                if a.forget and t == "arc_easy" and s > a.steps * 0.6:
                    drift -= 0.05 * (s / a.steps)
                tasks[t] = {"acc": round(v + drift, 4), "acc_norm": round(v + 0.02 + drift, 4), "n": 200}
            metrics.append({"type": "eval", "step": s, "tasks": tasks, "val_loss": 3.0, "val_ppl": 20.1})
        loss = 2.2 + 1.6 * np.exp(-s / (a.steps / 6)) + 0.05 * rng.standard_normal() + (0.08 if s == a.warmup else 0)
        max_clip = 0.0 if s < 1 else float(10 ** rng.uniform(-6, -3)) if rng.random() < 0.1 else 0.0
        metrics.append({"type": "train", "step": s, "phase": "qat" if s >= a.warmup else "warmup",
                        "loss": round(float(loss), 4), "lr": 1e-5 * min(1.0, (s + 1) / 100),
                        "grad_norm": 0.8, "tok_per_s": 1234.5, "max_clip_rate": max_clip,
                        "elapsed_s": round(s * 0.1, 2)})
    with open(os.path.join(a.run_dir, "metrics.jsonl"), "w") as f:
        f.write("\n".join(json.dumps(m) for m in metrics) + "\n")
    with open(os.path.join(a.run_dir, "events.jsonl"), "w") as f:
        f.write("\n".join(json.dumps(e) for e in events) + "\n")


if __name__ == "__main__":
    main()
