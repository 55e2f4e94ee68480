"""The whole optimizer step, ds vs PyTorch 2.x's fused AdamW, in parameters
per second: gradient norm, clipping, AdamW update and zeroing the gradients.

    bench/.venv/bin/python bench/optimizer_step.py [--threads 2] [--rounds 5]

ds: the training plan's `optimizer_step` program alone (`ds-run --program
optimizer_step --benchmark N`; its inputs are the step's scalars), on the
plan ds-opt builds for the GPT-style model with AdamW and
gradient_clipping 1.0. PyTorch (bench/.venv, from `bash bench/peers.sh`):
the same parameters with random gradients, `clip_grad_norm_(1.0)`,
`AdamW(fused=True).step()` and `zero_grad()`, timed per step. The two take
turns for --rounds rounds; each reports the median of its round medians.
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "lib"))
from torch_models import GPT  # noqa: E402

BIN = os.environ.get("DS_BIN", os.path.join(HERE, "..", "build", "bin"))
CONFIGS = [
    # name, vocab, ctx, d, heads, layers
    ("GPT d256 L4", 2048, 128, 256, 8, 4),
    ("GPT d512 L8", 4096, 128, 512, 8, 8),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--iters", type=int, default=30, help="timed steps per round")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print("threads=%d iters=%d rounds=%d torch=%s" % (args.threads, args.iters, args.rounds,
                                                     torch.__version__))
    print("%-14s %12s %10s %10s %14s %14s %8s" % ("model", "parameters", "ds ms", "torch ms",
                                                  "ds Mparam/s", "torch Mparam/s", "ds/torch"))
    for name, vocab, ctx, d, heads, layers in CONFIGS:
        with tempfile.TemporaryDirectory() as work:
            torch.manual_seed(0)
            model = GPT(vocab=vocab, ctx=ctx, d=d, heads=heads, layers=layers)
            params = list(model.parameters())
            count = sum(p.numel() for p in params)
            onnx_path = os.path.join(work, "gpt.onnx")
            legacy = {"dynamo": False} if int(torch.__version__.split(".")[0]) >= 2 else {}
            torch.onnx.export(model, (torch.zeros(2, ctx, dtype=torch.long),), onnx_path,
                              input_names=["idx"], output_names=["logits"], opset_version=17,
                              **legacy)
            cfg = os.path.join(work, "cfg.json")
            json.dump({"train_micro_batch_size_per_gpu": 2, "gradient_clipping": 1.0,
                       "optimizer": {"type": "AdamW",
                                     "params": {"lr": 1e-3, "weight_decay": 0.01}}},
                      open(cfg, "w"))
            plan = os.path.join(work, "train.dsplan")
            subprocess.run([os.path.join(BIN, "ds-opt"), onnx_path, "--config", cfg, "--loss",
                            "softmax-cross-entropy", "-o", plan], check=True, capture_output=True)
            scalars = os.path.join(work, "scalars.npz")
            np.savez(scalars, lr=np.float32(1e-3), step_size=np.float32(1e-3),
                     bias2_sqrt=np.float32(0.03))
            env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))

            def ds_round():
                out = subprocess.run([os.path.join(BIN, "ds-run"), plan, "--program",
                                      "optimizer_step", "--inputs", scalars, "--threads",
                                      str(args.threads), "--benchmark", str(args.iters)],
                                     check=True, capture_output=True, text=True, env=env).stdout
                return json.loads(out.strip().splitlines()[-1])["median_ms"]

            opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, fused=True)

            def torch_round():
                times = []
                for _ in range(args.iters + 2):
                    for p in params:
                        p.grad = torch.randn_like(p)
                    t0 = time.perf_counter()
                    torch.nn.utils.clip_grad_norm_(params, 1.0)
                    opt.step()
                    opt.zero_grad()
                    times.append(time.perf_counter() - t0)
                return statistics.median(times[2:]) * 1e3

            ds_ms, torch_ms = [], []
            for _ in range(args.rounds):
                ds_ms.append(ds_round())
                torch_ms.append(torch_round())
            ds_t, torch_t = statistics.median(ds_ms), statistics.median(torch_ms)
            print("%-14s %12d %10.3f %10.3f %14.1f %14.1f %8.2f"
                  % (name, count, ds_t, torch_t, count / ds_t / 1e3, count / torch_t / 1e3,
                     ds_t / torch_t))


if __name__ == "__main__":
    main()
