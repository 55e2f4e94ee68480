# Generation from a model exported with a KV cache (past_key_values.N.key /
# .value inputs [batch, heads, past, head_dim], present.N.* outputs), as
# torch.onnx.export writes a decoder that takes its past: ds-opt --generate
# runs it with no past (the past axis empty, its concatenations left out),
# drops the present outputs and derives its own cache. Greedy tokens must be
# those of the PyTorch module generating with its own cache, prompt by
# prompt, for prompts of different lengths in one batch.
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import math
import os
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
import torch.nn as nn
from e2e import parse_args, run

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
torch.manual_seed(0)
V, D, H, L, M, NEW = 60, 32, 4, 2, 40, 12


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.o = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x, past_k, past_v):
        b, s, _ = x.shape
        q, k, v = (t.view(b, s, H, D // H).transpose(1, 2)
                   for t in self.qkv(self.ln1(x)).split(D, dim=2))
        k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        p = past_k.shape[2]
        mask = torch.ones(p + s, p + s, dtype=torch.bool).tril()[p:, :]
        a = (q @ k.transpose(-1, -2) / math.sqrt(D // H)).masked_fill(~mask, float("-inf"))
        x = x + self.o((a.softmax(-1) @ v).transpose(1, 2).reshape(b, s, D))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x)))), k, v


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.pos = nn.Embedding(V, D), nn.Embedding(M, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)

    def forward(self, ids, *past):
        p = past[0].shape[2]
        x = self.emb(ids) + self.pos(torch.arange(p, p + ids.shape[1]).unsqueeze(0))
        present = []
        for i, blk in enumerate(self.blocks):
            x, k, v = blk(x, past[2 * i], past[2 * i + 1])
            present += [k, v]
        return (self.head(self.ln(x)), *present)


model = LM().eval()
names = ["past_key_values.%d.%s" % (i // 2, ("key", "value")[i % 2]) for i in range(2 * L)]
outs = ["present.%d.%s" % (i // 2, ("key", "value")[i % 2]) for i in range(2 * L)]
dynamic = {"input_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"}}
dynamic.update({n: {0: "batch", 2: "past"} for n in names})
dynamic.update({n: {0: "batch", 2: "total"} for n in outs})
path = os.path.join(args.workdir, "lm_past.onnx")
example = [torch.zeros(1, H, 2, D // H) for _ in range(2 * L)]
torch.onnx.export(model, (torch.zeros(1, 3, dtype=torch.int64), *example), path,
                  input_names=["input_ids"] + names, output_names=["logits"] + outs,
                  dynamic_axes=dynamic, opset_version=17)

# Prompts of 7 and 4 tokens (left-padded in one array, with a mask).
rng = np.random.default_rng(1)
lengths = [7, 4]
ids = np.zeros((2, 7), np.int64)
mask = np.zeros((2, 7), np.int64)
for r, n in enumerate(lengths):
    ids[r, 7 - n:] = rng.integers(0, V, n)
    mask[r, 7 - n:] = 1
prompts = os.path.join(args.workdir, "prompts.npz")
np.savez(prompts, input_ids=ids, attention_mask=mask)
expected = []
with torch.no_grad():
    for r, n in enumerate(lengths):
        x = torch.from_numpy(ids[r:r + 1, 7 - n:])
        past = [torch.zeros(1, H, 0, D // H) for _ in range(2 * L)]
        toks = []
        for _ in range(NEW):
            logits, *past = model(x, *past)
            toks.append(int(logits[0, -1].argmax()))
            x = torch.tensor([[toks[-1]]])
        expected.append(toks)

plan = os.path.join(args.workdir, "lm_past.dsplan")
run(["ds-opt", path, "--generate", "--batch", "2", "--max-tokens", str(M), "-o", plan])
out = os.path.join(args.workdir, "out.npz")
run(["ds-run", plan, "--prompt", prompts, "--max-new-tokens", str(NEW), "--outputs", out])
got = np.load(out)["sequences"][:, 7:].tolist()
if got != expected:
    sys.exit("ds generated %s, the module with its own cache %s" % (got, expected))
print("a KV-cache export: %d prompts, %d tokens each, as PyTorch with its cache" % (2, NEW))

# A past length fixed in the export cannot be left out: named.
fixed = os.path.join(args.workdir, "fixed_past.onnx")
torch.onnx.export(model, (torch.zeros(1, 3, dtype=torch.int64), *example), fixed,
                  input_names=["input_ids"] + names, output_names=["logits"] + outs,
                  dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}}, opset_version=17)
res = subprocess.run(["ds-opt", fixed, "--generate", "-o", os.path.join(args.workdir, "x.dsplan")],
                     capture_output=True, text=True)
if res.returncode == 0 or "past length is fixed" not in res.stderr:
    sys.exit("a fixed past length: %s" % res.stderr)
print("a fixed past length: %s" % res.stderr.strip().splitlines()[0])
