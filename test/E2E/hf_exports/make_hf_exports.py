"""Makes the committed Hugging Face exports and PyTorch's loss trajectories
that test/E2E/hf_exports.py trains ds against (CI has no PyTorch 2.x).

    bash bench/peers.sh --models gpt2   # once: makes bench/.venv (torch 2.x, transformers)
    bench/.venv/bin/python test/E2E/hf_exports/make_hf_exports.py [--losses-only]

(--losses-only keeps the committed ONNX files and data and re-records
PyTorch's losses and trained logits, e.g. after a change to the reference
trainer's schedule.)

For each of GPT-2, Llama (GQA, RoPE) and BERT-MLM, tiny and randomly
initialized: exports it with PyTorch 2's exporter both ways a user would
(`torch.onnx.export(..., dynamo=True)` with optimize=False -> NAME.onnx
and with the default optimize=True -> NAME_opt.onnx, opset 18), writes
next-token (masked-LM: same-position) data, and trains the PyTorch model
20 steps the way DeepSpeed would with the config below (AdamW, WarmupLR,
clipping 1.0); writes NAME.npz (data) and NAME.json (config, losses,
versions; NAME_opt.json the same for the optimized export) and
NAME_trained_logits.npy (the trained model's logits on the first batch).

Node metadata is mostly stack traces and means nothing to ds; the FX node
of each node (`pkg.torch.onnx.fx_node`, which placeholders fed it) is what
ds reads to recover the parameters the optimizer folded and merged (and
embeddings' padding rows), so it stays, as the exporter writes it; so does
the graph's metadata (the export signature).
"""
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

STEPS, BATCH, SEQ, VOCAB = 20, 4, 16, 128
CONFIG = {
    "train_batch_size": BATCH, "train_micro_batch_size_per_gpu": BATCH,
    "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 1e-3, "warmup_num_steps": 4,
                                                 "warmup_type": "linear"}},
}


class Logits(torch.nn.Module):
    def __init__(self, model, kwargs):
        super().__init__()
        self.model, self.kwargs = model, kwargs

    def forward(self, ids):
        return self.model(input_ids=ids, **self.kwargs).logits


def models():
    # Seeded before each construction: transformers initializes weights
    # when it builds a model (init_weights may leave some as built).
    torch.manual_seed(10)
    yield "gpt2", tf.GPT2LMHeadModel(tf.GPT2Config(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)), {"use_cache": False}, True
    torch.manual_seed(11)
    yield "llama", tf.LlamaForCausalLM(tf.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ)), \
        {"use_cache": False}, True
    torch.manual_seed(12)
    yield "bert", tf.BertForMaskedLM(tf.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=SEQ, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)), {}, False


def lm_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def export_both(wrapped, out_dir, name):
    """Exports `wrapped` as out_dir/NAME.onnx (optimize=False) and
    NAME_opt.onnx (the default optimize=True), keeping of the node
    metadata only the FX node ds reads."""
    for optimize, suffix in ((False, ""), (True, "_opt")):
        onnx_path = os.path.join(out_dir, name + suffix + ".onnx")
        torch.onnx.export(wrapped.eval(), (torch.zeros(BATCH, SEQ, dtype=torch.long),),
                          onnx_path, input_names=["ids"], output_names=["logits"],
                          opset_version=18, dynamo=True, optimize=optimize,
                          external_data=False)
        m = onnx.load(onnx_path)
        for node in m.graph.node:
            keep = [(e.key, e.value) for e in node.metadata_props
                    if e.key == "pkg.torch.onnx.fx_node"]
            del node.metadata_props[:]
            for k, v in keep:
                node.metadata_props.add(key=k, value=v)
            node.doc_string = ""
        onnx.save(m, onnx_path)


def main():
    losses_only = "--losses-only" in sys.argv[1:]
    for i, (name, model, kwargs, causal) in enumerate(models()):
        torch.manual_seed(10 + i)
        model.init_weights() if hasattr(model, "init_weights") else None
        wrapped = Logits(model, kwargs)
        rng = np.random.default_rng(20 + i)
        tokens = rng.integers(0, VOCAB, (BATCH * STEPS, SEQ + 1)).astype(np.int64)
        data = {"ids": tokens[:, :-1].copy(),
                "labels": tokens[:, 1:].copy() if causal else tokens[:, :-1].copy()}
        if losses_only:
            kept = dict(np.load(os.path.join(HERE, name + ".npz")))
            if any(not np.array_equal(kept[k], data[k]) for k in data):
                sys.exit("%s.npz is not the data this script makes; run it without --losses-only"
                         % name)
        else:
            export_both(wrapped, HERE, name)
            np.savez(os.path.join(HERE, name + ".npz"), **data)
        losses = train_torch(wrapped.train(), CONFIG, data, STEPS, lm_loss)
        # The trained model's logits on the first batch: what the ONNX file
        # ds exports after the same 20 steps must compute.
        with torch.no_grad():
            trained = wrapped.eval()(torch.from_numpy(data["ids"][:BATCH])).numpy()
        np.save(os.path.join(HERE, name + "_trained_logits.npy"), trained.astype(np.float32))
        for optimize, suffix in ((False, ""), (True, "_opt")):
            record = {"config": CONFIG, "steps": STEPS, "losses": [float(l) for l in losses],
                      "parameters": sum(p.numel() for p in model.parameters()),
                      "export": "torch.onnx.export(dynamo=True, optimize=%s, opset_version=18)"
                                % optimize,
                      "torch": torch.__version__, "transformers": tf.__version__}
            with open(os.path.join(HERE, name + suffix + ".json"), "w") as f:
                json.dump(record, f, indent=1)
        print(name, record["parameters"], "parameters, losses", record["losses"][:3], "...")


if __name__ == "__main__":
    main()
