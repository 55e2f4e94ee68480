"""Generation: ds against Hugging Face generate (PyTorch 2.x, with its KV
cache) and onnxruntime-genai, on GPT- and Llama-style models of 100-200M
parameters, in one run.

    bash bench/generation.sh [--models llama156,phi140,gpt2_124] [--batches 1,8] [--threads 2]

(generation.sh makes bench/.venv with PyTorch 2.x, transformers,
onnxruntime-genai and tokenizers from PyPI and runs this file in it.)

Each model is built from a Hugging Face config with random weights and
saved locally; from the same weights:
- ds: torch.onnx.export(dynamo=True) of ids -> logits with dynamic batch and
  sequence (no cache inputs), then `ds-opt --generate` and `ds-run --prompt
  --benchmark`;
- onnxruntime-genai: its model builder makes its ONNX from the saved
  weights (a word-level tokenizer from `tokenizers` stands in for a real
  one), run with og.Generator;
- PyTorch: model.generate(..., do_sample=False) under no_grad.

Prompts are random ids of PROMPT tokens; every engine generates exactly NEW
tokens per sequence (no early stop), greedily, with --threads threads.
Time to first token (TTFT): from the start of generation to the first new
token of every sequence (the prefill). Decode tokens/s: the tokens after
each sequence's first, summed over the batch, over the time after the
first token. The engines take turns (--rounds), each round's value is kept
and the median reported. The greedy tokens of ds and PyTorch are compared
(they must agree: the same weights in fp32).

The memory roof of batch-1 decode is the machine's read bandwidth over the
weight bytes, printed with the rates (measured by a streaming read of a
1 GiB array with the same threads).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("DS_BIN", os.path.join(HERE, "..", "build", "bin"))
PROMPT, NEW = 128, 64


def hf_model(name):
    import transformers as tf
    if name == "llama156":
        cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=3072,
                             num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=4,
                             max_position_embeddings=2048)
        return tf.LlamaForCausalLM(cfg)
    if name == "phi140":  # GPT-style (LayerNorm, GELU MLP in parallel with attention), partial RoPE
        cfg = tf.PhiConfig(vocab_size=51200, hidden_size=768, intermediate_size=3072,
                           num_hidden_layers=12, num_attention_heads=12, partial_rotary_factor=0.5,
                           max_position_embeddings=2048, resid_pdrop=0.0, embd_pdrop=0.0,
                           attention_dropout=0.0)
        return tf.PhiForCausalLM(cfg)
    if name == "gpt2_124":  # GPT-2 small
        cfg = tf.GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        return tf.GPT2LMHeadModel(cfg)
    raise SystemExit("unknown model " + name)


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, use_cache=False).logits


def save_tokenizer(path, vocab):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    t = Tokenizer(models.WordLevel(vocab={"t%d" % i: i for i in range(vocab)}, unk_token="t0"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=t, unk_token="t0", bos_token="t1", eos_token="t2",
                            pad_token="t0").save_pretrained(path)


# ds's --quantize and onnxruntime-genai's builder precision per --precision.
# onnxruntime-genai's CPU int4/int8 (MatMulNBits, accuracy_level 4) quantize
# the activations to int8 at run time too: ds's *-dynamic schemes do.
PRECISIONS = {"fp32": ([], "fp32"), "int8": (["--quantize", "int8-dynamic"], "int8"),
              "int4": (["--quantize", "int4-dynamic", "--group-size", "32"], "int4")}


def prepare(name, work, precision):
    """The model's weights (HF), its ONNX export and onnxruntime-genai's model."""
    d = os.path.join(work, name)
    hf, onnx_path = os.path.join(d, "hf"), os.path.join(d, "model.onnx")
    og_dir = os.path.join(d, "og" if precision == "fp32" else "og_" + precision)
    torch.manual_seed(0)
    model = hf_model(name).eval()
    model.generation_config.eos_token_id = None
    if not os.path.exists(onnx_path):
        os.makedirs(d, exist_ok=True)
        model.save_pretrained(hf)
        save_tokenizer(hf, model.config.vocab_size)
        torch.onnx.export(Logits(model), (torch.zeros(2, 16, dtype=torch.int64),), onnx_path,
                          input_names=["input_ids"], output_names=["logits"], opset_version=18,
                          dynamo=True, dynamic_shapes={"ids": {0: torch.export.Dim("batch"),
                                                               1: torch.export.Dim("sequence")}})
    if not os.path.exists(os.path.join(og_dir, "genai_config.json")):
        r = subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", hf,
                            "-o", og_dir, "-p", PRECISIONS[precision][1], "-e", "cpu"],
                           capture_output=True, text=True)
        if r.returncode != 0:  # the builder knows some architectures only (not GPT-2)
            print("%s: onnxruntime-genai's builder declines it: %s" % (
                name, r.stderr.strip().splitlines()[-1]))
            return model, onnx_path, None
    return model, onnx_path, og_dir


def og_run(og_dir, ids, threads):
    """One greedy generation with onnxruntime-genai: (ttft s, decode s, tokens)."""
    import onnxruntime_genai as og
    cfg_path = os.path.join(og_dir, "genai_config.json")
    cfg = json.load(open(cfg_path))
    so = cfg["model"]["decoder"]["session_options"]
    if so.get("intra_op_num_threads") != threads:
        so["intra_op_num_threads"] = threads
        so["inter_op_num_threads"] = 1
        json.dump(cfg, open(cfg_path, "w"), indent=1)
    if og_run.model is None or og_run.dir != og_dir:
        og_run.model, og_run.dir = og.Model(og_dir), og_dir
    b, p = ids.shape
    params = og.GeneratorParams(og_run.model)
    params.set_search_options(max_length=p + NEW, min_length=p + NEW, do_sample=False,
                              batch_size=b)
    t0 = time.perf_counter()
    gen = og.Generator(og_run.model, params)
    gen.append_tokens(ids)
    gen.generate_next_token()
    t1 = time.perf_counter()
    while not gen.is_done():
        gen.generate_next_token()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, [gen.get_sequence(i)[p:] for i in range(b)]


og_run.model = None
og_run.dir = None


def torch_run(model, ids):
    """(ttft s, decode s, tokens): generate 1 token, then NEW."""
    x = torch.from_numpy(ids)
    with torch.no_grad():
        t0 = time.perf_counter()
        model.generate(x, max_new_tokens=1, do_sample=False, pad_token_id=0)
        t1 = time.perf_counter()
        out = model.generate(x, max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False,
                             pad_token_id=0)
        t2 = time.perf_counter()
    return t1 - t0, (t2 - t1) - (t1 - t0), out[:, ids.shape[1]:].numpy()


def ds_plan(onnx_path, batch, work, precision):
    plan = os.path.join(work, "gen_%s_b%d.dsplan" % (precision, batch))
    if not os.path.exists(plan):
        subprocess.run([os.path.join(BIN, "ds-opt"), onnx_path, "--generate", "--batch",
                        str(batch), "--max-tokens", str(PROMPT + NEW), "-o", plan,
                        *PRECISIONS[precision][0]], check=True)
    return plan


def ds_run(plan, prompts, threads, runs):
    r = subprocess.run([os.path.join(BIN, "ds-run"), plan, "--prompt", prompts, "--max-new-tokens",
                        str(NEW), "--threads", str(threads), "--benchmark", str(runs)],
                       check=True, capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def read_bandwidth(threads):
    """GB/s of a streaming read by torch (sum of a 1 GiB array), best of 5."""
    torch.set_num_threads(threads)
    a = torch.ones(1 << 28)
    best = 0
    for _ in range(5):
        t = time.perf_counter()
        a.sum()
        best = max(best, a.numel() * 4 / (time.perf_counter() - t) / 1e9)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="llama156,phi140,gpt2_124",
                    help="llama156 (Llama-style, GQA), phi140 (GPT-style: LayerNorm, GELU; "
                         "onnxruntime-genai builds it), gpt2_124 (GPT-2 small; onnxruntime-genai's "
                         "builder declines GPT-2, so PyTorch only)")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--precision", choices=sorted(PRECISIONS), default="fp32",
                    help="weights: fp32, int8 (ds --quantize int8-dynamic; onnxruntime-genai -p "
                         "int8) or int4 (ds --quantize int4-dynamic --group-size 32; "
                         "onnxruntime-genai -p int4, its default blocks of 32; both quantize "
                         "activations to int8 as they run). PyTorch stays fp32")
    ap.add_argument("--work", default=os.path.join(HERE, ".generation"),
                    help="models, exports and plans are kept here between runs")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import onnxruntime_genai as og
    import transformers
    bw = read_bandwidth(args.threads)
    print("threads=%d prompt=%d new=%d precision=%s torch=%s transformers=%s "
          "onnxruntime-genai=%s read bandwidth %.1f GB/s" % (
              args.threads, PROMPT, NEW, args.precision, torch.__version__,
              transformers.__version__, og.__version__, bw))
    print("%-10s %5s | %9s %9s %9s | %9s %9s %9s | %8s %8s | %s" % (
        "model", "batch", "ds TTFT", "og TTFT", "pt TTFT", "ds tok/s", "og tok/s", "pt tok/s",
        "TTFT vs", "tok/s vs", "roof tok/s"))
    for name in args.models.split(","):
        work = os.path.join(args.work, name)
        model, onnx_path, og_dir = prepare(name, args.work, args.precision)
        weight_bytes = sum(p.numel() * 4 for p in model.parameters())
        if args.precision != "fp32":  # the projections' bytes shrink; embeddings stay
            weight_bytes //= 4 if args.precision == "int8" else 8
        for batch in map(int, args.batches.split(",")):
            rng = np.random.default_rng(batch)
            ids = rng.integers(3, model.config.vocab_size, (batch, PROMPT)).astype(np.int64)
            prompts = os.path.join(work, "prompts_b%d.npz" % batch)
            np.savez(prompts, input_ids=ids)
            plan = ds_plan(onnx_path, batch, work, args.precision)
            rows = {"ds": [], "og": [], "pt": []}
            for _ in range(args.rounds):
                r = ds_run(plan, prompts, args.threads, 1)
                rows["ds"].append((r["ttft_ms"], r["decode_tokens_per_s"]))
                if og_dir:
                    ttft, dec, og_tokens = og_run(og_dir, ids, args.threads)
                    rows["og"].append((ttft * 1e3, batch * (NEW - 1) / dec))
                ttft, dec, pt_tokens = torch_run(model, ids)
                rows["pt"].append((ttft * 1e3, batch * (NEW - 1) / dec))
            # ds's tokens against PyTorch's, greedy in fp32.
            out = os.path.join(work, "out_b%d.npz" % batch)
            subprocess.run([os.path.join(BIN, "ds-run"), plan, "--prompt", prompts,
                            "--max-new-tokens", str(NEW), "--threads", str(args.threads),
                            "--outputs", out], check=True, capture_output=True)
            ds_tokens = np.load(out)["sequences"][:, PROMPT:]
            agree = float((ds_tokens == pt_tokens).mean())  # quantized: not expected equal
            med = {k: (statistics.median(t for t, _ in v), statistics.median(s for _, s in v))
                   if v else (float("nan"), float("nan")) for k, v in rows.items()}
            peers = ["pt"] + (["og"] if og_dir else [])
            best_ttft = min(med[p][0] for p in peers)
            best_rate = max(med[p][1] for p in peers)
            print("%-10s %5d | %7.1fms %7.1fms %7.1fms | %9.1f %9.1f %9.1f | %8.2f %8.2f | %.1f"
                  "   (tokens agree with PyTorch: %.0f%%)" % (
                      name, batch, med["ds"][0], med["og"][0], med["pt"][0], med["ds"][1],
                      med["og"][1], med["pt"][1], med["ds"][0] / best_ttft,
                      med["ds"][1] / best_rate, batch * bw * 1e9 / weight_bytes, 100 * agree),
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
