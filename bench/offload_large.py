#!/usr/bin/env python3
"""A GPT larger than its device budget trains: ZeRO-3 on one rank with the
parameters offloaded to host memory and the optimizer state swapped to NVMe
(ZeRO-Infinity), under a device budget a fraction of its model states.

    bench/.venv/bin/python bench/offload_large.py [--d 2048] [--layers 20] [--steps 3] \
        [--device-memory 2GiB] [--sub-group-size 1e8] [--work DIR]

Prints the parameter count, DeepSpeed's model-state bytes (16 per parameter
in fp32: parameters, gradients, Adam's two moments) against the device
budget, what ds-opt --report places in each memory space, and what ds-run
--rank-report measures per step: device bytes (bounded by the budget),
host bytes, NVMe bytes and the swapper's read/write bandwidth, step time and
loss. The default (d=2048, 20 layers, vocab 8192) has 1.02e9 parameters:
16.3 GB of model states against a 2 GiB device.
"""
import argparse
import atexit
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "lib"))
BIN = os.path.join(HERE, "..", "build", "bin")


def run(cmd):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), r.stdout[-4000:], r.stderr[-4000:]))
    return r.stdout, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=20)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device-memory", default="2GiB")
    ap.add_argument("--persistence", type=int, default=100000,
                    help="stage3_param_persistence_threshold (DeepSpeed's default 1e5)")
    ap.add_argument("--sub-group-size", type=int, default=100000000,
                    help="elements of optimizer state swapped and updated together (DeepSpeed's "
                    "default 1e9 would hold the whole state in host memory at once here)")
    ap.add_argument("--work", default="", help="directory for the model, plan and swap file")
    a = ap.parse_args()
    import numpy as np
    import torch
    from torch_models import GPT
    work = a.work or tempfile.mkdtemp(prefix="ds-offload-large-")
    if not a.work:  # the exported model alone is ~4 GB
        atexit.register(shutil.rmtree, work, True)
    os.makedirs(os.path.join(work, "nvme"), exist_ok=True)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.no_grad():
        model = GPT(vocab=a.vocab, ctx=a.seq, d=a.d, heads=a.heads, layers=a.layers, tied=True)
    psi = sum(p.numel() for p in model.parameters())
    onnx_path = os.path.join(work, "gpt.onnx")
    torch.onnx.export(model, (torch.zeros(1, a.seq, dtype=torch.long),), onnx_path,
                      input_names=["idx"], output_names=["logits"], opset_version=17,
                      dynamo=False, dynamic_axes={"idx": {0: "batch"}, "logits": {0: "batch"}})
    del model
    export_s = time.perf_counter() - t0
    tokens = np.random.default_rng(0).integers(0, a.vocab, (16, a.seq + 1)).astype(np.int64)
    data = os.path.join(work, "data.npz")
    np.savez(data, idx=tokens[:, :-1].copy(), labels=tokens[:, 1:].copy())
    states = 16 * psi
    print("GPT d=%d layers=%d vocab=%d seq=%d: %d parameters (%.2fB); model states %.1f GB "
          "(fp32: 16 bytes per parameter); device budget %s; made and exported in %.0f s" % (
              a.d, a.layers, a.vocab, a.seq, psi, psi / 1e9, states / 1e9, a.device_memory,
              export_s))
    cfg = {"train_batch_size": 1, "train_micro_batch_size_per_gpu": 1, "gradient_clipping": 1.0,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.01}},
           "zero_optimization": {"stage": 3, "sub_group_size": a.sub_group_size,
                                 "stage3_param_persistence_threshold": a.persistence,
                                 "offload_param": {"device": "cpu", "pin_memory": True},
                                 "offload_optimizer": {"device": "nvme",
                                                       "nvme_path": os.path.join(work, "nvme")}},
           "aio": {"block_size": 1048576, "queue_depth": 8}}
    cfg_path = os.path.join(work, "ds_config.json")
    json.dump(cfg, open(cfg_path, "w"))
    plan = os.path.join(work, "large.dsplan")
    report, compile_s = run([os.path.join(BIN, "ds-opt"), onnx_path, "--config", cfg_path,
                             "--loss", "softmax-cross-entropy", "--input-shape",
                             "idx=1,%d" % a.seq, "--device-memory", a.device_memory, "--report",
                             "-o", plan])
    print("ds-opt: %.0f s" % compile_s)
    for line in report.splitlines():
        if any(k in line for k in ("memory per rank", "parameters ", "gradients", "optimizer state",
                                   "activations", "total", "memory spaces", "  device",
                                   "  host", "  nvme", "transfers", "->")):
            print("  " + line.strip())
    log = os.path.join(work, "log.jsonl")
    out, run_s = run([os.path.join(BIN, "ds-run"), plan, "--data", data, "--steps", str(a.steps),
                      "--log", log, "--rank-report", "--quiet"])
    r = [json.loads(l) for l in out.splitlines() if l.startswith('{"rank"')][0]
    for l in open(log):
        s = json.loads(l)
        print("  step %d: loss %.4f, %.1f s" % (s["step"], s["loss"], s["time"]))
    print("ds-run (%d steps, %.0f s with loading): device %.2f GB (budget %.2f GB, model states "
          "%.1f GB), host %.2f GB, NVMe %.2f GB; NVMe read %.1f GB at %.2f GB/s, written %.1f GB "
          "at %.2f GB/s; peak RSS %.1f GB" % (
              a.steps, run_s, r["device_bytes"] / 1e9, r["device_memory_budget"] / 1e9,
              states / 1e9, r["host_bytes"] / 1e9, r["nvme_bytes"] / 1e9,
              r["nvme_read_bytes"] / 1e9, r["nvme_read_gbps"], r["nvme_written_bytes"] / 1e9,
              r["nvme_write_gbps"], r["peak_rss_bytes"] / 1e9))
    if r["device_bytes"] > r["device_memory_budget"] or r["device_memory_budget"] >= states:
        sys.exit("the device held more than its budget, or the budget is not below the states")


if __name__ == "__main__":
    main()
