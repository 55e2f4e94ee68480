# Layers cloned with copy.deepcopy start with equal weights but are separate
# parameters, as nn.TransformerEncoder's are: ds trains each on its own and
# matches PyTorch (TorchScript writes the clones as Identity copies of one
# initializer, and the Gemm weights ds stores transposed stay untied). And
# the reverse: one small weight read by a Gather and by a Gemm with transB
# (a tied embedding and head, too small to tie by value) stays one weight.
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
from train_reference import compare, train_ds, train_torch

args = parse_args()


class ClonedLinears(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.Linear(16, 16)
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(3)])
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return self.head(x)


def encoder():
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    return nn.Sequential(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), nn.Linear(32, 4))


class TiedSmallEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(8, 4)
        self.head = nn.Linear(4, 8, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, x):
        return self.head(torch.tanh(self.emb(x).sum(1)))


cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
       "gradient_clipping": 0.0, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}
rng = np.random.default_rng(5)
cases = {
    "cloned_linears": (ClonedLinears, (16,), (4,)),
    "transformer_encoder": (encoder, (6, 32), (6, 4)),
}
cases["tied_small_embedding"] = (TiedSmallEmbedding, (3,), (8,))
for name, (make, xshape, yshape) in cases.items():
    torch.manual_seed(5)
    model = make()
    x = (rng.integers(0, 8, (8, *xshape)) if name == "tied_small_embedding"
         else rng.standard_normal((8, *xshape)).astype(np.float32))
    data = {"x": x, "labels": rng.standard_normal((8, *yshape)).astype(np.float32)}
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    onnx_path = os.path.join(work, "model.onnx")
    example = torch.zeros(2, *xshape, dtype=torch.long if x.dtype == np.int64 else torch.float32)
    torch.onnx.export(copy.deepcopy(model).eval(), (example,), onnx_path,
                      input_names=["x"], output_names=["y"], opset_version=14)
    ds_losses = train_ds(onnx_path, cfg, data, 6, work, loss="mse")
    torch_losses = train_torch(model.train(), cfg, data, 6, F.mse_loss)
    compare(name, ds_losses, torch_losses)
