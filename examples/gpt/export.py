"""Regenerates the bundled example: a small GPT-style decoder with random
weights, exported by torch.onnx.export (opset 17), one input batch and
PyTorch's logits for it. Run with Debian's /usr/bin/python3."""
import os
import sys

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "test", "lib"))
from torch_models import GPT, randomize_layernorms  # noqa: E402

torch.manual_seed(0)
model = GPT(vocab=256, ctx=64, d=64, heads=4, layers=2, tied=True).eval()
randomize_layernorms(model, torch.Generator().manual_seed(0))
idx = torch.from_numpy(np.random.default_rng(0).integers(0, 256, size=(2, 32)).astype(np.int64))
torch.onnx.export(model, (idx,), os.path.join(here, "tiny_gpt.onnx"), input_names=["input_ids"],
                  output_names=["logits"], opset_version=17)
np.savez(os.path.join(here, "input.npz"), input_ids=idx.numpy())
np.savez(os.path.join(here, "expected.npz"), logits=model(idx).detach().numpy())
