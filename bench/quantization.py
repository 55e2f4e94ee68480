"""int8 inference: ds against onnxruntime, accuracy and speed, in one run.

    bash bench/quantization.sh [--models gpt2,bert,llama] [--threads 2] [--iters 20]
    bash bench/quantization.sh --format qdq [--models resnet18,mobilenet_v2]

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

With --format qdq each model is quantized by onnxruntime's quantize_static
instead (after its quant_pre_process): the QDQ format onnxruntime
recommends, uint8 activations calibrated on random inputs, int8 weights
per channel. ds and onnxruntime run that same file; the columns are then
onnxruntime f32 and QDQ, ds QDQ and ds f32, and the accuracy is each QDQ
run's against the f32 model plus ds's top-1 agreement with onnxruntime's.
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


def ort_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def take_turns(args, feeds, inp, sessions, plans):
    """Median latency of each onnxruntime session and ds plan, the engines
    taking turns for --rounds rounds."""
    per = max(1, args.iters // args.rounds)
    times = {k: [] for k in list(sessions) + list(plans)}
    for _ in range(args.rounds):
        for k, sess in sessions.items():
            times[k].append(ort_ms(sess, feeds, per))
        for k, plan in plans.items():
            times[k].append(ds_ms(plan, inp, args.threads, per))
    return {k: statistics.median(v) for k, v in times.items()}


def accuracy(got, ref):
    rel = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
    top1 = float((got.argmax(-1) == ref.argmax(-1)).mean())
    return rel, top1


def export_single_file(model, inputs, names, path):
    """The f32 model in one file (quantize_static's tools read external data
    poorly): PyTorch 2's exporter for transformers, TorchScript's for CNNs
    (whose Conv/Relu graph quantize_static knows)."""
    import onnx
    with torch.no_grad():
        torch.onnx.export(model, inputs, path, input_names=names, output_names=["out"],
                          opset_version=17 if names == ["x"] else 18, dynamo=names != ["x"])
    m = onnx.load(path)
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")
    onnx.save(m, path)


def qdq_main(args):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process
    print("threads=%d torch=%s onnxruntime=%s (quantize_static, QDQ, per-channel)" % (
        args.threads, torch.__version__, ort.__version__))
    print("%-26s %9s %9s %9s %9s | %8s %8s | %s" % (
        "model", "ort f32", "ort qdq", "ds qdq", "ds f32", "ds/ort8", "i8/f32",
        "accuracy vs f32 (max rel err, top-1); ds vs onnxruntime"))
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            model, inputs, names, desc = build(name)
            f32 = os.path.join(work, name + ".onnx")
            export_single_file(model, inputs, names, f32)
            pre = os.path.join(work, name + "_pre.onnx")
            quant_pre_process(f32, pre, skip_symbolic_shape=True)
            feeds = {n: t.numpy() for n, t in zip(names, inputs)}
            rng = np.random.default_rng(1)

            class Calibration(CalibrationDataReader):
                def __init__(self):
                    self.it = iter([{n: (rng.integers(0, int(v.max()) + 1, v.shape).astype(v.dtype)
                                         if v.dtype.kind == "i" else
                                         rng.standard_normal(v.shape).astype(v.dtype))
                                     for n, v in feeds.items()} for _ in range(8)])

                def get_next(self):
                    return next(self.it, None)
            qdq = os.path.join(work, name + "_qdq.onnx")
            quantize_static(pre, qdq, Calibration(), quant_format=QuantFormat.QDQ,
                            per_channel=True, activation_type=QuantType.QUInt8,
                            weight_type=QuantType.QInt8)
            inp = os.path.join(work, name + ".in.npz")
            np.savez(inp, **feeds)
            s32, s8 = ort_session(f32, args.threads), ort_session(qdq, args.threads)
            ref = s32.run(None, feeds)[0]
            ort8 = s8.run(None, feeds)[0]
            plans = {"qdq": ds_plan(qdq, os.path.join(work, name + "_qdq.dsplan")),
                     "f32": ds_plan(f32, os.path.join(work, name + ".dsplan"))}
            got = ds_outputs(plans["qdq"], inp, os.path.join(work, "qdq.npz"), args.threads)["out"]
            acc = {"ort qdq": accuracy(ort8, ref), "ds qdq": accuracy(got, ref)}
            agree = float((got.argmax(-1) == ort8.argmax(-1)).mean())
            same = float((np.abs(got - ort8) <= 1e-6 * np.abs(ort8).max()).mean())
            m = take_turns(args, feeds, inp, {"ort32": s32, "ort8": s8}, plans)
            print("%-26s %7.2fms %7.2fms %7.2fms %7.2fms | %8.2f %8.2f | %s; top-1 %.3f, %.1f%% "
                  "of outputs equal" % (
                      desc, m["ort32"], m["ort8"], m["qdq"], m["f32"], m["qdq"] / m["ort8"],
                      m["qdq"] / m["f32"],
                      ", ".join("%s %.1e %.3f" % (k, r, t) for k, (r, t) in acc.items()), agree,
                      100 * same), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=None)
    ap.add_argument("--format", choices=["dynamic", "qdq"], default="dynamic",
                    help="onnxruntime's quantize_dynamic (default) or quantize_static's QDQ")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    if args.format == "qdq":
        args.models = args.models or "resnet18,mobilenet_v2"
        return qdq_main(args)
    args.models = args.models or "gpt2,bert,llama"
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
            s32, s8 = ort_session(f32, args.threads), ort_session(q8, args.threads)
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
            m = take_turns(args, feeds, inp, {"ort32": s32, "ort8": s8},
                           {k: plans[k] for k in ("ds*", "i8dyn", "f32")})
            print("%-22s %7.2fms %7.2fms %7.2fms %7.2fms %7.2fms | %8.2f %8.2f | %s" % (
                desc, m["ort32"], m["ort8"], m["ds*"], m["i8dyn"], m["f32"], m["ds*"] / m["ort8"],
                m["i8dyn"] / m["f32"],
                ", ".join("%s %.1e %.3f" % (k, r, t) for k, (r, t) in acc.items())), flush=True)


if __name__ == "__main__":
    sys.exit(main())
