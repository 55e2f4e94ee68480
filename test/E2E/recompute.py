# Activation checkpointing (DeepSpeed's activation_checkpointing section,
# ds-opt --recompute):
#  1. a GPT-style decoder trained with a checkpoint per layer gives PyTorch's
#     losses (rel <= 1e-4 over 12 steps) and ds's own without recompute
#     (rel <= 1e-6), with a smaller planned arena (--report) and a smaller
#     measured device pool (ds-run --rank-report);
#  2. number_checkpoints, cpu_checkpointing, --recompute sqrt and
#     --recompute-budget change memory, not losses; a budget nothing meets
#     is an error naming the sizes;
#  3. a Hugging Face GPT-2 exported by PyTorch 2 (node names without module
#     paths: layers come from the parameter names) with Dropout recomputes
#     the same masks: the same losses for a seed with and without recompute;
#  4. with ZeRO-3 on 2 ranks (parameters re-gathered for the recomputation)
#     and with bf16, the same losses with and without recompute;
#  5. bad flags are errors naming them.
# REQUIRES: torch, compiler, mpi
# RUN: rm -rf %t && %python %s --workdir %t
import copy
import json
import os
import re
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
import torch.nn.functional as F
from e2e import MPIRUN, parse_args, run, write_config
from torch_models import GPT, randomize_layernorms
from train_reference import compare, train_torch

args = parse_args()
work = args.workdir
os.makedirs(work, exist_ok=True)
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_exports")


def fail(msg):
    sys.exit("FAIL: " + msg)


def train(name, onnx_path, cfg, data_path, steps, extra=(), ranks=1, seed=None):
    """Compiles and trains; returns (losses, planned arena bytes, measured
    device pool peak of rank 0)."""
    d, cfg_path = write_config(work, name, cfg)
    plan = os.path.join(d, "train.dsplan")
    report = run(["ds-opt", onnx_path, "--config", cfg_path, "--world-size", str(ranks), "-o", plan,
                  "--report", *extra])
    arena = int(re.search(r"activations \(arena\)\s+(\d+) B", report).group(1))
    log = os.path.join(d, "train.jsonl")
    cmd = ["ds-run", plan, "--data", data_path, "--steps", str(steps), "--log", log,
           "--rank-report"]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    out = run([*MPIRUN, "-np", str(ranks), *cmd] if ranks > 1 else cmd)
    ranks_seen = [json.loads(l) for l in out.splitlines() if l.startswith('{"rank"')]
    pool = min(r["device_pool_peak_bytes"] for r in ranks_seen)
    return [json.loads(l)["loss"] for l in open(log)], arena, pool, report


def same(name, a, b, tol=1e-6):
    worst = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))
    print("%s: %d steps, worst relative difference %.2e" % (name, len(a), worst))
    if len(a) != len(b) or worst > tol:
        fail("%s: losses differ (worst %.3g > %.1g)" % (name, worst, tol))


# ---- 1. GPT, a checkpoint per layer, against PyTorch ------------------------
vocab, ctx, mbs, T = 64, 16, 4, 16
rng = np.random.default_rng(1)
tokens = rng.integers(0, vocab, (32, T + 1)).astype(np.int64)
data = {"idx": tokens[:, :-1].copy(), "labels": tokens[:, 1:].copy()}
data_path = os.path.join(work, "data.npz")
np.savez(data_path, **data)
torch.manual_seed(3)
model = GPT(vocab=vocab, ctx=ctx, d=32, heads=4, layers=3, tied=True)
randomize_layernorms(model, torch.Generator().manual_seed(3))
onnx_path = os.path.join(work, "gpt.onnx")
torch.onnx.export(copy.deepcopy(model), (torch.zeros(mbs, T, dtype=torch.long),), onnx_path,
                  input_names=["idx"], output_names=["logits"], opset_version=17)
base = {"train_batch_size": 4, "train_micro_batch_size_per_gpu": 4, "gradient_clipping": 1.0,
        "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "weight_decay": 0.01}}}
ckpt = dict(base, activation_checkpointing={"partition_activations": False,
                                            "contiguous_memory_optimization": False,
                                            "number_checkpoints": None,
                                            "synchronize_checkpoint_boundary": False,
                                            "profile": False})
steps = 12
plain, plain_arena, plain_pool, _ = train("plain", onnx_path, base, data_path, steps)
layers, layers_arena, layers_pool, report = train("layers", onnx_path, ckpt, data_path, steps)
torch_losses = train_torch(model, base, data, steps,
                           lambda logits, labels: F.cross_entropy(
                               logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)))
compare("recompute per layer vs PyTorch", layers, torch_losses)
same("recompute per layer vs none", layers, plain)
m = re.search(r"activation checkpointing \(layers\): (\d+) checkpoints, (\d+) of", report)
if not m or int(m.group(1)) != 3:
    fail("--report should show 3 checkpoints (one per layer):\n" + report)
print("arena: %d B without recompute, %d B with a checkpoint per layer" % (plain_arena, layers_arena))
print("device pool peak: %d B without, %d B with" % (plain_pool, layers_pool))
if not layers_arena < 0.6 * plain_arena:
    fail("a checkpoint per layer should cut the arena by 40%% or more: %d -> %d"
         % (plain_arena, layers_arena))
if not plain_pool - layers_pool >= 0.9 * (plain_arena - layers_arena):
    fail("the measured device pool should fall with the arena: %d -> %d (arena %d -> %d)"
         % (plain_pool, layers_pool, plain_arena, layers_arena))

