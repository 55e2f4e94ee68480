# An MLP trained by ds (ds-opt --config, ds-run --data) and by PyTorch from
# the same initial weights and batches gives the same per-step losses
# (relative error <= 1e-4 over 20 steps): AdamW with weight decay, gradient
# accumulation, clipping and a warmup schedule; then Adam (L2 mode), Lamb, Lion,
# Adagrad and SGD with momentum.
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import copy
import os
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
import torch.nn.functional as F
from e2e import parse_args
from torch_models import MLP
from train_reference import batch_sizes, compare, train_ds, train_torch

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
rng = np.random.default_rng(0)
data = {"x": rng.standard_normal((48, 32)).astype(np.float32),
        "labels": rng.integers(0, 10, 48).astype(np.int64)}

configs = {
    "adamw_warmup_gas2": {
        "train_batch_size": 16, "train_micro_batch_size_per_gpu": 8,
        "gradient_clipping": 1.0,
        "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.99], "eps": 1e-8,
                                                   "weight_decay": 0.01}},
        "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": 3e-3,
                                                          "warmup_num_steps": 5, "total_num_steps": 20,
                                                          "warmup_type": "linear"}},
    },
    "adam_l2_cosine": {
        "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
        "gradient_clipping": 0.5,
        "optimizer": {"type": "Adam", "params": {"lr": 2e-3, "weight_decay": 0.01, "adam_w_mode": False}},
        "scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": 4, "total_num_steps": 20}},
    },
    # DeepSpeed's Lion (its CPU kernel's arithmetic) and Adagrad
    # (torch.optim.Adagrad, what DeepSpeed runs without offload), with a
    # schedule and clipping.
    "lion_wd": {
        "train_batch_size": 8, "gradient_clipping": 1.0,
        "optimizer": {"type": "Lion", "params": {"lr": 1e-3, "betas": [0.9, 0.99],
                                                 "weight_decay": 0.1}},
        "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": 1e-3,
                                                     "warmup_num_steps": 5}},
    },
    # DeepSpeed's FusedLamb: a trust ratio per tensor, clamped.
    "lamb_wd": {
        "train_batch_size": 8, "gradient_clipping": 1.0,
        "optimizer": {"type": "Lamb", "params": {"lr": 5e-3, "weight_decay": 0.01,
                                                 "max_coeff": 0.5, "min_coeff": 0.01}},
    },
    "adagrad_wd": {
        "train_batch_size": 16, "train_micro_batch_size_per_gpu": 8, "gradient_clipping": 1.0,
        "optimizer": {"type": "Adagrad", "params": {"lr": 0.05, "weight_decay": 0.01}},
    },
    "sgd_momentum": {
        "train_batch_size": 8, "gradient_clipping": 0.0,
        "optimizer": {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3}},
    },
}
for name, cfg in configs.items():
    torch.manual_seed(0)
    model = MLP()
    mbs, _ = batch_sizes(cfg)
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    onnx_path = os.path.join(work, "mlp.onnx")
    torch.onnx.export(copy.deepcopy(model), (torch.zeros(mbs, 32),), onnx_path, input_names=["x"],
                      output_names=["logits"], opset_version=17)
    ds_losses = train_ds(onnx_path, cfg, data, 20, work)
    torch_losses = train_torch(model, cfg, data, 20, F.cross_entropy)
    compare(name, ds_losses, torch_losses)

# The loss computed by the graph itself (SoftmaxCrossEntropyLoss node):
# ds-opt --loss graph --loss-output loss.
class WithLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.m = MLP()

    def forward(self, x, labels):
        return F.cross_entropy(self.m(x), labels)


cfg = configs["adamw_warmup_gas2"]
torch.manual_seed(0)
model = WithLoss()
work = os.path.join(args.workdir, "graph_loss")
os.makedirs(work, exist_ok=True)
onnx_path = os.path.join(work, "mlp_loss.onnx")
torch.onnx.export(copy.deepcopy(model), (torch.zeros(8, 32), torch.zeros(8, dtype=torch.long)), onnx_path,
                  input_names=["x", "labels"], output_names=["loss"], opset_version=17)
ds_losses = train_ds(onnx_path, cfg, data, 20, work, loss="graph", extra=["--loss-output", "loss"])
torch_losses = train_torch(model.m, cfg, data, 20, F.cross_entropy)
compare("graph_loss", ds_losses, torch_losses)
