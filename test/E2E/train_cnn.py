# A small CNN (strided/padded/grouped conv, max and average pooling) trained
# by ds and by PyTorch from the same weights and batches gives the same
# per-step losses (relative error <= 1e-4 over 12 steps, AdamW): conv and
# pooling gradients hold end to end, not only against finite differences.
# With "bf16" the convolutions and their gradients run in bf16 (fp32 sums)
# and the losses track torch.autocast("cpu", bfloat16) within 2e-3. An
# eval-mode BatchNorm trains its scale and bias, never its running
# statistics (buffers), as PyTorch does.
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import copy
import os
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from e2e import parse_args
from train_reference import batch_sizes, compare, train_ds, train_torch

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
rng = np.random.default_rng(1)
data = {"x": rng.standard_normal((32, 3, 16, 16)).astype(np.float32),
        "labels": rng.integers(0, 10, 32).astype(np.int64)}
torch.manual_seed(1)
model = nn.Sequential(
    nn.Conv2d(3, 8, 3, stride=1, padding=1), nn.ReLU(),
    nn.MaxPool2d(2, ceil_mode=True),
    nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2), nn.ReLU(),
    nn.AvgPool2d(2), nn.Flatten(), nn.Linear(16 * 2 * 2, 10))
cfg = {"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
       "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "weight_decay": 0.01}}}
mbs, _ = batch_sizes(cfg)
onnx_path = os.path.join(args.workdir, "cnn.onnx")
torch.onnx.export(copy.deepcopy(model), (torch.zeros(mbs, 3, 16, 16),), onnx_path, input_names=["x"],
                  output_names=["logits"], opset_version=17)
reference = copy.deepcopy(model)
ds_losses = train_ds(onnx_path, cfg, data, 12, args.workdir)
torch_losses = train_torch(model, cfg, data, 12, F.cross_entropy)
compare("cnn_adamw", ds_losses, torch_losses)

bf16_dir = os.path.join(args.workdir, "bf16")
os.makedirs(bf16_dir, exist_ok=True)
torch.manual_seed(1)
ds_bf16 = train_ds(onnx_path, dict(cfg, bf16={"enabled": True}), data, 12, bf16_dir)
torch_bf16 = train_torch(copy.deepcopy(reference), cfg, data, 12, F.cross_entropy, autocast=torch.bfloat16)
compare("cnn_adamw bf16 vs torch.autocast", ds_bf16, torch_bf16, tol=2e-3)
far = max(abs(a - b) / abs(b) for a, b in zip(ds_bf16, torch_losses))
print("cnn bf16 vs fp32: worst relative difference %.2e" % far)
if far < 1e-4:
    sys.exit("bf16 CNN training equals fp32 training: the convolutions did not run in bf16")

# An eval-mode BatchNorm (TorchScript export; after a Linear, which the
# exporter does not fold it into as it does a Conv's, so the running
# statistics are plain initializers): its running mean and variance are
# buffers, not trained (as in PyTorch); its scale and bias are.
torch.manual_seed(2)
bn_model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(),
                         nn.Linear(16, 10))
with torch.no_grad():
    bn_model[5].running_mean.uniform_(-0.5, 0.5)
    bn_model[5].running_var.uniform_(0.5, 2.0)
bn_model.eval()
bn_path = os.path.join(args.workdir, "cnn_bn.onnx")
torch.onnx.export(copy.deepcopy(bn_model), (torch.zeros(mbs, 3, 16, 16),), bn_path, input_names=["x"],
                  output_names=["logits"], opset_version=13)
bn_dir = os.path.join(args.workdir, "bn")
os.makedirs(bn_dir, exist_ok=True)
ds_bn = train_ds(bn_path, cfg, data, 6, bn_dir)
torch_bn = train_torch(bn_model, cfg, data, 6, F.cross_entropy)
compare("cnn batchnorm (eval) adamw", ds_bn, torch_bn)
