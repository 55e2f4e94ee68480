"""Makes the committed training-mode export and PyTorch's loss statistics
that test/E2E/dropout.py compares ds's Dropout against (CI has no PyTorch 2.x).

    bash bench/peers.sh --models gpt2   # once: makes bench/.venv (torch 2.x, transformers)
    bench/.venv/bin/python test/E2E/hf_exports/make_dropout_export.py

A tiny, randomly initialized Hugging Face GPT-2 with embedding and residual
dropout 0.1, exported as a user would who forgot model.eval():
`torch.onnx.export(model.train(), ..., dynamo=True, optimize=False)`, so
the file carries `Dropout(training_mode = true)`. (Attention dropout is 0:
PyTorch's exporter writes the attention Dropout without training_mode, i.e.
as inference, so a nonzero attn_pdrop would make the file and the PyTorch
model differ.) The data is a learnable next-token rule. PyTorch trains the
model SEEDS times from the same weights with different dropout seeds;
ds cannot reproduce PyTorch's random stream, only its statistics, so the
test compares the per-step mean and spread over seeds. Also records the
losses with dropout off (model.eval() during training), which a run
whose masks did nothing would match.
"""
import copy
import json
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
import transformers as tf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from train_reference import train_torch  # noqa: E402

STEPS, BATCH, SEQ, VOCAB, SEEDS, P = 30, 8, 16, 64, 8, 0.1
CONFIG = {
    "train_batch_size": BATCH, "train_micro_batch_size_per_gpu": BATCH,
    "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.01}},
}


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, use_cache=False).logits


def lm_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def main():
    torch.manual_seed(40)
    model = Logits(tf.GPT2LMHeadModel(tf.GPT2Config(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4,
        resid_pdrop=P, embd_pdrop=P, attn_pdrop=0.0)))
    rng = np.random.default_rng(41)
    # Each sequence follows t[i+1] = (a * t[i] + b) % VOCAB with its own
    # (a, b) from a small set: learnable in a few dozen steps.
    a = rng.choice([3, 5, 7], BATCH * STEPS)
    b = rng.integers(0, 4, BATCH * STEPS)
    tokens = np.zeros((BATCH * STEPS, SEQ + 1), np.int64)
    tokens[:, 0] = rng.integers(0, VOCAB, BATCH * STEPS)
    for i in range(SEQ):
        tokens[:, i + 1] = (a * tokens[:, i] + b) % VOCAB
    data = {"ids": tokens[:, :-1].copy(), "labels": tokens[:, 1:].copy()}
    onnx_path = os.path.join(HERE, "gpt2_dropout.onnx")
    torch.onnx.export(copy.deepcopy(model).train(), (torch.zeros(BATCH, SEQ, dtype=torch.long),),
                      onnx_path, input_names=["ids"], output_names=["logits"], opset_version=18,
                      dynamo=True, optimize=False, external_data=False)
    m = onnx.load(onnx_path)
    for node in m.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    onnx.save(m, onnx_path)
    np.savez(os.path.join(HERE, "gpt2_dropout.npz"), **data)
    # What an inference plan of the file must compute: the model in eval mode.
    with torch.no_grad():
        logits = model.eval()(torch.from_numpy(data["ids"][:BATCH])).numpy()
    np.save(os.path.join(HERE, "gpt2_dropout_eval_logits.npy"), logits)
    runs = []
    for seed in range(SEEDS):
        torch.manual_seed(1000 + seed)
        runs.append([float(l) for l in train_torch(copy.deepcopy(model).train(), CONFIG, data,
                                                    STEPS, lm_loss)])
    no_dropout = [float(l) for l in train_torch(copy.deepcopy(model).eval(), CONFIG, data, STEPS,
                                                 lm_loss)]
    record = {"config": CONFIG, "steps": STEPS, "p": P, "losses_per_seed": runs,
              "losses_without_dropout": no_dropout,
              "export": "torch.onnx.export(model.train(), dynamo=True, optimize=False, "
                        "opset_version=18)",
              "torch": torch.__version__, "transformers": tf.__version__}
    with open(os.path.join(HERE, "gpt2_dropout.json"), "w") as f:
        json.dump(record, f, indent=1)
    mean = np.mean(runs, axis=0)
    print("mean losses", mean[:3], "...", mean[-3:], "no dropout", no_dropout[-3:])
    print("spread over seeds (last step)", np.std(np.array(runs)[:, -1]))


if __name__ == "__main__":
    main()
