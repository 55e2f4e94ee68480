# Dropout in training mode (models exported without model.eval()):
#  1. the mask: every element is 0 or 1/(1-p), the kept fraction, the
#     overlap of two micro-steps' masks and the correlation of neighbours
#     are what Bernoulli(1-p) gives -- the same checks PyTorch's own
#     torch.nn.functional.dropout mask passes here (ds matches PyTorch's
#     statistics, not its random stream);
#  2. a Hugging Face GPT-2 exported in training mode (committed, made by
#     hf_exports/make_dropout_export.py with PyTorch 2.x) trains in ds over
#     8 seeds with the per-step loss mean and spread PyTorch's 8 seeds have;
#     a seed reproduces its run; its inference plan is the eval-mode model;
#  3. ZeRO stages 0-3 on 2 ranks give the same losses (the mask depends on
#     seed, rank and micro-step only), and a run resumed from a checkpoint
#     continues exactly.
# REQUIRES: torch, compiler, mpi
# RUN: rm -rf %t && %python %s --workdir %t
import json
import os
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
from e2e import MPIRUN, parse_args, relative_error, run

args = parse_args()
work = args.workdir
os.makedirs(work, exist_ok=True)
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_exports")


def fail(msg):
    sys.exit("FAIL: " + msg)


# ---- 1. the mask ------------------------------------------------------------
class MaskProbe(torch.nn.Module):
    """loss = sum(dropout(w) * x) with w = 1 and x = 1: the gradient of w
    after one micro-step is the mask itself."""

    def __init__(self, p):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(64, 1024))
        self.d = torch.nn.Dropout(p)

    def forward(self, x):
        return (self.d(self.w) * x).sum()


def mask_checks(name, m1, m2, p):
    """Bernoulli(1-p) statistics of two independent masks, 5 sigma bounds."""
    n = m1.size
    scale = np.float32(1.0 / (1.0 - p))
    if not set(np.unique(m1)) <= {0.0, scale}:
        fail("%s: mask values %s, not 0 and %g" % (name, np.unique(m1)[:5], scale))
    k1, k2 = m1 != 0, m2 != 0
    sd = np.sqrt(p * (1 - p) / n)
    kept = k1.mean()
    both = (k1 & k2).mean()
    sd_both = np.sqrt((1 - p) ** 2 * (1 - (1 - p) ** 2) / n)
    flat = k1.ravel().astype(np.float64)
    lag1 = np.corrcoef(flat[:-1], flat[1:])[0, 1]
    print("%s p=%.1f: kept %.4f (want %.4f +- %.4f), both %.4f (want %.4f), lag-1 corr %+.4f"
          % (name, p, kept, 1 - p, sd, both, (1 - p) ** 2, lag1))
    if abs(kept - (1 - p)) > 5 * sd:
        fail("%s: kept fraction %.4f, want %.4f" % (name, kept, 1 - p))
    if abs(both - (1 - p) ** 2) > 5 * sd_both:
        fail("%s: two masks overlap %.4f, independent ones %.4f" % (name, both, (1 - p) ** 2))
    if abs(lag1) > 5 / np.sqrt(n):
        fail("%s: neighbouring elements correlate (%.4f)" % (name, lag1))


for p in (0.1, 0.5):
    d = os.path.join(work, "mask%g" % p)
    os.makedirs(d, exist_ok=True)
    onnx_path = os.path.join(d, "probe.onnx")
    torch.onnx.export(MaskProbe(p), (torch.ones(64, 1024),), onnx_path, input_names=["x"],
                      output_names=["loss"], opset_version=17, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING)
    cfg = os.path.join(d, "c.json")
    json.dump({"train_batch_size": 64, "optimizer": {"type": "SGD", "params": {"lr": 1.0}}},
              open(cfg, "w"))
    plan = os.path.join(d, "probe.dsplan")
    run(["ds-opt", onnx_path, "--config", cfg, "--loss", "graph", "-o", plan])
    masks = []
    for key in (11, 12):
        inp = os.path.join(d, "in%d.npz" % key)
        np.savez(inp, x=np.ones((64, 1024), np.float32), rng_key=np.array(key, np.int64))
        state = os.path.join(d, "state%d.npz" % key)
        run(["ds-run", plan, "--program", "train_step", "--inputs", inp, "--save-state", state])
        masks.append(np.load(state)["grad:w"])
    mask_checks("ds", masks[0], masks[1], p)
    torch.manual_seed(0)
    ones = torch.ones(64, 1024)
    mask_checks("torch", torch.nn.functional.dropout(ones, p).numpy(),
                torch.nn.functional.dropout(ones, p).numpy(), p)

# ---- 2. Hugging Face GPT-2 exported in training mode ------------------------
rec = json.load(open(os.path.join(here, "gpt2_dropout.json")))
onnx_path = os.path.join(here, "gpt2_dropout.onnx")
data = os.path.join(here, "gpt2_dropout.npz")
d = os.path.join(work, "gpt2")
os.makedirs(d, exist_ok=True)
cfg = os.path.join(d, "ds_config.json")
json.dump(rec["config"], open(cfg, "w"))
plan = os.path.join(d, "train.dsplan")
run(["ds-opt", onnx_path, "--config", cfg, "--loss", "softmax-cross-entropy", "-o", plan])
dump = run(["ds-run", plan, "--dump"])
streams = sorted(int(l.split("stream=")[1].split("}")[0]) for l in dump.splitlines()
                 if "random_mask(" in l)
