# A run killed while saving a checkpoint leaves the previous checkpoint
# intact and the new one invisible; resuming from it reproduces the
# uninterrupted run's losses bit for bit (same data order, optimizer state,
# schedule position), in order and with --shuffle --seed.
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import json
import os
import shutil
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
from e2e import parse_args
from torch_models import MLP

args = parse_args()
w = args.workdir
shutil.rmtree(w, ignore_errors=True)
os.makedirs(w)
torch.manual_seed(0)
torch.onnx.export(MLP(), (torch.zeros(8, 32),), os.path.join(w, "mlp.onnx"), input_names=["x"],
                  output_names=["logits"], opset_version=17)
cfg = {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 8,
       "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.01}},
       "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 3e-3, "warmup_num_steps": 6}}}
json.dump(cfg, open(os.path.join(w, "ds_config.json"), "w"))
rng = np.random.default_rng(0)
np.savez(os.path.join(w, "data.npz"), x=rng.standard_normal((40, 32)).astype(np.float32),
         labels=rng.integers(0, 10, 40).astype(np.int64))
plan = os.path.join(w, "train.dsplan")
subprocess.run(["ds-opt", os.path.join(w, "mlp.onnx"), "--config", os.path.join(w, "ds_config.json"),
                "--loss", "softmax-cross-entropy", "-o", plan], check=True)


def losses(log):
    return {json.loads(l)["step"]: json.loads(l)["loss"] for l in open(log)}


def train(tag, *extra, env=None, expect_fail=False):
    cmd = ["ds-run", plan, "--data", os.path.join(w, "data.npz"), "--steps", "12",
           "--log", os.path.join(w, tag + ".jsonl"), *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    if (r.returncode != 0) != expect_fail:
        sys.exit("%s: exit %d\n%s" % (tag, r.returncode, r.stderr))
    return r


for order in ([], ["--shuffle", "--seed", "7"]):
    name = "shuffled" if order else "in-order"
    train("full", *order)
    full = losses(os.path.join(w, "full.jsonl"))
    ck = os.path.join(w, "ckpt")
    shutil.rmtree(ck, ignore_errors=True)
    r = train("crashed", "--checkpoint-dir", ck, "--checkpoint-every", "4", *order,
              env={"DS_TEST_ABORT_DURING_CHECKPOINT": "8"}, expect_fail=True)
    assert "aborting during the checkpoint save" in r.stderr, r.stderr
    latest = open(os.path.join(ck, "latest")).read().strip()
    assert latest == "step_00000004", latest
    assert not os.path.exists(os.path.join(ck, "step_00000008")), os.listdir(ck)
    train("resumed", "--checkpoint-dir", ck, "--resume", *order)
    resumed = losses(os.path.join(w, "resumed.jsonl"))
    assert sorted(resumed) == list(range(5, 13)), sorted(resumed)
    for step, loss in resumed.items():
        if loss != full[step]:
            sys.exit("%s: step %d loss %r after resume, %r uninterrupted" % (name, step, loss, full[step]))
    assert open(os.path.join(ck, "latest")).read().strip() == "step_00000012"
    print("%s: killed during the step-8 save, resumed from step 4, steps 5-12 identical" % name)
