"""Exports a PyTorch model to ONNX, compiles it with ds-opt, runs it with
ds-run, and compares with PyTorch's own outputs.

Relative error is max|ds - torch| / max|torch| over each output.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import torch


def run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.stderr.write("command failed: %s\n%s%s" % (" ".join(cmd), res.stdout, res.stderr))
        sys.exit(1)
    return res.stdout


def relative_error(got, ref):
    scale = max(float(np.abs(ref).max()), 1e-30)
    return float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max()) / scale


def export_and_compare(name, model, inputs, workdir, opset, tol=1e-5, dynamic_axes=None,
                       input_shapes=None, output_names=("output",)):
    """inputs: dict name -> numpy array, in the model's argument order."""
    os.makedirs(workdir, exist_ok=True)
    model.eval()
    path = os.path.join(workdir, name + ".onnx")
    args = tuple(torch.from_numpy(v) for v in inputs.values())
    # Export with autograd on, as training code does: under no_grad,
    # TransformerEncoderLayer takes a fused fast path that has no ONNX form.
    torch.onnx.export(model, args, path, input_names=list(inputs.keys()),
                      output_names=list(output_names), opset_version=opset,
                      dynamic_axes=dynamic_axes or {})
    ref = model(*args)
    refs = [r.detach() for r in ([ref] if isinstance(ref, torch.Tensor) else list(ref))]
    onnx.checker.check_model(onnx.load(path))

    plan = os.path.join(workdir, name + ".dsplan")
    cmd = ["ds-opt", path, "-o", plan]
    for k, shape in (input_shapes or {}).items():
        cmd += ["--input-shape", "%s=%s" % (k, ",".join(str(d) for d in shape))]
    run(cmd)
    inp = os.path.join(workdir, name + ".in.npz")
    out = os.path.join(workdir, name + ".out.npz")
    np.savez(inp, **inputs)
    run(["ds-run", plan, "--inputs", inp, "--outputs", out])
    got = np.load(out)
    worst = 0.0
    for oname, r in zip(output_names, refs):
        r = r.numpy()
        g = got[oname]
        if g.shape != r.shape or g.dtype != r.dtype:
            sys.exit("%s: output %s is %s %s, PyTorch gives %s %s"
                     % (name, oname, g.dtype, g.shape, r.dtype, r.shape))
        err = relative_error(g, r)
        worst = max(worst, err)
        print("%s opset %d output %s: relative error %.3g (tolerance %.1g)" % (name, opset, oname, err, tol))
    if worst > tol:
        sys.exit("%s: relative error %.3g exceeds %.1g" % (name, worst, tol))
    return worst


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--workdir", required=True)
    return p.parse_args()
