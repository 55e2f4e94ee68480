# Tensor-parallel inference (ds-opt --tensor-parallel, mpirun -np 2 and 4)
# of PyTorch-exported models: a GPT-style decoder (fused QKV split into
# heads), torch.nn.TransformerEncoder (MultiheadAttention's packed in_proj,
# batch*heads merged dimension), a plain MLP stack, and blocks with timm's
# packed qkv (reshape to [B, T, 3, H, D], permute, index) and BERT's
# separate q/k/v projections. Outputs match the
# one-rank plan and PyTorch within 1e-5, and each rank holds 1/tp of the
# split weights.
# REQUIRES: torch, compiler, mpi
# RUN: rm -rf %t && %python %s --workdir %t
import math
import os
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from e2e import parse_args, tensor_parallel_compare
from torch_models import GPT, randomize_layernorms, transformer_encoder

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)


def export(name, model, inputs):
    model.eval()
    path = os.path.join(args.workdir, name + ".onnx")
    targs = tuple(torch.from_numpy(v) for v in inputs.values())
    torch.onnx.export(model, targs, path, input_names=list(inputs), output_names=["output"],
                      opset_version=17)
    with torch.no_grad():
        ref = model(*targs).numpy()
    return path, [ref]


def split_bytes(model, names):
    """Bytes of the parameters whose names contain one of `names`, minus the
    row-parallel biases (kept whole on every rank)."""
    total = 0
    for n, p in model.named_parameters():
        if any(k in n for k in names["split"]) and not any(n.endswith(k) for k in names["whole"]):
            total += p.numel() * 4
    return total


gen = torch.Generator().manual_seed(7)
torch.manual_seed(7)
gpt = GPT(vocab=128, ctx=32, d=64, heads=4, layers=2, tied=True)
randomize_layernorms(gpt, gen)
idx = np.random.default_rng(7).integers(0, 128, size=(2, 16)).astype(np.int64)
path, ref = export("gpt", gpt, {"idx": idx})
gpt_split = split_bytes(gpt, {"split": ["c_attn", "c_proj.weight", ".fc.", "proj.weight"],
                             "whole": []})

torch.manual_seed(8)
enc = transformer_encoder(d=64, heads=4, ff=128, layers=2)
with torch.no_grad():  # nn.TransformerEncoder's layers start as copies of one
    for p in enc.parameters():
        p.add_(0.02 * torch.randn(p.shape, generator=gen))
x = np.random.default_rng(8).standard_normal((2, 10, 64)).astype(np.float32)
with torch.enable_grad():  # the exporter's fused fast path has no ONNX form
    enc_path, enc_ref = export("encoder", enc, {"src": x})
enc_split = split_bytes(enc, {"split": ["in_proj", "out_proj.weight", "linear1", "linear2.weight"],
                             "whole": []})

torch.manual_seed(9)
mlp = nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 64), nn.ReLU(),
                    nn.Linear(64, 128), nn.Tanh(), nn.Linear(128, 16))
xm = np.random.default_rng(9).standard_normal((8, 32)).astype(np.float32)
mlp_path, mlp_ref = export("mlp", mlp, {"x": xm})
mlp_split = split_bytes(mlp, {"split": ["0.", "2.weight", "4.", "6.weight"], "whole": []})

class PackedAttention(nn.Module):  # timm / ViT
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        B, T, C = x.shape
        qkv = self.qkv(x).reshape(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        a = (q @ k.transpose(-2, -1) * (1 / math.sqrt(C // self.heads))).softmax(-1)
        return self.proj((a @ v).transpose(1, 2).reshape(B, T, C))


class SeparateAttention(nn.Module):  # BERT
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.heads, C // self.heads).permute(0, 2, 1, 3)
        a = F.softmax(split(self.q(x)) @ split(self.k(x)).transpose(-1, -2)
                      / math.sqrt(C // self.heads), -1)
        return self.o((a @ split(self.v(x))).permute(0, 2, 1, 3).reshape(B, T, C))


class PreLNBlock(nn.Module):
    def __init__(self, attn, d):
        super().__init__()
        self.n1, self.attn, self.n2 = nn.LayerNorm(d), attn, nn.LayerNorm(d)
        self.f1, self.f2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.f2(F.gelu(self.f1(self.n2(x))))


xb = np.random.default_rng(10).standard_normal((2, 8, 32)).astype(np.float32)
blocks = []
for name, attn, keys in (("packed_qkv", PackedAttention(32, 4), ["qkv", "proj.weight"]),
                         ("separate_qkv", SeparateAttention(32, 4),
                          ["attn.q.", "attn.k.", "attn.v.", "attn.o.weight"])):
    torch.manual_seed(11)
    block = PreLNBlock(attn, 32)
    bpath, bref = export(name, block, {"x": xb})
    blocks.append((name, bpath, bref, split_bytes(block, {"split": keys + ["f1", "f2.weight"],
                                                          "whole": []})))

for name, bpath, bref, nbytes in blocks:
    tensor_parallel_compare(name, bpath, {"x": xb}, bref, args.workdir, 2, nbytes)
for tp in (2, 4):
    tensor_parallel_compare("gpt", path, {"idx": idx}, ref, args.workdir, tp, gpt_split)
    tensor_parallel_compare("encoder", enc_path, {"src": x}, enc_ref, args.workdir, tp, enc_split)
    tensor_parallel_compare("mlp", mlp_path, {"x": xm}, mlp_ref, args.workdir, tp, mlp_split)
