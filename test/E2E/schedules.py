# DeepSpeed's OneCycle (with momentum cycling, stairs, the decay after the
# cycle) and LRRangeTest (continuous and staircase): the learning rate and
# Adam's beta1 ds-run logs for each of 40 steps equal the values DeepSpeed
# 0.19.8's own lr_schedules.py gives (schedules/deepspeed_values.json, made by
# schedules/make_schedule_values.py), and AdamW trained under OneCycle with
# its cycled betas follows PyTorch's Adam given DeepSpeed's values step by
# step (losses within 1e-4 over 40 steps).
# REQUIRES: torch, compiler
# RUN: rm -rf %t && %python %s --workdir %t
import copy
import json
import os
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
import torch.nn.functional as F
from e2e import parse_args
from torch_models import MLP
from train_reference import compare, train_torch, train_ds

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schedules")
ref = json.load(open(os.path.join(here, "deepspeed_values.json")))
steps = ref["steps"]
rng = np.random.default_rng(0)
data = {"x": rng.standard_normal((48, 32)).astype(np.float32),
        "labels": rng.integers(0, 10, 48).astype(np.int64)}
torch.manual_seed(0)
model = MLP()
onnx_path = os.path.join(args.workdir, "mlp.onnx")
torch.onnx.export(copy.deepcopy(model), (torch.zeros(8, 32),), onnx_path, input_names=["x"],
                  output_names=["logits"], opset_version=17)

for name, case in ref["cases"].items():
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    cfg = {"train_batch_size": 8, "gradient_clipping": 1.0,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}},
           "scheduler": case["scheduler"]}
    ds_losses = train_ds(onnx_path, cfg, data, steps, work)
    log = [json.loads(l) for l in open(os.path.join(work, "train.jsonl"))]
    cycled = case["scheduler"]["type"] == "OneCycle" and \
        case["scheduler"]["params"].get("cycle_momentum", True)
    for i, rec in enumerate(log):
        want = case["lr"][i]
        if abs(rec["lr"] - want) > 1e-7 * max(abs(want), 1e-12):
            sys.exit("%s step %d: ds's lr %r, DeepSpeed's %r" % (name, i + 1, rec["lr"], want))
        if cycled != ("beta1" in rec) or (cycled and abs(rec["beta1"] - case["beta1"][i]) > 1e-9):
            sys.exit("%s step %d: ds's beta1 %r, DeepSpeed's %r" % (name, i + 1, rec.get("beta1"),
                                                                   case["beta1"][i]))
    print("%s: %d steps, lr%s as DeepSpeed %s" % (name, steps, " and beta1" if cycled else "",
                                                  ref["deepspeed"]))
    if cycled:
        torch_losses = train_torch(copy.deepcopy(model), cfg, data, steps, F.cross_entropy,
                                   schedule=case)
        compare(name + " AdamW with cycled betas", ds_losses, torch_losses)
