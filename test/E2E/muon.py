# Muon as DeepSpeed 0.19 applies it (optimizer type "Muon": MuonWithAuxAdam,
# Muon's orthogonalized momentum for matrices whose name has neither "embed"
# nor "lm_head", Adam for the rest), trained by ds and by the reference
# transcription (train_reference.DeepSpeedMuon) from the same weights and
# batches: per-step losses within 1e-4 over 20 steps, on an MLP (Gemm
# weights, a schedule scaling each half's own rate) and on a decoder whose
# exported names are anonymous ("onnx::MatMul_N": the lm_head is recognized
# by its node, and the [in, out] weights get the [out, in] aspect scale).
# The transcription itself is checked against DeepSpeed's muon_update
# (muon/deepspeed_values.json, written by muon/make_deepspeed_values.py)
# at the precision DeepSpeed computes in on a CPU (fp16 Gram, bf16 standard).
# REQUIRES: torch, compiler, mpi
# RUN: rm -rf %t && %python %s --workdir %t
import copy
import json
import os
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from e2e import MPIRUN, parse_args, run
from torch_models import MLP
from train_reference import compare, muon_direction, train_ds, train_torch

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
here = os.path.dirname(os.path.abspath(__file__))

# 1. The reference's update against DeepSpeed's own.
values = json.load(open(os.path.join(here, "muon", "deepspeed_values.json")))
for case in values["cases"]:
    grad = torch.tensor(case["grad"], dtype=torch.float64)
    buf = torch.tensor(case["momentum"], dtype=torch.float64)
    update = muon_direction(grad, buf, values["beta"])
    want = torch.tensor(case["update"], dtype=torch.float64)
    # fp16 keeps ~3 digits, bf16 ~2, through five iterations.
    tol = 2e-2 if case["method"] == "gram" else 1.5e-1
    err = float((update - want).abs().max())
    print("DeepSpeed muon_update %s %s: max |difference| %.2e (tolerance %.0e)"
          % (case["method"], list(grad.shape), err, tol))
    if err > tol:
        sys.exit("the reference Muon differs from DeepSpeed's muon_update by %.3g" % err)
    if float((buf - torch.tensor(case["momentum_after"], dtype=torch.float64)).abs().max()) > 1e-6:
        sys.exit("the reference's momentum differs from DeepSpeed's")

# 2. An MLP: Gemm weights (stored transposed by ds's importer), biases on
# Adam; separate rates for the halves, scaled by WarmupCosineLR each.
rng = np.random.default_rng(0)
data = {"x": rng.standard_normal((48, 32)).astype(np.float32),
        "labels": rng.integers(0, 10, 48).astype(np.int64)}
configs = {
    "muon_mlp": {
        "train_batch_size": 16, "train_micro_batch_size_per_gpu": 8, "gradient_clipping": 1.0,
        "optimizer": {"type": "Muon", "params": {"muon_lr": 0.02, "adam_lr": 3e-3,
                                                 "weight_decay": 0.01, "momentum": 0.9}},
        "scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": 4,
                                                           "total_num_steps": 20}},
    },
    "muon_mlp_defaults": {
        "train_batch_size": 8, "gradient_clipping": 1.0,
        "optimizer": {"type": "muon", "params": {"lr": 0.01, "adam_w_mode": False,
                                                 "weight_decay": 0.001}},
    },
}
for name, cfg in configs.items():
    torch.manual_seed(0)
    model = MLP()
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    onnx_path = os.path.join(work, "mlp.onnx")
    torch.onnx.export(copy.deepcopy(model), (torch.zeros(8, 32),), onnx_path, input_names=["x"],
                      output_names=["logits"], opset_version=17)
    compare(name, train_ds(onnx_path, cfg, data, 20, work), train_torch(model, cfg, data, 20,
                                                                         F.cross_entropy))


# 3. A decoder with an embedding, an untied lm_head and rectangular MLP
# weights, exported on [batch, seq, d] (MatMul of folded transposes).
class Decoder(nn.Module):
    def __init__(self, vocab=48, d=16):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.up = nn.Linear(d, 3 * d)
        self.down = nn.Linear(3 * d, d)
        self.norm = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        h = self.embed_tokens(idx)
        h = h + self.down(F.gelu(self.up(h)))
        return self.lm_head(self.norm(h))


def lm_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


tokens = rng.integers(0, 48, (32, 9)).astype(np.int64)
lm_data = {"idx": tokens[:, :-1].copy(), "labels": tokens[:, 1:].copy()}
cfg = {"train_batch_size": 8, "gradient_clipping": 1.0,
       "optimizer": {"type": "Muon", "params": {"lr": 0.02, "adam_lr": 2e-3}}}
torch.manual_seed(1)
model = Decoder()
work = os.path.join(args.workdir, "muon_decoder")
os.makedirs(work, exist_ok=True)
onnx_path = os.path.join(work, "decoder.onnx")
torch.onnx.export(copy.deepcopy(model), (torch.zeros(8, 8, dtype=torch.long),), onnx_path,
                  input_names=["idx"], output_names=["logits"], opset_version=17,
                  dynamic_axes={"idx": {0: "batch"}, "logits": {0: "batch"}})
one = train_ds(onnx_path, cfg, lm_data, 20, work)
compare("muon_decoder", one, train_torch(model, cfg, lm_data, 20, lm_loss))

# 4. Two data-parallel ranks (ZeRO stage 0: whole matrices on each rank)
# train as one rank does with the same global batch.
work2 = os.path.join(args.workdir, "muon_decoder_dp2")
os.makedirs(work2, exist_ok=True)
json.dump(cfg, open(os.path.join(work2, "ds_config.json"), "w"))
np.savez(os.path.join(work2, "data.npz"), **lm_data)
plan = os.path.join(work2, "train.dsplan")
run(["ds-opt", onnx_path, "--config", os.path.join(work2, "ds_config.json"), "--world-size", "2",
     "--loss", "softmax-cross-entropy", "-o", plan])
log = os.path.join(work2, "train.jsonl")
run(MPIRUN + ["-np", "2", "ds-run", plan, "--data", os.path.join(work2, "data.npz"), "--steps",
              "20", "--log", log])
compare("muon_decoder on 2 ranks vs 1", [json.loads(l)["loss"] for l in open(log)], one, tol=1e-5)
