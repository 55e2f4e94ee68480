"""Held-out Hugging Face architectures trained in ds beside PyTorch 2.x:
the check issue #13 asks for, beyond the three models CI trains
(test/E2E/hf_exports.py).

    bash bench/peers.sh --help          # once: makes bench/.venv (torch 2.x, transformers)
    cmake --build build                 # ds-opt, ds-run in build/bin
    OMP_NUM_THREADS=2 bench/.venv/bin/python bench/hf_sweep.py [NAME ...]

For each architecture (tiny, random init, no dropout): exports it both
ways (dynamo=True with optimize=False, and the default optimize=True) as
test/E2E/hf_exports/make_hf_exports.py does, trains PyTorch 20 steps
(AdamW, WarmupLR, clipping), then ds on the same data and config; prints
per export: PyTorch's parameter count, the count ds trains (--report),
the worst per-step relative loss difference, and how far the ONNX file
ds exports after training is from PyTorch's trained logits. Files go to
bench/hf_sweep/ (git-ignored). Exits non-zero if a loss differs by more
than 1e-4 or a count differs by more than the rows the graph never reads.
"""
import os
import re
import shutil
import subprocess
import sys
import traceback

import numpy as np
import torch
import transformers as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
sys.path.insert(0, os.path.join(ROOT, "test", "E2E", "hf_exports"))
from make_hf_exports import (BATCH, CONFIG, SEQ, STEPS, VOCAB, Logits,  # noqa: E402
                             export_both, lm_loss)
from train_reference import train_ds, train_torch  # noqa: E402

os.environ["PATH"] = os.path.join(ROOT, "build", "bin") + os.pathsep + os.environ["PATH"]
OUT = os.path.join(ROOT, "bench", "hf_sweep")
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
# Parameter rows the optimized export never reads (nothing to train):
# OPT's position table is offset by 2, so its first two rows are dead.
UNREAD = {"opt_opt": 2 * 32}


def no_dropout(cfg):
    for k in list(vars(cfg)):
        if ("dropout" in k or "pdrop" in k or "layerdrop" in k) and \
                isinstance(getattr(cfg, k), (int, float)) and not isinstance(getattr(cfg, k), bool):
            setattr(cfg, k, 0.0)
    return cfg


# name -> (seed, config factory, model class, kwargs, causal)
C = {"use_cache": False}
SPECS = {
    "llama": (11, lambda: tf.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ),
        tf.LlamaForCausalLM, C, True),
    "mistral": (31, lambda: tf.MistralConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ),
        tf.MistralForCausalLM, C, True),
    "qwen2": (32, lambda: tf.Qwen2Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ),
        tf.Qwen2ForCausalLM, C, True),
    "phi": (33, lambda: tf.PhiConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=SEQ, partial_rotary_factor=0.5),
        tf.PhiForCausalLM, C, True),
    "gpt_neox": (34, lambda: tf.GPTNeoXConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=SEQ),
        tf.GPTNeoXForCausalLM, C, True),
    "opt": (35, lambda: tf.OPTConfig(
        vocab_size=VOCAB, hidden_size=32, ffn_dim=64, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=SEQ, word_embed_proj_dim=32),
        tf.OPTForCausalLM, C, True),
    "roberta": (36, lambda: tf.RobertaConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=SEQ + 2),
        tf.RobertaForMaskedLM, {}, False),
    "distilbert": (37, lambda: tf.DistilBertConfig(
        vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
        max_position_embeddings=SEQ),
        tf.DistilBertForMaskedLM, {}, False),
    "gemma": (38, lambda: tf.GemmaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=SEQ),
        tf.GemmaForCausalLM, C, True),
    "falcon": (39, lambda: tf.FalconConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=SEQ),
        tf.FalconForCausalLM, C, True),
    "gptj": (40, lambda: tf.GPTJConfig(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4, rotary_dim=4),
        tf.GPTJForCausalLM, C, True),
    "bloom": (41, lambda: tf.BloomConfig(
        vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=4),
        tf.BloomForCausalLM, C, True),
    "qwen3": (42, lambda: tf.Qwen3Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=SEQ),
        tf.Qwen3ForCausalLM, C, True),
    "gemma2": (43, lambda: tf.Gemma2Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=SEQ),
        tf.Gemma2ForCausalLM, C, True),
    "phi3": (44, lambda: tf.Phi3Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ,
        original_max_position_embeddings=SEQ, bos_token_id=1, eos_token_id=2, pad_token_id=0),
        tf.Phi3ForCausalLM, C, True),
    "stablelm": (45, lambda: tf.StableLmConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ),
        tf.StableLmForCausalLM, C, True),
    "gpt_bigcode": (46, lambda: tf.GPTBigCodeConfig(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4,
        bos_token_id=1, eos_token_id=2),
        tf.GPTBigCodeForCausalLM, C, True),
    "mpt": (47, lambda: tf.MptConfig(
        vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=2, expansion_ratio=2, max_seq_len=SEQ),
        tf.MptForCausalLM, C, True),
    "olmo": (48, lambda: tf.OlmoConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ,
        pad_token_id=1, eos_token_id=2),
        tf.OlmoForCausalLM, C, True),
    "starcoder2": (49, lambda: tf.Starcoder2Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ,
        bos_token_id=1, eos_token_id=2),
        tf.Starcoder2ForCausalLM, C, True),
}