# ---- 2. other policies -------------------------------------------------------
one = copy.deepcopy(ckpt)
one["activation_checkpointing"]["number_checkpoints"] = 1
losses, arena_one, _, _ = train("one", onnx_path, one, data_path, steps)
same("number_checkpoints 1", losses, plain)
cpu = copy.deepcopy(ckpt)
cpu["activation_checkpointing"]["cpu_checkpointing"] = True
losses, arena_cpu, _, report = train("cpu", onnx_path, cpu, data_path, steps)
same("cpu_checkpointing", losses, plain)
if "checkpoints in host memory" not in report or "train_step: device->host" not in report:
    fail("cpu_checkpointing should put checkpoints in host memory:\n" + report)
if not arena_cpu < layers_arena:
    fail("checkpoints on the host should shrink the device arena: %d -> %d"
         % (layers_arena, arena_cpu))
losses, arena_sqrt, _, _ = train("sqrt", onnx_path, base, data_path, steps, ["--recompute", "sqrt"])
same("--recompute sqrt", losses, plain)
if not arena_sqrt < plain_arena:
    fail("--recompute sqrt should shrink the arena: %d -> %d" % (plain_arena, arena_sqrt))
losses, arena_roomy, _, _ = train("roomy", onnx_path, base, data_path, 2,
                                  ["--recompute-budget", "1GiB"])
if arena_roomy != plain_arena:
    fail("a budget the step fits should recompute nothing: arena %d, %d without"
         % (arena_roomy, plain_arena))
losses, arena_budget, _, _ = train("budget", onnx_path, base, data_path, steps,
                                   ["--recompute-budget", "400000"])
same("--recompute-budget 400000", losses, plain)
if not arena_budget < plain_arena:
    fail("a tight budget should shrink the arena: %d -> %d" % (plain_arena, arena_budget))
print("arena: number_checkpoints 1 %d, cpu_checkpointing %d, sqrt %d, budget 400000 %d"
      % (arena_one, arena_cpu, arena_sqrt, arena_budget))

# ---- 3. PyTorch 2 export with Dropout: layers from parameter names ---------
rec = json.load(open(os.path.join(here, "gpt2_dropout.json")))
drop_data = os.path.join(here, "gpt2_dropout.npz")
drop_onnx = os.path.join(here, "gpt2_dropout.onnx")
a, _, _, _ = train("drop_plain", drop_onnx, rec["config"], drop_data, 6, seed=5)
b, arena_drop, _, report = train("drop_ckpt", drop_onnx,
                                 dict(rec["config"], activation_checkpointing={}),
                                 drop_data, 6, seed=5)
same("gpt2 with Dropout, seed 5, recompute per layer vs none", b, a)
if "activation checkpointing (layers): 2 checkpoints" not in report:
    fail("the 2-layer GPT-2 should get a checkpoint per layer from its parameter names:\n"
         + report)

# ---- 4. ZeRO-3 on 2 ranks, and bf16 ------------------------------------------
z3 = dict(base, train_batch_size=8,
          zero_optimization={"stage": 3, "stage3_param_persistence_threshold": 0})
a, z3_arena, _, _ = train("z3", onnx_path, z3, data_path, 8, ranks=2)
b, z3ac_arena, _, _ = train("z3_ckpt", onnx_path, dict(z3, activation_checkpointing={}),
                            data_path, 8, ranks=2)
same("ZeRO-3 on 2 ranks, recompute per layer vs none", b, a)
if not z3ac_arena < z3_arena:
    fail("ZeRO-3 with recompute should shrink the arena: %d -> %d" % (z3_arena, z3ac_arena))
bf = dict(base, bf16={"enabled": True})
a, _, _, _ = train("bf16", onnx_path, bf, data_path, 8)
b, _, _, _ = train("bf16_ckpt", onnx_path, dict(bf, activation_checkpointing={}), data_path, 8)
same("bf16, recompute per layer vs none", b, a)

# ---- 5. bad flags -----------------------------------------------------------
cfg_path = os.path.join(work, "plain", "ds_config.json")
for flags, message in [
        (["--recompute", "often"], "--recompute: expected none, layers, sqrt or budget, got 'often'"),
        (["--recompute", "budget"], "--recompute budget needs --recompute-budget SIZE"),
        (["--recompute-budget", "lots"], "--recompute-budget: expected a size such as 2GiB"),
        (["--recompute", "sqrt", "--recompute-budget", "1GiB"],
         "--recompute-budget goes with --recompute budget, not --recompute sqrt"),
        (["--recompute-checkpoints", "0"], "--recompute-checkpoints must be >= 1, got 0"),
        (["--recompute-budget", "1000"], "an activation budget of 1.0 kB cannot be met")]:
    res = subprocess.run(["ds-opt", onnx_path, "--config", cfg_path, "-o",
                          os.path.join(work, "bad.dsplan"), *flags],
                         capture_output=True, text=True)
    if res.returncode == 0 or message not in res.stderr:
        fail("ds-opt %s should fail with '%s', got rc %d: %s"
             % (" ".join(flags), message, res.returncode, res.stderr))
res = subprocess.run(["ds-opt", onnx_path, "-o", os.path.join(work, "bad.dsplan"),
                      "--recompute", "layers"], capture_output=True, text=True)
if res.returncode == 0 or "--recompute applies to training plans" not in res.stderr:
    fail("--recompute on an inference plan should be refused: " + res.stderr)
print("recompute: all checks passed")
