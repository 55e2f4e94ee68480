"""Mixed precision: training step time and memory in fp32, bf16 and fp16,
and 16-bit inference latency, ds beside its peers.

    bench/.venv/bin/python bench/mixed_precision.py [--threads 2] [--steps 8] [--rounds 3]

(bench/.venv comes from `bash bench/peers.sh`.)

Training: the GPT-style decoder of bench/gpt_training.py (d=256, 4 layers,
B=8, T=128, AdamW, clipping 1.0) compiled once per precision from the same
ONNX file (ds_config.json `bf16` / `fp16` sections); ds-run's median step
time over rounds, and its per-rank memory from ds-run --rank-report (model
states: parameters + gradients + optimizer state incl. fp32 masters; the
activation arena; peak RSS). The peer is PyTorch 2.x eager on the same
model and data: fp32, and torch.autocast("cpu", bfloat16) with fp32 weights
and fused AdamW (PyTorch's CPU mixed precision; it has no fp16 CPU
autocast worth timing). Engines take turns per round.

Inference: the peers' GPT-2 (bench/peers.py's model, exported once by
PyTorch 2) in ds at --dtype fp32 / bf16 / fp16, in onnxruntime fp32 and
fp16 (the model converted by onnxruntime.transformers.float16 with fp32
inputs and outputs), and PyTorch eager fp32 and bf16 autocast.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "lib"))
sys.path.insert(0, HERE)
from torch_models import GPT  # noqa: E402

BIN = os.environ.get("DS_BIN", os.path.join(HERE, "..", "build", "bin"))
VOCAB, CTX, D, HEADS, LAYERS, BATCH, SEQ = 2048, 128, 256, 8, 4, 8, 128


def ds(*args, **kw):
    return subprocess.run([os.path.join(BIN, args[0])] + list(args[1:]), check=True,
                          capture_output=True, text=True, **kw).stdout


def training(args, work):
    torch.manual_seed(0)
    model = GPT(vocab=VOCAB, ctx=CTX, d=D, heads=HEADS, layers=LAYERS)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, VOCAB, (BATCH * 4, SEQ + 1)).astype(np.int64)
    data = {"idx": tokens[:, :-1].copy(), "labels": tokens[:, 1:].copy()}
    onnx_path = os.path.join(work, "gpt.onnx")
    torch.onnx.export(model, (torch.from_numpy(data["idx"][:BATCH]),), onnx_path,
                      input_names=["idx"], output_names=["logits"], opset_version=17, dynamo=False)
    data_path = os.path.join(work, "data.npz")
    np.savez(data_path, **data)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    plans = {}
    for prec, section in (("fp32", {}), ("bf16", {"bf16": {"enabled": True}}),
                          ("fp16", {"fp16": {"enabled": True, "initial_scale_power": 12}})):
        cfg = {"train_micro_batch_size_per_gpu": BATCH, "gradient_clipping": 1.0,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}}}
        cfg.update(section)
        cfg_path = os.path.join(work, prec + ".json")
        json.dump(cfg, open(cfg_path, "w"))
        plans[prec] = os.path.join(work, prec + ".dsplan")
        ds("ds-opt", onnx_path, "--config", cfg_path, "--loss", "softmax-cross-entropy",
           "-o", plans[prec])

    def ds_round(prec):
        log = os.path.join(work, prec + ".jsonl")
        out = ds("ds-run", plans[prec], "--data", data_path, "--steps", str(args.steps), "--log", log,
                 "--threads", str(args.threads), "--quiet", "--rank-report", env=env)
        rep = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
        times = [json.loads(l)["time"] for l in list(open(log))[2:]]
        return statistics.median(times) * 1e3, rep

    fused = {"fused": True}
    states = {"fp32": [p.detach().clone() for p in model.parameters()]}

    def torch_round(autocast):
        with torch.no_grad():
            for p, s in zip(model.parameters(), states["fp32"]):
                p.copy_(s)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, **fused)
        times = []
        for step in range(args.steps):
            i = (step * BATCH) % len(tokens)
            idx = torch.from_numpy(data["idx"][i:i + BATCH])
            y = torch.from_numpy(data["labels"][i:i + BATCH])
            t0 = time.perf_counter()
            if autocast:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    logits = model(idx)
            else:
                logits = model(idx)
            loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), y.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            times.append(time.perf_counter() - t0)
        return statistics.median(times[2:]) * 1e3

    rounds = {k: [] for k in ("ds fp32", "ds bf16", "ds fp16", "torch fp32", "torch bf16")}
    reports = {}
    for _ in range(args.rounds):
        for prec in ("fp32", "bf16", "fp16"):
            ms, rep = ds_round(prec)
            rounds["ds " + prec].append(ms)
            reports[prec] = rep
        rounds["torch fp32"].append(torch_round(False))
        rounds["torch bf16"].append(torch_round(True))
    med = {k: statistics.median(v) for k, v in rounds.items()}
    print("\nTraining step, GPT d=%d L=%d B=%d T=%d, %d threads (median of %d rounds)" %
          (D, LAYERS, BATCH, SEQ, args.threads, args.rounds))
    print("%-8s %10s %12s %10s %14s %12s %12s" % ("", "ds ms", "PyTorch ms", "ds/PyTorch",
                                                  "model states", "arena", "peak RSS"))
    for prec in ("fp32", "bf16", "fp16"):
        rep = reports[prec]
        peer = med.get("torch " + prec)
        states_mb = (rep["param_bytes"] + rep["grad_bytes"] + rep["optimizer_bytes"]) / 1e6
        print("%-8s %10.1f %12s %10s %11.1f MB %9.1f MB %9.1f MB" % (
            prec, med["ds " + prec], "%.1f" % peer if peer else "-",
            "%.2f" % (med["ds " + prec] / peer) if peer else "-", states_mb,
            rep["arena_bytes"] / 1e6, rep["peak_rss_bytes"] / 1e6))


def inference(args, work):
    import onnxruntime as ort
    import peers
    model, shape, vocab, has_cache = peers.hf_model("gpt2")
    model.eval()
    wrapped = peers.Logits(model, has_cache)
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, vocab, shape).astype(np.int64))
    path = os.path.join(work, "gpt2.onnx")
    torch.onnx.export(wrapped, (ids,), path, input_names=["input_ids"], output_names=["logits"],
                      opset_version=18, dynamo=True)
    inputs = os.path.join(work, "in.npz")
    np.savez(inputs, input_ids=ids.numpy())
    plans = {}
    for dt in ("fp32", "bf16", "fp16"):
        plans[dt] = os.path.join(work, "gpt2_%s.dsplan" % dt)
        ds("ds-opt", path, "--dtype", dt, "-o", plans[dt])
    from onnxruntime.transformers.float16 import convert_float_to_float16
    import onnx
    fp16_path = os.path.join(work, "gpt2_fp16.onnx")
    onnx.save(convert_float_to_float16(onnx.load(path), keep_io_types=True), fp16_path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    sessions = {"fp32": ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]),
                "fp16": ort.InferenceSession(fp16_path, so, providers=["CPUExecutionProvider"])}
    feeds = {"input_ids": ids.numpy()}
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    iters = max(5, args.steps)

    def timed(fn):
        for _ in range(2):
            fn()
        t = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
        return statistics.median(t) * 1e3

    def torch_run(bf16):
        with torch.no_grad():
            if bf16:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    wrapped(ids)
            else:
                wrapped(ids)

    rounds = {}
    for _ in range(args.rounds):
        for dt in plans:
            out = ds("ds-run", plans[dt], "--inputs", inputs, "--benchmark", str(iters),
                     "--threads", str(args.threads), env=env)
            rounds.setdefault("ds " + dt, []).append(json.loads(out.splitlines()[-1])["median_ms"])
        for dt, s in sessions.items():
            rounds.setdefault("onnxruntime " + dt, []).append(timed(lambda: s.run(None, feeds)))
        rounds.setdefault("PyTorch fp32", []).append(timed(lambda: torch_run(False)))
        rounds.setdefault("PyTorch bf16 autocast", []).append(timed(lambda: torch_run(True)))
    print("\nInference, GPT-2 d512 L6 %dx%d tokens, %d threads (median ms of %d rounds)" %
          (shape[0], shape[1], args.threads, args.rounds))
    for k, v in rounds.items():
        print("  %-24s %8.2f" % (k, statistics.median(v)))
    for dt in ("fp32", "fp16"):
        print("  ds %s / onnxruntime %s: %.2f" % (dt, dt, statistics.median(rounds["ds " + dt]) /
                                                  statistics.median(rounds["onnxruntime " + dt])))
    print("  ds bf16 / onnxruntime fp16: %.2f" % (statistics.median(rounds["ds bf16"]) /
                                                 statistics.median(rounds["onnxruntime fp16"])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-inference", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    flags = open("/proc/cpuinfo").read()
    print("threads=%d torch=%s cpu: avx512_bf16=%s amx_bf16=%s avx512_fp16=%s" % (
        args.threads, torch.__version__, "avx512_bf16" in flags, "amx_bf16" in flags,
        "avx512_fp16" in flags))
    with tempfile.TemporaryDirectory() as work:
        training(args, work)
        if not args.skip_inference:
            inference(args, work)


if __name__ == "__main__":
    main()
