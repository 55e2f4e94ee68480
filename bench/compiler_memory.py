#!/usr/bin/env python3
"""Peak memory of ds-opt itself, against the size of the model it compiles:
a GPT-style decoder with --layers layers (48 by default, d 256: 156 MB of
fp32 weights) exported by PyTorch with the weights inside the .onnx and as
external data, compiled for inference (fp32 and bf16) and for training
(one rank; ZeRO-2 and ZeRO-3 on 2 ranks). Prints peak RSS, the model's
bytes and the ratio, and the base RSS of compiling a tiny model (the
libraries ds-opt maps; the "constant" of peak = ratio x model + constant).

  /usr/bin/python3 bench/compiler_memory.py [--layers 48] [--d 256] [--ds-opt build/bin/ds-opt]

Peak RSS is the kernel's maxrss of the ds-opt process (/usr/bin/time %M),
so it counts everything resident: heap, mapped libraries and file pages.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "lib"))
import onnx
import torch
from torch_models import GPT


def peak_rss_mb(cmd):
    """Runs cmd; returns its peak resident set in MB. Through /usr/bin/time:
    a child forked from this Python process would inherit its (torch-sized)
    ru_maxrss, which execve preserves."""
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), r.stderr))
    return int(r.stderr.strip().splitlines()[-1]) / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--ds-opt", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                      "bin", "ds-opt"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ds-compiler-memory-")
    torch.manual_seed(0)
    model = GPT(vocab=args.vocab, ctx=64, d=args.d, heads=4, layers=args.layers).eval()
    inline = os.path.join(work, "gpt.onnx")
    torch.onnx.export(model, (torch.zeros(1, 64, dtype=torch.long),), inline,
                      input_names=["idx"], output_names=["logits"], opset_version=17)
    external = os.path.join(work, "gpt_ext.onnx")
    onnx.save(onnx.load(inline), external, save_as_external_data=True,
              location="gpt_ext.onnx.data", size_threshold=1024)
    model_mb = sum(p.numel() for p in model.parameters()) * 4 / 2**20
    tiny = os.path.join(work, "tiny.onnx")
    torch.onnx.export(GPT(vocab=64, ctx=16, d=32, heads=4, layers=1).eval(),
                      (torch.zeros(1, 16, dtype=torch.long),), tiny,
                      input_names=["idx"], output_names=["logits"], opset_version=17)
    base = peak_rss_mb([args.ds_opt, tiny, "-o", os.path.join(work, "tiny.dsplan")])

    def config(name, stage, ranks):
        path = os.path.join(work, name + ".json")
        json.dump({"train_batch_size": ranks, "train_micro_batch_size_per_gpu": 1,
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
                   "zero_optimization": {"stage": stage}}, open(path, "w"))
        return path

    out = os.path.join(work, "out.dsplan")
    train = ["--loss", "softmax-cross-entropy", "-o", out]
    cases = [
        ("inference fp32, weights in the .onnx", [inline, "-o", out]),
        ("inference fp32, external data", [external, "-o", out]),
        ("inference bf16 (--dtype bf16)", [inline, "--dtype", "bf16", "-o", out]),
        ("training, 1 rank", [inline, "--config", config("z0", 0, 1)] + train),
        ("training ZeRO-2, 2 ranks", [inline, "--config", config("z2", 2, 2), "--world-size", "2"]
         + train),
        ("training ZeRO-3, 2 ranks", [inline, "--config", config("z3", 3, 2), "--world-size", "2"]
         + train),
    ]
    print("model: GPT %d layers, d %d, vocab %d: %.1f MB of fp32 weights" %
          (args.layers, args.d, args.vocab, model_mb))
    print("ds-opt base RSS (a 1-layer model): %.1f MB" % base)
    print("%-40s %12s %14s %18s" % ("compile", "peak RSS MB", "peak / model", "(peak-base)/model"))
    for name, cmd in cases:
        peak = peak_rss_mb([args.ds_opt] + cmd)
        print("%-40s %12.1f %14.2f %18.2f" % (name, peak, peak / model_mb, (peak - base) / model_mb))


if __name__ == "__main__":
    main()
