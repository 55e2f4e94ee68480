"""Activation checkpointing: ds-opt's recompute policies against PyTorch's
torch.utils.checkpoint around each block (what Hugging Face's
gradient_checkpointing_enable() and DeepSpeed's checkpointing.checkpoint
wrap), on the same GPT-style decoder, batch and optimizer.

    bench/.venv/bin/python bench/recompute.py [--threads 2] [--steps 6]

For each engine and policy: the activation memory of a training step and
the step time. ds: the planned arena (ds-opt --report; ds-run allocates
exactly it, the device pool peak in --rank-report is arena + state) and
the median step time from ds-run's log. PyTorch 2 eager: the peak RSS
growth of one training step after a warm-up step (parameters, gradients
and AdamW state already allocated), measured in a fresh process per
policy, and the median step time. Ratios: memory and time against the
same engine without checkpointing, and ds against PyTorch. Run on a quiet
machine (ratios measured in one run; nothing else running).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F
import torch.utils.checkpoint as checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "lib"))
from torch_models import GPT  # noqa: E402

BIN = os.environ.get("DS_BIN", os.path.join(HERE, "..", "build", "bin"))
# name, vocab, ctx, d, heads, layers, batch, seq
MODEL = ("gpt (d=384, L=6, H=6, B=8, T=256, V=8192)", 8192, 256, 384, 6, 6, 8, 256)


def status_kb(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def make_model():
    _, vocab, ctx, d, heads, layers, _, _ = MODEL
    torch.manual_seed(0)
    return GPT(vocab=vocab, ctx=ctx, d=d, heads=heads, layers=layers)


def make_data():
    _, vocab, _, _, _, _, batch, seq = MODEL
    tokens = np.random.default_rng(0).integers(0, vocab, (batch * 4, seq + 1)).astype(np.int64)
    return {"idx": tokens[:, :-1].copy(), "labels": tokens[:, 1:].copy()}


def torch_worker(policy, steps, threads):
    """One PyTorch policy in this (fresh) process: prints JSON with the peak
    RSS growth of a step after warm-up and the median step time."""
    torch.set_num_threads(threads)
    _, vocab, _, _, _, _, batch, _ = MODEL
    model = make_model()
    data = make_data()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, fused=True)

    def forward(idx):
        if policy == "none":
            return model(idx)
        T = idx.size(1)
        pos = torch.arange(0, T, dtype=torch.long).unsqueeze(0)
        x = model.wte(idx) + model.wpe(pos)
        for b in model.blocks:
            x = checkpoint.checkpoint(b, x, use_reentrant=False)
        return model.head(model.ln_f(x))

    def step(i):
        j = (i * batch) % len(data["idx"])
        idx = torch.from_numpy(data["idx"][j:j + batch])
        y = torch.from_numpy(data["labels"][j:j + batch])
        t0 = time.perf_counter()
        loss = F.cross_entropy(forward(idx).reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=False)
        return time.perf_counter() - t0, loss.item()

    _, first = step(0)
    base = status_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    times, losses = [], []
    for i in range(1, steps + 1):
        t, l = step(i)
        times.append(t)
        losses.append(l)
    grown = (status_kb("VmHWM") - base) * 1024
    print(json.dumps({"activation_bytes": grown, "ms": statistics.median(times) * 1e3,
                      "loss": first}))


def run_torch(policy, steps, threads):
    # A fixed mmap threshold makes glibc map every tensor on its own and
    # unmap it when freed, so the RSS follows the live tensors (with the
    # default dynamic threshold freed blocks stay in the heap and the
    # warm-up step hides the next step's growth).
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-worker", policy,
                        "--steps", str(steps), "--threads", str(threads)],
                       check=True, capture_output=True, text=True, env=env)
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_ds(work, onnx_path, policy, steps, threads):
    _, _, _, _, _, _, batch, _ = MODEL
    cfg = {"train_micro_batch_size_per_gpu": batch, "gradient_clipping": 1.0,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}}}
    flags = []
    if policy == "layers":
        cfg["activation_checkpointing"] = {}
    elif policy != "none":
        flags = ["--recompute", policy]
    cfg_path = os.path.join(work, "cfg_%s.json" % policy)
    json.dump(cfg, open(cfg_path, "w"))
    plan = os.path.join(work, "train_%s.dsplan" % policy)
    report = subprocess.run([os.path.join(BIN, "ds-opt"), onnx_path, "--config", cfg_path,
                             "-o", plan, "--report", *flags],
                            check=True, capture_output=True, text=True).stdout
    arena = int(re.search(r"activations \(arena\)\s+(\d+) B", report).group(1))
    note = re.search(r"activation checkpointing \(.*", report)
    log = os.path.join(work, "log_%s.jsonl" % policy)
    out = subprocess.run([os.path.join(BIN, "ds-run"), plan, "--data",
                          os.path.join(work, "data.npz"), "--steps", str(steps + 1), "--log", log,
                          "--threads", str(threads), "--quiet", "--rank-report"],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS=str(threads))).stdout
    rank = [json.loads(l) for l in out.splitlines() if l.startswith('{"rank"')][0]
    rows = [json.loads(l) for l in open(log)]
    return {"activation_bytes": arena, "pool_peak": rank["device_pool_peak_bytes"],
            "ms": statistics.median(r["time"] for r in rows[1:]) * 1e3, "loss": rows[0]["loss"],
            "note": note.group(0) if note else ""}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--torch-worker", default="")
    args = ap.parse_args()
    if args.torch_worker:
        return torch_worker(args.torch_worker, args.steps, args.threads)
    print("threads=%d steps=%d torch=%s  %s" % (args.threads, args.steps, torch.__version__,
                                                MODEL[0]))
    with tempfile.TemporaryDirectory() as work:
        data = make_data()
        np.savez(os.path.join(work, "data.npz"), **data)
        onnx_path = os.path.join(work, "gpt.onnx")
        batch = MODEL[6]
        torch.onnx.export(make_model(), (torch.from_numpy(data["idx"][:batch]),), onnx_path,
                          input_names=["idx"], output_names=["logits"], opset_version=17,
                          dynamo=False)
        ds = {p: run_ds(work, onnx_path, p, args.steps, args.threads)
              for p in ("none", "layers", "sqrt")}
        pt = {p: run_torch(p, args.steps, args.threads) for p in ("none", "per-block")}
    print("%-28s %12s %9s %10s %9s" % ("engine / policy", "activations", "vs none", "ms/step",
                                       "vs none"))
    for name, rows in (("ds", ds), ("PyTorch", pt)):
        none = rows["none"]
        for policy, r in rows.items():
            print("%-28s %9.1f MB %8.2fx %10.1f %8.2fx" % (
                "%s %s" % (name, policy), r["activation_bytes"] / 1e6,
                r["activation_bytes"] / none["activation_bytes"], r["ms"], r["ms"] / none["ms"]))
    print("ds layers: " + ds["layers"]["note"])
    print("ds sqrt:   " + ds["sqrt"]["note"])
    print("ds checkpoint per layer vs PyTorch checkpoint per block: activations %.2fx, "
          "step time %.2fx" % (ds["layers"]["activation_bytes"] / pt["per-block"]["activation_bytes"],
                               ds["layers"]["ms"] / pt["per-block"]["ms"]))
    print("first-step losses: ds %.5f, PyTorch %.5f" % (ds["none"]["loss"], pt["none"]["loss"]))


if __name__ == "__main__":
    main()
