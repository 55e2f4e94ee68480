# torch.nn.TransformerEncoder (batch_first, 2 layers) matches PyTorch.
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
from e2e import export_and_compare, parse_args
from torch_models import randomize_layernorms, transformer_encoder

args = parse_args()
torch.manual_seed(3)
model = transformer_encoder(d=64, heads=4, ff=128, layers=2)
randomize_layernorms(model, torch.Generator().manual_seed(3))
x = np.random.default_rng(3).standard_normal((2, 10, 64)).astype(np.float32)
for opset in (14, 17):
    export_and_compare("encoder%d" % opset, model, {"src": x}, args.workdir, opset)
