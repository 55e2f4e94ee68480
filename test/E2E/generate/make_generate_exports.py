"""Makes the committed causal LMs and Hugging Face's own generations that
test/E2E/generate.py holds ds-run's generation to (CI has no PyTorch 2.x or
transformers).

    bash bench/peers.sh --models gpt2   # once: makes bench/.venv (torch 2.x, transformers)
    bench/.venv/bin/python test/E2E/generate/make_generate_exports.py

Each model is tiny and randomly initialized (with a wide init, so that the
greedy tokens vary instead of repeating one), exported as a user would:
`torch.onnx.export(model, ..., dynamo=True)` (the default optimize=True),
opset 18, ids -> logits, no cache inputs:

- gpt2: GPT-2, dynamic batch and sequence (learned position embeddings).
- llama: Llama with grouped-query attention and RoPE, dynamic.
- mistral: Mistral with a sliding window of 8 tokens, dynamic.
- gpt2_static: GPT-2 exported at a fixed [1, 24] (the sequence baked in).

PROMPTS holds prompts of different lengths, left-padded with an
attention_mask. NAME.json records, per prompt, the tokens
`model.generate(prompt, max_new_tokens=NEW, do_sample=False)` adds (each
prompt alone: Hugging Face's own KV cache), and those it adds with
repetition_penalty=PENALTY, with the versions used.
"""
import json
import os

import numpy as np
import onnx
import torch
import transformers as tf

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB, NEW, PENALTY = 96, 20, 1.5
PROMPT_LENGTHS = (5, 11, 3)


def build(name):
    if name.startswith("gpt2"):
        cfg = tf.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                            initializer_range=0.3)
        return tf.GPT2LMHeadModel(cfg)
    if name == "llama":
        cfg = tf.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=128, initializer_range=0.3)
        return tf.LlamaForCausalLM(cfg)
    if name == "mistral":
        cfg = tf.MistralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                               max_position_embeddings=128, sliding_window=8,
                               initializer_range=0.3)
        return tf.MistralForCausalLM(cfg)
    raise ValueError(name)


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, use_cache=False).logits


def main():
    g = torch.Generator().manual_seed(7)
    prompts = [torch.randint(0, VOCAB, (n,), generator=g) for n in PROMPT_LENGTHS]
    width = max(PROMPT_LENGTHS)
    ids = np.zeros((len(prompts), width), np.int64)
    mask = np.zeros((len(prompts), width), np.int64)
    for r, p in enumerate(prompts):  # left padding, as batched generation pads
        ids[r, width - len(p):] = p.numpy()
        mask[r, width - len(p):] = 1
    np.savez(os.path.join(HERE, "prompts.npz"), input_ids=ids, attention_mask=mask)
    for seed, name in enumerate(("gpt2", "llama", "mistral", "gpt2_static")):
        torch.manual_seed(seed)
        model = build(name).eval()
        model.generation_config.eos_token_id = None  # generate exactly NEW tokens
        expected, penalized = [], []
        with torch.no_grad():
            for p in prompts:
                out = model.generate(p[None], max_new_tokens=NEW, do_sample=False,
                                     pad_token_id=0)
                expected.append(out[0, len(p):].tolist())
                out = model.generate(p[None], max_new_tokens=NEW, do_sample=False,
                                     pad_token_id=0, repetition_penalty=PENALTY)
                penalized.append(out[0, len(p):].tolist())
        example = torch.zeros((1, 24), dtype=torch.int64)
        kw = {}
        if name != "gpt2_static":
            kw["dynamic_shapes"] = {"ids": {0: torch.export.Dim("batch"),
                                            1: torch.export.Dim("sequence")}}
            example = torch.zeros((2, 16), dtype=torch.int64)
        path = os.path.join(HERE, name + ".onnx")
        torch.onnx.export(Logits(model), (example,), path, input_names=["input_ids"],
                          output_names=["logits"], opset_version=18, dynamo=True, **kw)
        # Node metadata (stack traces) means nothing to inference: dropped,
        # and the weights kept inside the file.
        m = onnx.load(path)
        for n in m.graph.node:
            del n.metadata_props[:]
            n.doc_string = ""
        onnx.save(m, path, save_as_external_data=False)
        if os.path.exists(path + ".data"):
            os.remove(path + ".data")
        with open(os.path.join(HERE, name + ".json"), "w") as f:
            json.dump({"new_tokens": NEW, "expected": expected,
                       "repetition_penalty": PENALTY, "expected_penalized": penalized,
                       "torch": torch.__version__,
                       "transformers": tf.__version__}, f, indent=1)
        print(name, [e[:6] for e in expected])


if __name__ == "__main__":
    main()
