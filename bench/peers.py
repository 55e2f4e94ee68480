"""ds against the engines a user would pick instead: onnxruntime and PyTorch 2.x.

    bash bench/peers.sh [--threads 2] [--iters 20] [--models gpt2,bert,llama,resnet18,mobilenet_v2]
    bash bench/peers.sh --models gpt2_768,bert_384,llama_768,resnet50,efficientnet_b0  # other models
    bash bench/peers.sh --models qwen2,mistral,phi,gpt_neox,opt,roberta,distilbert  # other architectures
    bash bench/peers.sh --models unet,unet_nearest,lraspp_mobilenet_v3_large,lstm_lm  # segmentation, recurrent

(peers.sh makes bench/.venv with PyTorch 2.x, onnxruntime, transformers and
torchvision from PyPI and runs this file in it; Debian's PyTorch 1.13 is the
test reference, never a speed peer.)

Each model is built from code with random weights (Hugging Face
`transformers` configs, torchvision), exported once with PyTorch's ONNX
exporter, and the same ONNX file is run by ds (ds-opt + ds-run --benchmark),
by onnxruntime's default session and by PyTorch eager under no_grad, all
with the same inputs and thread count, in one run. The three take turns
(--rounds rounds of iters/rounds iterations each), so a shared machine's
load swings hit all three alike; each round's median is kept and the
median of those is reported, with the ratios ds/onnxruntime and ds/PyTorch
(below 1: ds is faster), after checking that ds agrees with PyTorch.

Memory (MB): ds's plan weights plus its static activation arena (ds-run
--rank-report); PyTorch's parameters and buffers plus the peak RSS growth
of one forward; onnxruntime's peak RSS growth from creating the session to
the end of a run. The peers are measured in fresh processes, with the
peak RSS (VmHWM) reset just before.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("DS_BIN", os.path.join(HERE, "..", "build", "bin"))


class Logits(torch.nn.Module):
    """A Hugging Face model as ids -> logits (no KV cache, no dict outputs)."""

    def __init__(self, model, has_cache):
        super().__init__()
        self.model = model
        self.kwargs = {"use_cache": False} if has_cache else {}

    def forward(self, ids):
        return self.model(input_ids=ids, **self.kwargs).logits


def hf_model(name):
    import transformers as tf
    # Other sizes than the three the targets are set on, to see a held-out
    # model's speed: wider, more heads, longer sequences, a single batch.
    if name == "gpt2_768":
        cfg = tf.GPT2Config(vocab_size=8192, n_positions=512, n_embd=768, n_layer=4, n_head=12,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        return tf.GPT2LMHeadModel(cfg), (1, 384), 8192, True
    if name == "bert_384":
        cfg = tf.BertConfig(vocab_size=8192, hidden_size=384, num_hidden_layers=4,
                            num_attention_heads=6, intermediate_size=1536,
                            max_position_embeddings=512, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0)
        return tf.BertForMaskedLM(cfg), (2, 256), 8192, False
    if name == "llama_768":
        cfg = tf.LlamaConfig(vocab_size=8192, hidden_size=768, intermediate_size=2048,
                             num_hidden_layers=3, num_attention_heads=12, num_key_value_heads=4,
                             max_position_embeddings=1024)
        return tf.LlamaForCausalLM(cfg), (1, 512), 8192, True
    if name == "gpt2":
        cfg = tf.GPT2Config(vocab_size=4096, n_positions=256, n_embd=512, n_layer=6, n_head=8,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        return tf.GPT2LMHeadModel(cfg), (2, 128), 4096, True
    if name == "bert":
        cfg = tf.BertConfig(vocab_size=4096, hidden_size=256, num_hidden_layers=4,
                            num_attention_heads=4, intermediate_size=1024,
                            max_position_embeddings=256, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0)
        return tf.BertForMaskedLM(cfg), (4, 128), 4096, False
    if name == "llama":
        cfg = tf.LlamaConfig(vocab_size=4096, hidden_size=512, intermediate_size=1376,
                             num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                             max_position_embeddings=512)
        return tf.LlamaForCausalLM(cfg), (1, 256), 4096, True
    # Other architectures, held out from the targets: what changes between
    # them is the attention's details (biases, partial rotary, parallel
    # blocks, learned positions), which the fusions must still find.
    common = dict(vocab_size=8192, hidden_size=512, num_hidden_layers=4,
                  num_attention_heads=8, max_position_embeddings=1024)
    if name == "qwen2":
        cfg = tf.Qwen2Config(intermediate_size=1376, num_key_value_heads=2, **common)
        return tf.Qwen2ForCausalLM(cfg), (1, 256), 8192, True
    if name == "mistral":
        cfg = tf.MistralConfig(intermediate_size=1376, num_key_value_heads=2, **common)
        return tf.MistralForCausalLM(cfg), (1, 256), 8192, True
    if name == "phi":
        cfg = tf.PhiConfig(intermediate_size=2048, partial_rotary_factor=0.5,
                           resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0, **common)
        return tf.PhiForCausalLM(cfg), (1, 256), 8192, True
    if name == "gpt_neox":
        cfg = tf.GPTNeoXConfig(intermediate_size=2048, rotary_pct=0.25, **common)
        return tf.GPTNeoXForCausalLM(cfg), (1, 256), 8192, True
    if name == "opt":
        cfg = tf.OPTConfig(vocab_size=8192, hidden_size=512, num_hidden_layers=4,
                           num_attention_heads=8, ffn_dim=2048, word_embed_proj_dim=512,
                           max_position_embeddings=1024, dropout=0.0)
        return tf.OPTForCausalLM(cfg), (2, 128), 8192, True
    if name == "roberta":
        cfg = tf.RobertaConfig(intermediate_size=2048, hidden_dropout_prob=0.0,
                               attention_probs_dropout_prob=0.0, **common)
        return tf.RobertaForMaskedLM(cfg), (4, 128), 8192, False
    if name == "distilbert":
        cfg = tf.DistilBertConfig(vocab_size=8192, dim=512, n_layers=4, n_heads=8,
                                  hidden_dim=2048, dropout=0.0, attention_dropout=0.0)
        return tf.DistilBertForMaskedLM(cfg), (4, 128), 8192, False
    raise ValueError(name)


HF_NAMES = ("gpt2", "bert", "llama", "qwen2", "mistral", "phi", "gpt_neox", "opt", "roberta",
            "distilbert")


def build(name):
    """(module, example inputs as a tuple, input names, description)."""
    torch.manual_seed(0)
    if name in HF_NAMES or name.split("_")[0] in ("gpt2", "bert", "llama"):
        model, (b, t), vocab, cache = hf_model(name)
        wrapped = Logits(model.eval(), cache)
        ids = torch.from_numpy(np.random.default_rng(0).integers(0, vocab, (b, t)).astype(np.int64))
        return wrapped.eval(), (ids,), ["ids"], "%s %dx%d tokens" % (name, b, t)
    if name == "lstm_lm":  # a recurrent language model: embedding, 2-layer LSTM, head
        class LSTMLM(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(8192, 256)
                self.rnn = torch.nn.LSTM(256, 512, num_layers=2, batch_first=True)
                self.head = torch.nn.Linear(512, 8192)

            def forward(self, ids):
                return self.head(self.rnn(self.emb(ids))[0])
        ids = torch.from_numpy(np.random.default_rng(0).integers(0, 8192, (4, 32)).astype(np.int64))
        return LSTMLM().eval(), (ids,), ["ids"], "lstm_lm 4x32 tokens (2x512 LSTM)"
    if name in ("unet", "unet_nearest"):  # a U-Net: 4 levels, 2x upsampling, skip concatenations
        mode = "nearest" if name == "unet_nearest" else "bilinear"

        def block(cin, cout):
            return torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.ReLU(),
                                       torch.nn.Conv2d(cout, cout, 3, padding=1), torch.nn.ReLU())

        class UNet(torch.nn.Module):
            def __init__(self):
                super().__init__()
                w = [32, 64, 128, 256]
                self.down = torch.nn.ModuleList([block(3, w[0])] + [block(w[i], w[i + 1]) for i in range(3)])
                self.up = torch.nn.ModuleList([block(w[i + 1] + w[i], w[i]) for i in range(3)])
                self.head = torch.nn.Conv2d(w[0], 8, 1)

            def forward(self, x):
                skips = []
                for i, d in enumerate(self.down):
                    x = d(x if i == 0 else torch.nn.functional.max_pool2d(x, 2))
                    skips.append(x)
                for i in reversed(range(3)):
                    x = torch.nn.functional.interpolate(
                        x, scale_factor=2.0, mode=mode, **({"align_corners": False} if mode == "bilinear" else {}))
                    x = self.up[i](torch.cat([x, skips[i]], 1))
                return self.head(x)
        x = torch.from_numpy(np.random.default_rng(0).standard_normal((1, 3, 256, 256)).astype(np.float32))
        return UNet().eval(), (x,), ["x"], "%s 1x3x256x256 (%s)" % (name, mode)
    import torchvision
    if name.startswith(("lraspp", "fcn_", "deeplabv3")):  # segmentation: the "out" map
        class Segment(torch.nn.Module):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, x):
                return self.net(x)["out"]
        net = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None)
        x = torch.from_numpy(np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32))
        return Segment(net.eval()).eval(), (x,), ["x"], "%s 1x3x224x224" % name
    model = getattr(torchvision.models, name)(weights=None).eval()
    # Some classifiers start with a zero head (ViT, GoogLeNet's auxiliary
    # init): the outputs would be zero and the correctness check vacuous.
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1 and not p.any():
                p.normal_(0.0, 0.02)
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32))
    return model, (x,), ["x"], "%s 1x3x224x224" % name


def _status_kb(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def _reset_peak():
    # Linux: writing 5 to clear_refs resets VmHWM (the peak RSS) to the current RSS.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def measure_memory(engine, name, onnx_path, feeds_path, threads):
    """Run in a fresh process (python peers.py --measure-memory ...): the
    bytes inference takes beyond the engine's libraries, printed as JSON.
    PyTorch: its parameters and buffers plus the peak RSS growth of one
    forward; onnxruntime: the peak RSS growth of creating the session and
    running it (weights, arena, kernels' packed copies)."""
    feeds = dict(np.load(feeds_path))
    if engine == "torch":
        torch.set_num_threads(threads)
        model, inputs, _, _ = build(name)
        weights = sum(t.numel() * t.element_size()
                      for t in list(model.parameters()) + list(model.buffers()))
        with torch.no_grad():
            base = _status_kb("VmRSS")
            _reset_peak()
            model(*inputs)
            peak = _status_kb("VmHWM")
        total = weights + (peak - base) * 1024
    else:
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        base = _status_kb("VmRSS")
        _reset_peak()
        sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        sess.run(None, feeds)
        total = (_status_kb("VmHWM") - base) * 1024
    print(json.dumps({"bytes": total}))


def memory_of(engine, name, onnx_path, feeds_path, threads):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure-memory", engine,
                        "--models", name, "--onnx", onnx_path, "--feeds", feeds_path,
                        "--threads", str(threads)], check=True, capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])["bytes"]


