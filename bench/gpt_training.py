"""GPT-style decoder training step: ds-run vs PyTorch, same threads, same
batch, same optimizer (AdamW, clipping 1.0).

    bench/.venv/bin/python bench/gpt_training.py [--threads 2] [--steps 12]

(bench/.venv comes from `bash bench/peers.sh`: PyTorch 2.x from PyPI, the
peer whose speed counts, with its fused AdamW; Debian's /usr/bin/python3
runs it against PyTorch 1.13, the test reference, which is no speed peer.)

Step time is the median over the steps after 2 warm-up steps: ds-run's
JSONL log ("time" per optimizer step) against PyTorch eager (forward,
backward, clip_grad_norm_, AdamW.step, zero_grad). Also prints ds-opt
--report's memory table. Checks the first losses agree before timing.
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
from torch_models import GPT  # noqa: E402

BIN = os.environ.get("DS_BIN", os.path.join(HERE, "..", "build", "bin"))
CONFIGS = [
    # name, vocab, ctx, d, heads, layers, batch, seq
    ("gpt-small (d=256, L=4, B=8, T=128)", 2048, 128, 256, 8, 4, 8, 128),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=12, help="steps per round")
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds in which ds and PyTorch take turns (median of round medians)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print("threads=%d steps=%d rounds=%d torch=%s" % (args.threads, args.steps, args.rounds,
                                                     torch.__version__))
    for name, vocab, ctx, d, heads, layers, batch, seq in CONFIGS:
        with tempfile.TemporaryDirectory() as work:
            torch.manual_seed(0)
            model = GPT(vocab=vocab, ctx=ctx, d=d, heads=heads, layers=layers)
            rng = np.random.default_rng(0)
            tokens = rng.integers(0, vocab, (batch * 4, seq + 1)).astype(np.int64)
            data = {"idx": tokens[:, :-1].copy(), "labels": tokens[:, 1:].copy()}
            onnx_path = os.path.join(work, "gpt.onnx")
            # PyTorch 2's default (dynamo) export folds parameters and writes
            # literals as initializers, which ds cannot train exactly yet:
            # the TorchScript exporter keeps one initializer per parameter.
            legacy = {"dynamo": False} if int(torch.__version__.split(".")[0]) >= 2 else {}
            torch.onnx.export(model, (torch.from_numpy(data["idx"][:batch]),), onnx_path,
                              input_names=["idx"], output_names=["logits"], opset_version=17,
                              **legacy)
            cfg = {"train_micro_batch_size_per_gpu": batch, "gradient_clipping": 1.0,
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}}}
            cfg_path = os.path.join(work, "cfg.json")
            json.dump(cfg, open(cfg_path, "w"))
            plan = os.path.join(work, "train.dsplan")
            report = subprocess.run([os.path.join(BIN, "ds-opt"), onnx_path, "--config", cfg_path,
                                     "--loss", "softmax-cross-entropy", "-o", plan, "--report"],
                                    check=True, capture_output=True, text=True).stdout
            np.savez(os.path.join(work, "data.npz"), **data)
            log = os.path.join(work, "log.jsonl")
            env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
            # PyTorch 2's fused CPU AdamW is its fastest optimizer step.
            fused = {"fused": True} if int(torch.__version__.split(".")[0]) >= 2 else {}
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, **fused)
            losses = []

            def torch_round():
                times = []
                for step in range(args.steps):
                    i = (step * batch) % len(tokens)
                    idx = torch.from_numpy(data["idx"][i:i + batch])
                    y = torch.from_numpy(data["labels"][i:i + batch])
                    t0 = time.perf_counter()
                    logits = model(idx)
                    loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
                    opt.zero_grad()
                    times.append(time.perf_counter() - t0)
                    losses.append(loss.item())
                return statistics.median(times[2:]) * 1e3

            def ds_round():
                subprocess.run([os.path.join(BIN, "ds-run"), plan, "--data",
                                os.path.join(work, "data.npz"), "--steps", str(args.steps),
                                "--log", log, "--threads", str(args.threads), "--quiet"],
                               check=True, env=env)
                return statistics.median(json.loads(l)["time"] for l in list(open(log))[2:]) * 1e3

            # The engines take turns, round by round, and each reports the
            # median of its round medians: this shared machine's load swings
            # by tens of percent between sequential runs.
            rows = None
            ds_rounds, torch_rounds = [], []
            for r in range(args.rounds):
                ds_rounds.append(ds_round())
                if rows is None:
                    rows = [json.loads(l) for l in open(log)]
                torch_rounds.append(torch_round())
            ds_ms, torch_ms = statistics.median(ds_rounds), statistics.median(torch_rounds)
            agree = abs(rows[0]["loss"] - losses[0]) / losses[0]
            print(report.rstrip())
            print("%s  ds-run %8.2f ms/step  PyTorch %8.2f ms/step  ratio ds/PyTorch %.2f  "
                  "(first-step loss rel diff %.1e)" % (name, ds_ms, torch_ms, ds_ms / torch_ms, agree))


if __name__ == "__main__":
    main()
