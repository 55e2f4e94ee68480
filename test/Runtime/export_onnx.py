# --export-onnx writes the original graph with the trained weights: ONNX's
# checker accepts it and its outputs match ds-run's forward with the same
# checkpoint. Covers Gemm's transposed weights (MLP) and a tied GPT head.
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import json
import os
import shutil
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import onnx
from onnx import numpy_helper
import torch
from e2e import parse_args
from torch_models import GPT, MLP

args = parse_args()
w = args.workdir
shutil.rmtree(w, ignore_errors=True)
os.makedirs(w)


def run(*cmd):
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if r.returncode:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), r.stderr))


rng = np.random.default_rng(0)
cases = {
    "mlp": (MLP(), {"x": rng.standard_normal((8, 32)).astype(np.float32)},
            rng.integers(0, 10, 32).astype(np.int64), lambda n: rng.standard_normal((n, 32)).astype(np.float32)),
    "gpt": (GPT(vocab=32, ctx=8, d=16, heads=2, layers=1, tied=True),
            {"idx": rng.integers(0, 32, (4, 8)).astype(np.int64)},
            rng.integers(0, 32, (16, 8)).astype(np.int64), lambda n: rng.integers(0, 32, (n, 8)).astype(np.int64)),
}
for name, (model, example, labels, sample) in cases.items():
    d = os.path.join(w, name)
    os.makedirs(d)
    src = os.path.join(d, "model.onnx")
    inp = next(iter(example))
    torch.onnx.export(model, tuple(torch.from_numpy(v) for v in example.values()), src,
                      input_names=[inp], output_names=["out"], opset_version=17)
    cfg = {"train_micro_batch_size_per_gpu": len(example[inp]),
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}}}
    json.dump(cfg, open(os.path.join(d, "cfg.json"), "w"))
    plan = os.path.join(d, "train.dsplan")
    run("ds-opt", src, "--config", os.path.join(d, "cfg.json"), "--loss", "softmax-cross-entropy", "-o", plan)
    np.savez(os.path.join(d, "data.npz"), **{inp: sample(len(labels)), "labels": labels})
    ck = os.path.join(d, "ckpt")
    run("ds-run", plan, "--data", os.path.join(d, "data.npz"), "--steps", "5", "--checkpoint-dir", ck)
    out = os.path.join(d, "trained.onnx")
    run("ds-run", plan, "--checkpoint-dir", ck, "--export-onnx", out)
    trained = onnx.load(out)
    onnx.checker.check_model(trained)
    before = {i.name: numpy_helper.to_array(i) for i in onnx.load(src).graph.initializer}
    after = {i.name: numpy_helper.to_array(i) for i in trained.graph.initializer}
    changed = [n for n in before if before[n].dtype == np.float32 and not np.array_equal(before[n], after[n])]
    assert changed, "no weight changed"
    # The exported model, compiled afresh, matches the training plan's forward.
    np.savez(os.path.join(d, "in.npz"), **example)
    run("ds-run", plan, "--checkpoint-dir", ck, "--inputs", os.path.join(d, "in.npz"),
        "--outputs", os.path.join(d, "plan_out.npz"))
    run("ds-opt", out, "-o", os.path.join(d, "trained.dsplan"))
    run("ds-run", os.path.join(d, "trained.dsplan"), "--inputs", os.path.join(d, "in.npz"),
        "--outputs", os.path.join(d, "onnx_out.npz"))
    a = np.load(os.path.join(d, "plan_out.npz"))["out"]
    b = np.load(os.path.join(d, "onnx_out.npz"))["out"]
    err = np.abs(a - b).max() / np.abs(a).max()
    assert err < 1e-6, err
    print("%s: %d trained weights exported, checker passes, outputs agree (rel %.1e)" % (name, len(changed), err))