def median_ms(fn, iters):
    """Median of `iters` timed calls after one warm-up call."""
    fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def run_one(name, args, work):
    model, inputs, names, desc = build(name)
    onnx_path = os.path.join(work, name + ".onnx")
    with torch.no_grad():
        ref = model(*inputs).numpy()
        torch.onnx.export(model, inputs, onnx_path, input_names=names, output_names=["out"],
                          opset_version=args.opset, dynamo=args.exporter == "dynamo")
    feeds = {n: t.numpy() for n, t in zip(names, inputs)}

    plan = os.path.join(work, name + ".dsplan")
    shapes = [s for n, t in feeds.items() for s in ("--input-shape", "%s=%s" % (n, ",".join(map(str, t.shape))))]
    subprocess.run([os.path.join(BIN, "ds-opt"), onnx_path, *shapes, "-o", plan], check=True)
    inp, out = os.path.join(work, name + ".in.npz"), os.path.join(work, name + ".out.npz")
    np.savez(inp, **feeds)
    res = subprocess.run([os.path.join(BIN, "ds-run"), plan, "--inputs", inp, "--outputs", out,
                          "--threads", str(args.threads)], check=True, capture_output=True, text=True)
    got = np.load(out)["out"]
    err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
    if err > 1e-4:
        raise SystemExit("%s: ds differs from PyTorch (relative error %.2e)" % (name, err))

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])

    def ds_round(n):
        r = subprocess.run([os.path.join(BIN, "ds-run"), plan, "--inputs", inp,
                            "--threads", str(args.threads), "--benchmark", str(n)],
                           check=True, capture_output=True, text=True)
        return json.loads(r.stdout.strip().splitlines()[-1])["median_ms"]

    per_round = max(1, args.iters // args.rounds)
    ds_r, ort_r, torch_r = [], [], []
    with torch.no_grad():
        for _ in range(args.rounds):
            ds_r.append(ds_round(per_round))
            ort_r.append(median_ms(lambda: sess.run(None, feeds), per_round))
            torch_r.append(median_ms(lambda: model(*inputs), per_round))
    ds_ms, ort_ms, torch_ms = (statistics.median(v) for v in (ds_r, ort_r, torch_r))
    # Memory: ds's plan weights + static arena (--rank-report), against the
    # peers measured in fresh processes.
    rep = subprocess.run([os.path.join(BIN, "ds-run"), plan, "--inputs", inp, "--threads",
                          str(args.threads), "--rank-report"], check=True, capture_output=True,
                         text=True).stdout
    row = json.loads([l for l in rep.splitlines() if l.startswith("{")][-1])
    mem = (row["weight_bytes"] + row["arena_bytes"],
           memory_of("ort", name, onnx_path, inp, args.threads),
           memory_of("torch", name, onnx_path, inp, args.threads))
    return desc, ds_ms, ort_ms, torch_ms, err, mem


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--iters", type=int, default=30, help="timed iterations per engine")
    ap.add_argument("--rounds", type=int, default=5,
                    help="turns the engines take (iters are split among them)")
    ap.add_argument("--opset", type=int, default=18)
    ap.add_argument("--exporter", choices=["torchscript", "dynamo"], default="dynamo",
                    help="torch.onnx.export(dynamo=...): the same file goes to ds and onnxruntime")
    ap.add_argument("--models", default="gpt2,bert,llama,resnet18,mobilenet_v2",
                    help="also: gpt2_768, bert_384, llama_768 (other sizes), and any "
                         "torchvision classifier by name (resnet50, efficientnet_b0, ...)")
    ap.add_argument("--keep", metavar="DIR",
                    help="write the ONNX files, plans and inputs to DIR and keep them (for ds-run --profile)")
    ap.add_argument("--measure-memory", choices=["torch", "ort"], help=argparse.SUPPRESS)
    ap.add_argument("--onnx", help=argparse.SUPPRESS)
    ap.add_argument("--feeds", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure_memory:
        return measure_memory(args.measure_memory, args.models, args.onnx, args.feeds, args.threads)
    torch.set_num_threads(args.threads)
    print("threads=%d iters=%d exporter=%s torch=%s onnxruntime=%s"
          % (args.threads, args.iters, args.exporter, torch.__version__, ort.__version__))
    print("%-28s %10s %12s %10s %10s %10s %8s %10s %8s" % (
        "model", "ds ms", "onnxrt ms", "torch ms", "ds/onnxrt", "ds/torch", "ds MB", "onnxrt MB",
        "torch MB"))
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        for name in args.models.split(","):
            desc, ds_ms, ort_ms, torch_ms, err, mem = run_one(name, args, work)
            print("%-28s %10.2f %12.2f %10.2f %10.2f %10.2f %8.1f %10.1f %8.1f   (rel err %.1e)"
                  % (desc, ds_ms, ort_ms, torch_ms, ds_ms / ort_ms, ds_ms / torch_ms,
                     *(m / 1e6 for m in mem), err), flush=True)


if __name__ == "__main__":
    sys.exit(main())
