# A GPT-style decoder (embeddings, causal masked attention, LayerNorm, GELU,
# tied head) matches PyTorch: at opset 14 exported with dynamic axes and
# fixed with --input-shape (decomposed LayerNorm, Shape chains), at opset 17
# exported static (LayerNormalization), and with an untied tanh-GELU variant.
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
from e2e import export_and_compare, parse_args
from torch_models import GPT, randomize_layernorms

args = parse_args()
gen = torch.Generator().manual_seed(1)
torch.manual_seed(1)
model = GPT(vocab=128, ctx=32, d=64, heads=4, layers=2, tied=True)
randomize_layernorms(model, gen)
idx = np.random.default_rng(1).integers(0, 128, size=(2, 16)).astype(np.int64)

export_and_compare("gpt14_dynamic", model, {"idx": idx}, args.workdir, 14,
                   dynamic_axes={"idx": {0: "batch", 1: "seq"}, "output": {0: "batch", 1: "seq"}},
                   input_shapes={"idx": idx.shape})
export_and_compare("gpt17", model, {"idx": idx}, args.workdir, 17)

torch.manual_seed(2)
untied = GPT(vocab=96, ctx=16, d=48, heads=3, layers=1, tied=False, gelu_approx="tanh")
randomize_layernorms(untied, gen)
idx2 = np.random.default_rng(2).integers(0, 96, size=(3, 16)).astype(np.int64)
export_and_compare("gpt17_untied_tanh", untied, {"idx": idx2}, args.workdir, 17)
