# Hugging Face GPT-2, Llama (GQA, RoPE) and BERT-MLM exported by PyTorch 2's
# exporter (dynamo=True, optimize=False: test/E2E/hf_exports/make_hf_exports.py
# made the committed files with PyTorch 2.x and transformers, which CI does
# not have) train in ds with the losses PyTorch recorded for the same
# weights, data and DeepSpeed config: relative difference <= 1e-4 per step
# over 20 steps; ds trains exactly PyTorch's parameter count.
# REQUIRES: compiler
# RUN: %python %s --workdir %t
import json
import os
import re
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
from e2e import parse_args
from train_reference import compare, train_ds

args = parse_args()
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_exports")
for name in ("gpt2", "llama", "bert"):
    rec = json.load(open(os.path.join(here, name + ".json")))
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    data = dict(np.load(os.path.join(here, name + ".npz")))
    onnx_path = os.path.join(here, name + ".onnx")
    losses = train_ds(onnx_path, rec["config"], data, rec["steps"], work)
    report = subprocess.run(["ds-opt", onnx_path, "--config", os.path.join(work, "ds_config.json"),
                             "--loss", "softmax-cross-entropy", "--report"], check=True,
                            capture_output=True, text=True).stdout
    trained = int(re.search(r"trained parameters: \d+ tensors, (\d+) elements", report).group(1))
    print("%s: ds trains %d elements, PyTorch has %d parameters" % (name, trained, rec["parameters"]))
    if trained != rec["parameters"]:
        sys.exit("%s: the trained set differs from PyTorch's parameters" % name)
    compare("%s (%s)" % (name, rec["export"]), losses, rec["losses"], tol=1e-4)
