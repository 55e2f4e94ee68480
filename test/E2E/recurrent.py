# Recurrent language models as PyTorch exports them (nn.LSTM with two
# layers, a bidirectional nn.GRU, a tanh nn.RNN): ds's unrolled cells give
# PyTorch's outputs, and an LSTM language model trained by ds and by
# PyTorch from the same weights and batches (AdamW, clipping) gives the
# same per-step losses (relative error <= 1e-4 over 15 steps):
# backpropagation through time by ds's autodiff.
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import copy
import os
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
import torch.nn.functional as F
from e2e import parse_args
from train_reference import compare, train_ds, train_torch

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
vocab, T, mbs = 40, 12, 4


class RecurrentLM(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, 16)
        if kind == "lstm":
            self.rnn = torch.nn.LSTM(16, 24, num_layers=2, batch_first=True)
            width = 24
        elif kind == "gru":
            self.rnn = torch.nn.GRU(16, 20, batch_first=True, bidirectional=True)
            width = 40
        else:
            self.rnn = torch.nn.RNN(16, 20, batch_first=True, nonlinearity="tanh")
            width = 20
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, idx):
        out, _ = self.rnn(self.emb(idx))
        return self.head(out)


def lm_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


rng = np.random.default_rng(5)
tokens = rng.integers(0, vocab, (24, T + 1)).astype(np.int64)

# Inference: each kind's logits against PyTorch's.
for kind in ("lstm", "gru", "rnn"):
    torch.manual_seed(7)
    model = RecurrentLM(kind).eval()
    work = os.path.join(args.workdir, kind)
    os.makedirs(work, exist_ok=True)
    onnx_path = os.path.join(work, "model.onnx")
    idx = torch.from_numpy(tokens[:mbs, :-1].copy())
    torch.onnx.export(copy.deepcopy(model), (idx,), onnx_path, input_names=["idx"],
                      output_names=["logits"], opset_version=14)
    ops = {n.op_type for n in __import__("onnx").load(onnx_path).graph.node}
    assert {"LSTM": "lstm", "GRU": "gru", "RNN": "rnn"}.keys() & ops, ops
    plan = os.path.join(work, "m.dsplan")
    subprocess.run(["ds-opt", onnx_path, "-o", plan], check=True)
    np.savez(os.path.join(work, "in.npz"), idx=idx.numpy())
    subprocess.run(["ds-run", plan, "--inputs", os.path.join(work, "in.npz"), "--outputs",
                    os.path.join(work, "out.npz")], check=True)
    got = np.load(os.path.join(work, "out.npz"))["logits"]
    with torch.no_grad():
        want = model(idx).numpy()
    err = float(np.abs(got - want).max())
    print("%s inference: max |ds - torch| = %.2e" % (kind, err))
    if err > 1e-5:
        sys.exit("%s: ds's logits differ from PyTorch's by %.3g" % (kind, err))

# Training: the LSTM language model.
cfg = {
    "train_batch_size": 8, "train_micro_batch_size_per_gpu": 4, "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.01}},
}
torch.manual_seed(11)
model = RecurrentLM("lstm")
work = os.path.join(args.workdir, "train_lstm")
os.makedirs(work, exist_ok=True)
onnx_path = os.path.join(work, "lstm.onnx")
torch.onnx.export(copy.deepcopy(model), (torch.zeros(mbs, T, dtype=torch.long),), onnx_path,
                  input_names=["idx"], output_names=["logits"], opset_version=14)
data = {"idx": tokens[:, :-1].copy(), "labels": tokens[:, 1:].copy()}
ds_losses = train_ds(onnx_path, cfg, data, 15, work)
torch_losses = train_torch(model, cfg, data, 15, lm_loss)
compare("lstm lm", ds_losses, torch_losses)
