"""Exports a PyTorch model to ONNX, compiles it with ds-opt, runs it with
ds-run, and compares with PyTorch's own outputs.

Relative error is max|ds - torch| / max|torch| over each output.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch


def run(cmd):
    env = None
    if cmd and cmd[0] == "mpirun":
        # Its own TMPDIR per launch: Open MPI 4.1 creates its session
        # directory there and fails ("mkdir ... File exists") when another
        # test's mpirun creates the same one at the same moment.
        env = dict(os.environ, TMPDIR=tempfile.mkdtemp(prefix="ds-mpirun-"))
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
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


def write_config(workdir, name, cfg):
    """A directory `name` under `workdir` holding `cfg` as ds_config.json;
    returns (the directory, the config's path)."""
    import json
    d = os.path.join(workdir, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "ds_config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return d, path


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--workdir", required=True)
    return p.parse_args()


MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def rank_reports(stdout):
    """The {"rank": ...} lines ds-run --rank-report prints, by rank."""
    import json
    reps = [json.loads(l) for l in stdout.splitlines() if l.startswith('{"rank"')]
    return {r["rank"]: r for r in reps}


def tensor_parallel_compare(name, onnx_path, inputs, ref_outputs, workdir, tp, parallel_bytes,
                            tol=1e-5, output_names=("output",)):
    """Compiles `onnx_path` for one rank and with --tensor-parallel tp, runs
    the latter under mpirun -np tp, and checks its outputs against the
    one-rank plan's and `ref_outputs` (PyTorch's) within `tol`, and that each
    rank holds the one-rank weights minus (tp-1)/tp of `parallel_bytes` (the
    bytes of the matrices and column biases tensor parallelism splits)."""
    inp = os.path.join(workdir, name + ".in.npz")
    np.savez(inp, **inputs)
    one = os.path.join(workdir, name + ".tp1.dsplan")
    run(["ds-opt", onnx_path, "-o", one])
    one_out = os.path.join(workdir, name + ".tp1.out.npz")
    single = rank_reports(run(["ds-run", one, "--inputs", inp, "--outputs", one_out,
                               "--rank-report"]))[0]["weight_bytes"]
    plan = os.path.join(workdir, "%s.tp%d.dsplan" % (name, tp))
    run(["ds-opt", onnx_path, "--tensor-parallel", str(tp), "-o", plan])
    out = os.path.join(workdir, "%s.tp%d.out.npz" % (name, tp))
    reps = rank_reports(run(MPIRUN + ["-np", str(tp), "ds-run", plan, "--inputs", inp,
                                      "--outputs", out, "--rank-report"]))
    if sorted(reps) != list(range(tp)):
        sys.exit("%s: expected reports from ranks 0..%d, got %s" % (name, tp - 1, sorted(reps)))
    got, base = np.load(out), np.load(one_out)
    worst = 0.0
    for oname, ref in zip(output_names, ref_outputs):
        e_one = relative_error(got[oname], base[oname])
        e_ref = relative_error(got[oname], ref)
        worst = max(worst, e_one, e_ref)
        print("%s tp=%d output %s: relative error %.3g vs one rank, %.3g vs PyTorch (tolerance %.1g)"
              % (name, tp, oname, e_one, e_ref, tol))
    if worst > tol:
        sys.exit("%s tp=%d: relative error %.3g exceeds %.1g" % (name, tp, worst, tol))
    want = single - parallel_bytes * (tp - 1) // tp
    # ds-opt --report predicts what each rank holds before anything runs.
    report = run(["ds-opt", onnx_path, "--tensor-parallel", str(tp), "--report"])
    predicted = sum(int(l.split()[1]) for l in report.splitlines()
                    if l.split()[:1] in (["parameters"], ["constants"]))
    print("%s tp=%d: ds-opt --report predicts %d weight bytes per rank" % (name, tp, predicted))
    if "world size %d" % tp not in report or predicted != reps[0]["weight_bytes"]:
        sys.exit("%s tp=%d: --report (%d B) disagrees with ds-run (%d B)"
                 % (name, tp, predicted, reps[0]["weight_bytes"]))
    for r, rep in sorted(reps.items()):
        print("%s tp=%d rank %d: %d weight bytes (one rank: %d, expected %d)"
              % (name, tp, r, rep["weight_bytes"], single, want))
        if abs(rep["weight_bytes"] - want) > 0.02 * want:
            sys.exit("%s tp=%d rank %d holds %d weight bytes, expected about %d"
                     % (name, tp, r, rep["weight_bytes"], want))
    return worst