def pytorch_side(name):
    """Exports NAME both ways; returns (data, PyTorch losses, parameter
    count, trained logits on the first batch)."""
    seed, cfgf, cls, kwargs, causal = SPECS[name]
    torch.manual_seed(seed)
    model = cls(no_dropout(cfgf()))
    torch.manual_seed(seed)
    model.init_weights() if hasattr(model, "init_weights") else None
    wrapped = Logits(model, kwargs)
    rng = np.random.default_rng(seed + 100)
    tokens = rng.integers(0, VOCAB, (BATCH * STEPS, SEQ + 1)).astype(np.int64)
    data = {"ids": tokens[:, :-1].copy(),
            "labels": tokens[:, 1:].copy() if causal else tokens[:, :-1].copy()}
    export_both(wrapped, OUT, name)
    losses = train_torch(wrapped.train(), CONFIG, data, STEPS, lm_loss)
    with torch.no_grad():
        trained = wrapped.eval()(torch.from_numpy(data["ids"][:BATCH])).numpy()
    return data, losses, sum(p.numel() for p in model.parameters()), trained


def ds_side(onnx_path, data, work, trained_logits):
    """Trains ONNX_PATH in ds; returns (ds losses, trained elements,
    relative logit error of the exported ONNX after training)."""
    os.makedirs(work, exist_ok=True)
    losses = train_ds(onnx_path, CONFIG, data, STEPS, work)
    report = subprocess.run(["ds-opt", onnx_path, "--config", os.path.join(work, "ds_config.json"),
                             "--loss", "softmax-cross-entropy", "--report"], check=True,
                            capture_output=True, text=True).stdout
    count = int(re.search(r"trained parameters: \d+ tensors, (\d+) elements", report).group(1))
    plan, ckpt = os.path.join(work, "train.dsplan"), os.path.join(work, "ckpt")
    quiet = dict(check=True, capture_output=True)
    shutil.rmtree(ckpt, ignore_errors=True)  # an earlier sweep's (ds-run refuses to mix runs)
    subprocess.run(["ds-run", plan, "--data", os.path.join(work, "data.npz"), "--steps",
                    str(STEPS), "--checkpoint-dir", ckpt, "--quiet"], **quiet)
    exported = os.path.join(work, "trained.onnx")
    subprocess.run(["ds-run", plan, "--checkpoint-dir", ckpt, "--export-onnx", exported], **quiet)
    inputs, outputs = os.path.join(work, "in.npz"), os.path.join(work, "out.npz")
    np.savez(inputs, ids=data["ids"][:BATCH])
    subprocess.run(["ds-opt", exported, "-o", os.path.join(work, "exported.dsplan")], **quiet)
    subprocess.run(["ds-run", os.path.join(work, "exported.dsplan"), "--inputs", inputs,
                    "--outputs", outputs], **quiet)
    got = np.load(outputs)["logits"]
    err = float(np.abs(got - trained_logits).max() / np.abs(trained_logits).max())
    return losses, count, err


def main():
    os.makedirs(OUT, exist_ok=True)
    names = sys.argv[1:] or list(SPECS)
    print("torch %s, transformers %s, %d steps" % (torch.__version__, tf.__version__, STEPS))
    print("%-16s %9s %9s %12s %12s" % ("export", "PyTorch", "ds", "worst loss", "exported"))
    failed = []
    for name in names:
        try:
            data, ref, params, trained = pytorch_side(name)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            failed.append(name)
            continue
        for export in (name, name + "_opt"):
            try:
                losses, count, err = ds_side(os.path.join(OUT, export + ".onnx"), data,
                                             os.path.join(OUT, "work", export), trained)
            except Exception as e:  # noqa: BLE001
                print("%-16s failed: %s" % (export, getattr(e, "stderr", b"") or e))
                failed.append(export)
                continue
            worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, ref))
            ok = len(losses) == len(ref) and worst <= 1e-4 and \
                count == params - UNREAD.get(export, 0) and err <= 1e-3
            print("%-16s %9d %9d %12.2e %12.2e%s" % (export, params, count, worst, err,
                                                    "" if ok else "  MISMATCH"), flush=True)
            if not ok:
                failed.append(export)
    if failed:
        sys.exit("differs from PyTorch: " + " ".join(failed))


if __name__ == "__main__":
    main()
