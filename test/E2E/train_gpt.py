# A GPT-style decoder (embeddings, causal masked attention, LayerNorm, GELU,
# tied head) trained by ds and by PyTorch from the same weights and batches
# gives the same per-step losses (relative error <= 1e-4 over 20 steps), at
# opset 14 (decomposed LayerNorm, dynamic axes fixed with --input-shape) and
# opset 17.
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
from torch_models import GPT, randomize_layernorms
from train_reference import compare, train_ds, train_torch

args = parse_args()
vocab, ctx, mbs, T = 64, 16, 4, 16
rng = np.random.default_rng(1)
tokens = rng.integers(0, vocab, (32, T + 1)).astype(np.int64)
data = {"idx": tokens[:, :-1].copy(), "labels": tokens[:, 1:].copy()}
cfg = {
    "train_batch_size": 8, "train_micro_batch_size_per_gpu": 4,
    "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "weight_decay": 0.01}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 2e-3, "warmup_num_steps": 5,
                                                 "warmup_type": "linear"}},
}


def lm_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


for opset in (14, 17):
    torch.manual_seed(3)
    model = GPT(vocab=vocab, ctx=ctx, d=32, heads=4, layers=2, tied=True)
    randomize_layernorms(model, torch.Generator().manual_seed(3))
    work = os.path.join(args.workdir, "opset%d" % opset)
    os.makedirs(work, exist_ok=True)
    onnx_path = os.path.join(work, "gpt.onnx")
    dyn = {"idx": {0: "batch", 1: "seq"}} if opset == 14 else None
    torch.onnx.export(copy.deepcopy(model), (torch.zeros(mbs, T, dtype=torch.long),), onnx_path,
                      input_names=["idx"], output_names=["logits"], opset_version=opset,
                      dynamic_axes=dyn)
    extra = ["--input-shape", "idx=%d,%d" % (mbs, T)] if opset == 14 else []
    ds_losses = train_ds(onnx_path, cfg, data, 20, work, extra=extra)
    torch_losses = train_torch(model, cfg, data, 20, lm_loss)
    compare("gpt opset %d" % opset, ds_losses, torch_losses)
