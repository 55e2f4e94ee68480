"""Writes deepspeed_values.json: DeepSpeed's muon_update (0.19.8, the
Newton-Schulz methods it runs on a CPU: Gram in fp16, standard in bf16) on
fixed inputs, which muon.py checks ds's reference transcription against.
Run with DeepSpeed installed (bench/.venv):
  TORCHDYNAMO_DISABLE=1 bench/.venv/bin/python test/E2E/muon/make_deepspeed_values.py"""
import json
import os

import numpy as np
import torch
import deepspeed
from deepspeed.runtime.zero.muon.original_muon import muon_update

rng = np.random.default_rng(0)
cases = []
for shape in [(6, 10), (10, 6), (2, 5, 3)]:
    g = rng.standard_normal(shape).astype(np.float32)
    m = rng.standard_normal(shape).astype(np.float32)
    for method in ["gram", "standard"]:
        gt, mt = torch.from_numpy(g.copy()), torch.from_numpy(m.copy())
        u = muon_update(gt, mt, beta=0.95, ns_method=method)
        cases.append(dict(method=method, grad=g.tolist(), momentum=m.tolist(),
                          update=u.double().tolist(), momentum_after=mt.double().tolist()))
out = dict(deepspeed=deepspeed.__version__, torch=torch.__version__, beta=0.95, cases=cases)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "deepspeed_values.json"), "w") as f:
    json.dump(out, f)
