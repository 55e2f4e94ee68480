#!/usr/bin/env python3
"""ZeRO stages 0-3 at 1, 2 and 4 ranks on a GPT-style model: step time and
per-rank memory (what ds-opt --report predicts and ds-run --rank-report
measures), with ratios against stage 0 and one rank.

  /usr/bin/python3 bench/zero_training.py [--steps 6] [--d 128] [--layers 4] [--trace DIR]

Ranks run under mpirun --oversubscribe: on a 2-core machine 4 ranks share
2 cores, so step times show the schedule's overhead, not a speedup; the
memory columns are the point here.
"""
import argparse
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "lib"))
import numpy as np
import torch
from torch_models import GPT

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8, help="global batch")
    ap.add_argument("--threads", type=int, default=1, help="threads per rank")
    ap.add_argument("--trace", default="", help="write stage-2 and stage-3 traces at 2 ranks here")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ds-zero-bench-")
    torch.manual_seed(0)
    model = GPT(vocab=a.vocab, ctx=a.seq, d=a.d, heads=4, layers=a.layers, tied=True)
    psi = sum(p.numel() for p in model.parameters())
    onnx_path = os.path.join(work, "gpt.onnx")
    torch.onnx.export(copy.deepcopy(model), (torch.zeros(2, a.seq, dtype=torch.long),), onnx_path,
                      input_names=["idx"], output_names=["logits"], opset_version=17,
                      dynamic_axes={"idx": {0: "batch"}, "logits": {0: "batch"}})
    tokens = np.random.default_rng(0).integers(0, a.vocab, (64, a.seq + 1)).astype(np.int64)
    data = os.path.join(work, "data.npz")
    np.savez(data, idx=tokens[:, :-1].copy(), labels=tokens[:, 1:].copy())
    print("model: GPT d=%d layers=%d vocab=%d seq=%d, %d parameters (Psi); global batch %d"
          % (a.d, a.layers, a.vocab, a.seq, psi, a.batch))
    print("%-6s %-5s %10s %12s %12s %12s %12s %12s %9s" % (
        "stage", "ranks", "step ms", "params B", "grads B", "optim B", "model st. B",
        "peak RSS MB", "vs st.0"))
    base = {}
    for world in (1, 2, 4):
        for stage in (0, 1, 2, 3):
            if world == 1 and stage > 0:
                continue
            mbs = a.batch // world
            cfg = {"train_batch_size": a.batch, "train_micro_batch_size_per_gpu": mbs,
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
                   "zero_optimization": {"stage": stage,
                                         "stage3_param_persistence_threshold": 0}}
            cfg_path = os.path.join(work, "cfg.json")
            json.dump(cfg, open(cfg_path, "w"))
            plan = os.path.join(work, "z%d_w%d.dsplan" % (stage, world))
            run(["ds-opt", onnx_path, "--config", cfg_path, "--world-size", str(world), "--loss",
                 "softmax-cross-entropy", "--input-shape", "idx=%d,%d" % (mbs, a.seq), "-o", plan])
            log = os.path.join(work, "log.jsonl")
            cmd = ["ds-run", plan, "--data", data, "--steps", str(a.steps), "--log", log,
                   "--rank-report", "--threads", str(a.threads)]
            if a.trace and world == 2 and stage >= 2:
                os.makedirs(a.trace, exist_ok=True)
                cmd += ["--trace", os.path.join(a.trace, "zero%d_2ranks.json" % stage)]
            out = run((MPIRUN + ["-np", str(world)] if world > 1 else []) + cmd)
            reps = [json.loads(l) for l in out.splitlines() if l.startswith('{"rank"')]
            times = sorted(json.loads(l)["time"] for l in open(log))[: max(1, a.steps - 1)]
            ms = 1e3 * times[len(times) // 2]
            r0 = reps[0]
            states = r0["param_bytes"] + r0["grad_bytes"] + r0["optimizer_bytes"]
            rss = max(r["peak_rss_bytes"] for r in reps) / 2**20
            if stage == 0:
                base[world] = states
            print("%-6d %-5d %10.1f %12d %12d %12d %12d %12.1f %8.2fx" % (
                stage, world, ms, r0["param_bytes"], r0["grad_bytes"], r0["optimizer_bytes"],
                states, rss, states / base[world]))
    print("model states per rank follow DeepSpeed's formulas in fp32 (params 4, grads 4, Adam 8 "
          "bytes per parameter): stage 0: 16 Psi; 1: 8 Psi + 8 Psi/N; 2: 4 Psi + 12 Psi/N; "
          "3: 16 Psi/N (plus padding to N blocks and the untrained buffers)")


if __name__ == "__main__":
    main()
