# Hugging Face GPT-2, Llama (GQA, RoPE) and BERT-MLM exported by PyTorch 2's
# exporter both ways (dynamo=True with optimize=False, and the default
# optimize=True, which folds, merges and drops parameters:
# test/E2E/hf_exports/make_hf_exports.py made the committed files with
# PyTorch 2.x and transformers, which CI does not have) train in ds with the
# losses PyTorch recorded for the same weights, data and DeepSpeed config:
# relative difference <= 1e-4 per step over 20 steps. ds trains exactly
# PyTorch's parameters (by count, and by name where the exporter kept
# them), and the ONNX file ds-run --export-onnx writes after training
# computes the logits of PyTorch's trained model.
# REQUIRES: compiler
# RUN: %python %s --workdir %t
import json
import os
import re
import shutil
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
from e2e import parse_args, run
from train_reference import compare, train_ds

# Parameter elements PyTorch has that the exported graph never reads, so
# there is nothing to train: BERT's second token-type row (the optimized
# export folds token_type_embeddings[0] into a table; ds trains that row).
UNREAD = {"bert_opt": 32}
# A parameter the optimizer renamed (val_N), by the name ds gives it.
NAMED = {"llama_opt": "model.model.layers.0.self_attn.q_proj.weight",
         "bert_opt": "model.bert.encoder.layer.1.attention.output.LayerNorm.weight",
         "gpt2_opt": "model.transformer.h.1.attn.c_attn.bias"}

args = parse_args()
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_exports")
for name in ("gpt2", "llama", "bert", "gpt2_opt", "llama_opt", "bert_opt"):
    model = name.replace("_opt", "")
    rec = json.load(open(os.path.join(here, name + ".json")))
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    data = dict(np.load(os.path.join(here, model + ".npz")))
    onnx_path = os.path.join(here, name + ".onnx")
    losses = train_ds(onnx_path, rec["config"], data, rec["steps"], work)
    report = subprocess.run(["ds-opt", onnx_path, "--config", os.path.join(work, "ds_config.json"),
                             "--loss", "softmax-cross-entropy", "--report"], check=True,
                            capture_output=True, text=True).stdout
    trained = int(re.search(r"trained parameters: \d+ tensors, (\d+) elements", report).group(1))
    want = rec["parameters"] - UNREAD.get(name, 0)
    print("%s: ds trains %d elements, PyTorch has %d parameters (%d not read by the graph)" %
          (name, trained, rec["parameters"], UNREAD.get(name, 0)))
    if trained != want:
        sys.exit("%s: the trained set differs from PyTorch's parameters" % name)
    if name in NAMED and NAMED[name] not in report:
        sys.exit("%s: --report does not name %s" % (name, NAMED[name]))
    compare("%s (%s)" % (name, rec["export"]), losses, rec["losses"], tol=1e-4)

    # Train again with a checkpoint, export ONNX, and run it: it must give
    # PyTorch's trained logits (the recovered parameters written back).
    plan, ckpt = os.path.join(work, "train.dsplan"), os.path.join(work, "ckpt")
    shutil.rmtree(ckpt, ignore_errors=True)  # an earlier run's (ds-run refuses to mix them)
    run(["ds-run", plan, "--data", os.path.join(work, "data.npz"), "--steps", str(rec["steps"]),
         "--checkpoint-dir", ckpt, "--quiet"])
    exported = os.path.join(work, "trained.onnx")
    run(["ds-run", plan, "--checkpoint-dir", ckpt, "--export-onnx", exported])
    inputs, outputs = os.path.join(work, "in.npz"), os.path.join(work, "out.npz")
    np.savez(inputs, ids=data["ids"][:4])
    run(["ds-opt", exported, "-o", os.path.join(work, "exported.dsplan")])
    run(["ds-run", os.path.join(work, "exported.dsplan"), "--inputs", inputs, "--outputs", outputs])
    got = np.load(outputs)["logits"]
    ref = np.load(os.path.join(here, model + "_trained_logits.npy"))
    err = np.abs(got - ref).max() / np.abs(ref).max()
    print("%s: exported model vs PyTorch's trained model: max |diff| / max |logit| = %.2e" %
          (name, err))
    if err > 1e-3:
        sys.exit("%s: the exported ONNX does not compute the trained model" % name)
