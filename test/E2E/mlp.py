# An MLP (Linear exports as Gemm) matches PyTorch at opsets 14 and 17.
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
from e2e import export_and_compare, parse_args
from torch_models import MLP

args = parse_args()
torch.manual_seed(0)
x = np.random.default_rng(0).standard_normal((8, 32)).astype(np.float32)
for opset in (14, 17):
    export_and_compare("mlp%d" % opset, MLP(), {"x": x}, args.workdir, opset)
