"""GPT-style decoder inference: ds-run vs PyTorch, same threads, same input.

    /usr/bin/python3 bench/gpt_inference.py [--threads 2] [--iters 20]

Exports the model with torch.onnx.export, compiles it with ds-opt, and times
ds-run (its --benchmark mode: 2 warm-up runs, then N timed runs, median) and
PyTorch eager under torch.no_grad() the same way. Prints one line per
configuration and the latency ratio ds / PyTorch (below 1 means ds is
faster). Checks that the two agree before timing.
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
from torch_models import GPT, randomize_layernorms  # noqa: E402

BIN = os.environ.get("DS_BIN", os.path.join(HERE, "..", "build", "bin"))

CONFIGS = [
    # name, vocab, ctx, d, heads, layers, batch, seq
    ("gpt-small  (d=256, L=4, B=4, T=128)", 2048, 128, 256, 8, 4, 4, 128),
    ("gpt-medium (d=512, L=6, B=2, T=128)", 4096, 128, 512, 8, 6, 2, 128),
]


def time_torch(model, idx, iters):
    with torch.no_grad():
        for _ in range(2):
            model(idx)
        ms = []
        for _ in range(iters):
            t0 = time.perf_counter()
            model(idx)
            ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--opset", type=int, default=17)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print("threads=%d opset=%d iters=%d torch=%s" % (args.threads, args.opset, args.iters, torch.__version__))
    with tempfile.TemporaryDirectory() as work:
        for name, vocab, ctx, d, heads, layers, batch, seq in CONFIGS:
            torch.manual_seed(0)
            model = GPT(vocab=vocab, ctx=ctx, d=d, heads=heads, layers=layers).eval()
            randomize_layernorms(model, torch.Generator().manual_seed(0))
            idx = torch.from_numpy(np.random.default_rng(0).integers(0, vocab, (batch, seq)).astype(np.int64))
            onnx_path = os.path.join(work, "gpt.onnx")
            plan = os.path.join(work, "gpt.dsplan")
            torch.onnx.export(model, (idx,), onnx_path, input_names=["idx"], output_names=["logits"],
                              opset_version=args.opset)
            subprocess.run([os.path.join(BIN, "ds-opt"), onnx_path, "-o", plan], check=True)
            inp, out = os.path.join(work, "in.npz"), os.path.join(work, "out.npz")
            np.savez(inp, idx=idx.numpy())
            res = subprocess.run([os.path.join(BIN, "ds-run"), plan, "--inputs", inp, "--outputs", out,
                                  "--threads", str(args.threads), "--benchmark", str(args.iters)],
                                 check=True, capture_output=True, text=True)
            ds_ms = json.loads(res.stdout.strip().splitlines()[-1])["median_ms"]
            with torch.no_grad():
                ref = model(idx).numpy()
            err = np.abs(np.load(out)["logits"] - ref).max() / np.abs(ref).max()
            torch_ms = time_torch(model, idx, args.iters)
            print("%s  ds-run %8.2f ms  PyTorch %8.2f ms  ratio ds/PyTorch %.2f  (rel err %.1e)"
                  % (name, ds_ms, torch_ms, ds_ms / torch_ms, err))


if __name__ == "__main__":
    main()