print("plan: %d random masks, streams %s" % (len(streams), streams))
if streams != list(range(5)):  # embeddings + 2 per layer, 2 layers
    fail("expected 5 Dropout masks with streams 0-4, got %s" % streams)


def train(seed, plan=plan, steps=rec["steps"], extra=(), prefix=(), log_name=None):
    log = os.path.join(d, log_name or "seed%d.jsonl" % seed)
    run([*prefix, "ds-run", plan, "--data", data, "--steps", str(steps), "--seed", str(seed),
         "--log", log, "--quiet", *extra])
    return [json.loads(l)["loss"] for l in open(log)]


ds_runs = np.array([train(s) for s in range(len(rec["losses_per_seed"]))])
torch_runs = np.array(rec["losses_per_seed"])
if train(0, log_name="again.jsonl") != list(ds_runs[0]):
    fail("the same --seed gave different losses")
n = len(ds_runs)
ds_mean, torch_mean = ds_runs.mean(0), torch_runs.mean(0)
ds_sd, torch_sd = ds_runs.std(0, ddof=1), torch_runs.std(0, ddof=1)
se = np.sqrt(ds_sd ** 2 / n + torch_sd ** 2 / n)
for t in range(len(ds_mean)):
    print("step %2d  mean ds %.4f torch %.4f (diff %+.4f, se %.4f)  spread ds %.4f torch %.4f"
          % (t + 1, ds_mean[t], torch_mean[t], ds_mean[t] - torch_mean[t], se[t], ds_sd[t],
             torch_sd[t]))
worst = np.max(np.abs(ds_mean - torch_mean) / se)
ratio = ds_sd[1:].mean() / torch_sd[1:].mean()
print("per-step mean difference: at most %.2f standard errors; spread ratio ds/torch %.2f"
      % (worst, ratio))
if worst > 4:
    fail("mean losses over seeds differ from PyTorch's by %.1f standard errors" % worst)
# Without masks every seed would give the same losses (spread 0); masks
# twice as strong would spread them about twice as far.
if not 0.6 < ratio < 1.6:
    fail("the spread of losses over seeds is %.2f x PyTorch's" % ratio)

# The inference plan of the same file is the eval-mode model, with a warning.
iplan = os.path.join(d, "infer.dsplan")
res = subprocess.run(["ds-opt", onnx_path, "-o", iplan], capture_output=True, text=True)
if res.returncode != 0 or "an inference plan runs it as model.eval() would" not in res.stderr:
    fail("inference compile: %s" % res.stderr)
ids = np.load(data)["ids"][:8]
np.savez(os.path.join(d, "in.npz"), ids=ids)
run(["ds-run", iplan, "--inputs", os.path.join(d, "in.npz"), "--outputs",
     os.path.join(d, "out.npz")])
err = relative_error(np.load(os.path.join(d, "out.npz"))["logits"],
                     np.load(os.path.join(here, "gpt2_dropout_eval_logits.npy")))
print("inference plan vs PyTorch eval(): relative error %.2e" % err)
if err > 1e-5:
    fail("the inference plan differs from the eval-mode model (%.2e)" % err)

# ---- 3. ZeRO stages and resume ------------------------------------------------
cfg2 = dict(rec["config"], train_batch_size=2 * rec["config"]["train_batch_size"])
losses = {}
for stage in (0, 1, 2, 3):
    c = dict(cfg2, zero_optimization={"stage": stage})
    path = os.path.join(d, "zero%d.json" % stage)
    json.dump(c, open(path, "w"))
    zplan = os.path.join(d, "zero%d.dsplan" % stage)
    run(["ds-opt", onnx_path, "--config", path, "--world-size", "2", "--loss",
         "softmax-cross-entropy", "-o", zplan])
    losses[stage] = train(3, plan=zplan, steps=8, prefix=(*MPIRUN, "-np", "2"),
                          log_name="zero%d.jsonl" % stage)
    print("ZeRO-%d, 2 ranks: %s" % (stage, " ".join("%.5f" % l for l in losses[stage])))
for stage in (1, 2, 3):
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses[stage], losses[0]))
    if worst > 1e-5:
        fail("ZeRO-%d losses differ from ZeRO-0 by %.2e with dropout" % (stage, worst))
if max(abs(a - b) for a, b in zip(losses[0], ds_runs[3][:8])) < 1e-6:
    fail("2 ranks drew the same masks as 1 rank (masks must differ per rank)")

ck = os.path.join(d, "ckpt")
whole = train(5, steps=10, log_name="whole.jsonl")
train(5, steps=5, extra=("--checkpoint-dir", ck), log_name="first.jsonl")
resumed = train(5, steps=10, extra=("--checkpoint-dir", ck, "--resume"), log_name="resumed.jsonl")
if resumed != whole[5:]:
    fail("resumed losses %s differ from the uninterrupted run's %s" % (resumed, whole[5:]))
print("resumed from step 5: steps 6-10 equal the uninterrupted run")
# Another --seed would continue with other Dropout masks than the
# interrupted run's: refused, naming the checkpoint's seed.
other = subprocess.run(["ds-run", plan, "--data", data, "--steps", "10", "--seed", "6", "--quiet",
                        "--checkpoint-dir", ck, "--resume"], capture_output=True, text=True)
if other.returncode == 0 or "resume with --seed 5" not in other.stderr:
    fail("a resume with another --seed was not refused: rc %d, %s" % (other.returncode, other.stderr))
print("a resume with another --seed is refused: " + other.stderr.strip().splitlines()[-1])
