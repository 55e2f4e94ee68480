"""int8 inference: ds against onnxruntime, accuracy and speed, in one run.

    bash bench/quantization.sh [--models gpt2,bert,llama] [--threads 2] [--iters 20]

(quantization.sh makes bench/.venv with PyTorch 2.x, onnxruntime,
transformers from PyPI and runs this file in it.)

Each model is bench/peers.py's (Hugging Face configs, random weights,
exported by PyTorch 2's exporter). From the same f32 ONNX file:

- onnxruntime f32, and onnxruntime's own int8 model: quantize_dynamic (int8
  weights, uint8 activations quantized per tensor at run time), run by
  onnxruntime;
- ds on onnxruntime's int8 model (its DynamicQuantizeLinear/MatMulInteger
  chains raised to ds.quantized_matmul), and ds's own --quantize
  int8-dynamic (int8 weights per output channel, activations per row) and
  int4-weight on the f32 model, and ds f32.

Accuracy: each int8 variant's logits against the f32 model's (max
relative error, and top-1 agreement over every position). Speed: median
latency, the engines taking turns (--rounds); ratios ds / onnxruntime
int8 (below 1: ds is faster) and ds int8 / ds f32.
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
import onnxruntime as ort
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peers import build  # noqa: E402

BIN = os.environ.get("DS_BIN", os.path.join(HERE, "..", "build", "bin"))


def ds_plan(onnx_path, plan, *flags):
    subprocess.run([os.path.join(BIN, "ds-opt"), onnx_path, "-o", plan, *flags], check=True,
                   capture_output=True)
    return plan


def ds_outputs(plan, inp, out, threads):
    subprocess.run([os.path.join(BIN, "ds-run"), plan, "--inputs", inp, "--outputs", out,
                    "--threads", str(threads)], check=True, capture_output=True)
    return np.load(out)


def ds_ms(plan, inp, threads, iters):
    r = subprocess.run([os.path.join(BIN, "ds-run"), plan, "--inputs", inp, "--threads",
                        str(threads), "--benchmark", str(iters)], check=True,
                       capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])["median_ms"]


def ort_ms(sess, feeds, iters):
    sess.run(None, feeds)
    t = []
    for _ in range(iters):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


def accuracy(got, ref):
    rel = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
    top1 = float((got.argmax(-1) == ref.argmax(-1)).mean())
    return rel, top1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="gpt2,bert,llama")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    from onnxruntime.quantization import QuantType, quantize_dynamic
    torch.set_num_threads(args.threads)
    print("threads=%d torch=%s onnxruntime=%s" % (args.threads, torch.__version__, ort.__version__))
    print("%-22s %9s %9s %9s %9s %9s | %8s %8s | %s" % (
        "model", "ort f32", "ort int8", "ds int8*", "ds i8dyn", "ds f32", "ds*/ort8", "i8/f32",
        "accuracy vs f32 (max rel err, top-1)"))
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            model, inputs, names, desc = build(name)
            f32 = os.path.join(work, name + ".onnx")
            with torch.no_grad():
                torch.onnx.export(model, inputs, f32, input_names=names, output_names=["out"],
                                  opset_version=18, dynamo=True)
            q8 = os.path.join(work, name + "_q8.onnx")
            quantize_dynamic(f32, q8, weight_type=QuantType.QInt8)
            feeds = {n: t.numpy() for n, t in zip(names, inputs)}
            inp = os.path.join(work, name + ".in.npz")
            np.savez(inp, **feeds)
            so = ort.SessionOptions()
            so.intra_op_num_threads = args.threads
            so.inter_op_num_threads = 1
            s32 = ort.InferenceSession(f32, so, providers=["CPUExecutionProvider"])
            s8 = ort.InferenceSession(q8, so, providers=["CPUExecutionProvider"])
            ref = s32.run(None, feeds)[0]
            plans = {
                "ds*": ds_plan(q8, os.path.join(work, name + "_q8.dsplan")),
                "i8dyn": ds_plan(f32, os.path.join(work, name + "_i8.dsplan"), "--quantize",
                                 "int8-dynamic"),
                "i4": ds_plan(f32, os.path.join(work, name + "_i4.dsplan"), "--quantize",
                              "int4-weight"),
                "f32": ds_plan(f32, os.path.join(work, name + ".dsplan")),
            }
            acc = {"ort int8": accuracy(s8.run(None, feeds)[0], ref)}
            for k, label in (("ds*", "ds on ort int8"), ("i8dyn", "ds int8-dynamic"),
                             ("i4", "ds int4-weight")):
                acc[label] = accuracy(ds_outputs(plans[k], inp, os.path.join(work, k + ".npz"),
                                                 args.threads)["out"], ref)
            per = max(1, args.iters // args.rounds)
            times = {k: [] for k in ("ort32", "ort8", "ds*", "i8dyn", "f32")}
            for _ in range(args.rounds):
                times["ort32"].append(ort_ms(s32, feeds, per))
                times["ort8"].append(ort_ms(s8, feeds, per))
                for k in ("ds*", "i8dyn", "f32"):
                    times[k].append(ds_ms(plans[k], inp, args.threads, per))
            m = {k: statistics.median(v) for k, v in times.items()}
            print("%-22s %7.2fms %7.2fms %7.2fms %7.2fms %7.2fms | %8.2f %8.2f | %s" % (
                desc, m["ort32"], m["ort8"], m["ds*"], m["i8dyn"], m["f32"], m["ds*"] / m["ort8"],
                m["i8dyn"] / m["f32"],
                ", ".join("%s %.1e %.3f" % (k, r, t) for k, (r, t) in acc.items())), flush=True)


if __name__ == "__main__":
    sys.exit(main())
