# Mixed precision with data parallelism and ZeRO. bf16 training on 2 ranks
# at ZeRO stages 0-3 follows the one-rank bf16 run (per-step losses within
# 2e-3: each rank rounds its half-batch weight-gradient product to bf16
# before the average, one rank rounds the whole sum once, as bf16 gradients
# do in DeepSpeed too). fp16 with an overflow in only one rank's samples: every rank skips
# those steps (the overflow test reads the all-reduced gradient norm), the
# loss scale follows DeepSpeed's scaler on both, and the ranks' parameters
# stay identical.
# REQUIRES: torch, compiler, mpi
# RUN: rm -rf %t && %python %s --workdir %t
import json
import os
import re
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
from e2e import MPIRUN, parse_args, run
from train_reference import compare, gpt_training_setup

args = parse_args()
T, steps = 16, 12
data_path, onnx_path, _ = gpt_training_setup(args.workdir, 7)


def train(name, world, stage, precision, data=data_path, n=steps):
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    cfg = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 8 // world,
           "gradient_clipping": 1.0, "zero_optimization": {"stage": stage},
           "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "weight_decay": 0.01}}}
    cfg.update(precision)
    cfg_path = os.path.join(work, "ds_config.json")
    json.dump(cfg, open(cfg_path, "w"))
    plan = os.path.join(work, "train.dsplan")
    run(["ds-opt", onnx_path, "--config", cfg_path, "--world-size", str(world), "--loss",
         "softmax-cross-entropy", "--input-shape", "idx=%d,%d" % (8 // world, T), "-o", plan])
    log = os.path.join(work, "train.jsonl")
    run((MPIRUN + ["-np", str(world)] if world > 1 else []) +
        ["ds-run", plan, "--data", data, "--steps", str(n), "--log", log, "--quiet",
         "--checkpoint-dir", os.path.join(work, "ckpt")])
    return work, [json.loads(l) for l in open(log)]


bf16 = {"bf16": {"enabled": True}}
# Gradients are reduced in bf16 by default (DeepSpeed's communication_data_type
# defaults to the training type), in fp32 when the config says so; --report
# sets ds's model-state bytes beside DeepSpeed's 2P + 2P + 12P.
def zero2_report(extra):
    work = os.path.join(args.workdir, "report")
    os.makedirs(work, exist_ok=True)
    cfg = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4,
           "zero_optimization": {"stage": 2}}
    cfg.update(bf16)
    cfg.update(extra)
    path = os.path.join(work, "c.json")
    json.dump(cfg, open(path, "w"))
    return run(["ds-opt", onnx_path, "--config", path, "--world-size", "2", "--loss",
                "softmax-cross-entropy", "--input-shape", "idx=4,%d" % T, "--report"])


rep = zero2_report({})
rs = re.search(r"train_step: reduce_scatter\s+(\d+) B", rep)
psi = int(re.search(r"P = (\d+)\)", rep).group(1))
if "gradients reduced in bf16" not in rep or not rs:
    sys.exit("bf16 ZeRO-2 report:\n" + rep)
rep32 = zero2_report({"communication_data_type": "fp32"})
rs32 = re.search(r"train_step: reduce_scatter\s+(\d+) B", rep32)
if "gradients reduced in fp32" not in rep32 or int(rs32.group(1)) != 2 * int(rs.group(1)):
    sys.exit("communication_data_type fp32 should double the reduce-scatter bytes:\n%s\n%s" % (rep, rep32))
want = 2 * psi + (2 + 12) * psi / 2
got = float(re.search(r"DeepSpeed's 2P \+ 2P \+ 12P \(ZeRO-2 over 2 ranks, P = \d+\) (\d+) B", rep).group(1))
if abs(got - want) > 1:
    sys.exit("the report's DeepSpeed formula gives %g, expected %g" % (got, want))
print("bf16 ZeRO-2: reduce-scatter %s B per micro-step in bf16, %s B in fp32; formula %d B"
      % (rs.group(1), rs32.group(1), got))
# Measured: each rank's state bytes (ds-run --rank-report, from the loaded
# plan's buffers) are what --report promised, DeepSpeed's 2P + 2P + 12P
# over the ranks at stages 1 and 2 (up to the zero padding that makes each
# tensor split into equal blocks: under 16 bytes per tensor here).
for stage in (1, 2):
    work, _ = train("bf16_mem_z%d" % stage, 2, stage, bf16, n=1)
    rep = run(["ds-opt", onnx_path, "--config", os.path.join(work, "ds_config.json"),
               "--world-size", "2", "--loss", "softmax-cross-entropy", "--input-shape",
               "idx=4,%d" % T, "--report"])
    promised = int(re.search(r"model states per rank: ds (\d+) B", rep).group(1))
    formula = float(re.search(r"12P \(ZeRO-%d over 2 ranks, P = \d+\) (\d+) B" % stage, rep).group(1))
    tensors = int(re.search(r"trained parameters: (\d+) tensors", rep).group(1))
    out = run(MPIRUN + ["-np", "2", "ds-run", os.path.join(work, "train.dsplan"), "--rank-report",
                        "--data", data_path, "--steps", "1", "--quiet"])
    ranks = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    held = [r["param_bytes"] + r["grad_bytes"] + r["optimizer_bytes"] for r in ranks]
    print("bf16 ZeRO-%d model states per rank: measured %s B, --report %d B, DeepSpeed's formula %d B"
          % (stage, held, promised, formula))
    if len(held) != 2 or any(h != promised for h in held) or not 0 <= promised - formula < 16 * tensors:
        sys.exit("bf16 ZeRO-%d: measured %s, promised %d, formula %d" % (stage, held, promised, formula))
_, one = train("bf16_1", 1, 0, bf16)
for stage in (0, 1, 2, 3):
    _, two = train("bf16_2_z%d" % stage, 2, stage, bf16)
    compare("bf16 ZeRO-%d 2 ranks vs 1" % stage, [r["loss"] for r in two], [r["loss"] for r in one],
            tol=2e-3)

# fp16 on a float-input model: in each 4-sample global batch, samples 2-3
# are rank 1's; one of them is 1e30 (inf in fp16) on the scripted steps.
fp16 = {"fp16": {"enabled": True, "initial_scale_power": 8, "loss_scale_window": 3, "hysteresis": 1}}
import torch
torch.manual_seed(0)
mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
mlp_path = os.path.join(args.workdir, "mlp.onnx")
torch.onnx.export(mlp, (torch.zeros(2, 8),), mlp_path, input_names=["x"], output_names=["y"],
                  opset_version=17, dynamic_axes={"x": {0: "b"}, "y": {0: "b"}})
rng = np.random.default_rng(0)
n = 12
x = rng.standard_normal((4 * n, 8)).astype(np.float32)
y = rng.standard_normal((4 * n, 4)).astype(np.float32)
overflow = [1, 2, 6]
for s in overflow:
    x[4 * s + 3] = 1e30  # the last sample of the step: rank 1's half of the batch
mlp_data = os.path.join(args.workdir, "mlp.npz")
np.savez(mlp_data, x=x, labels=y)
cfg = {"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2},
       "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}}}
cfg.update(fp16)
work = os.path.join(args.workdir, "fp16_z2")
os.makedirs(work, exist_ok=True)
json.dump(cfg, open(os.path.join(work, "c.json"), "w"))
plan = os.path.join(work, "t.dsplan")
run(["ds-opt", mlp_path, "--config", os.path.join(work, "c.json"), "--world-size", "2", "--loss",
     "mse", "-o", plan])
log = os.path.join(work, "log.jsonl")
run(MPIRUN + ["-np", "2", "ds-run", plan, "--data", mlp_data, "--steps", str(n), "--log", log,
              "--quiet", "--checkpoint-dir", os.path.join(work, "ckpt")])
got = [json.loads(l) for l in open(log)]
skipped = [r["step"] - 1 for r in got if r["skipped"]]
if skipped != overflow:
    sys.exit("fp16 ZeRO-2: skipped steps %s, expected %s (rank 1's overflows)" % (skipped, overflow))
# DeepSpeed's scaler with hysteresis 1, window 3, from 2^8: halve on each
# overflow, double after 3 clean steps since the last one.
scale, last, want = 256.0, -1, []
for it in range(n):
    want.append(scale)
    if it in overflow:
        scale, last = max(scale / 2, 1.0), it
    elif (it - last - 1) > 0 and (it - last - 1) % 3 == 0:
        scale *= 2
if [r["loss_scale"] for r in got] != want:
    sys.exit("fp16 ZeRO-2 loss scales %s, expected %s" % ([r["loss_scale"] for r in got], want))
ck = os.path.join(work, "ckpt")
step_dir = open(os.path.join(ck, "latest")).read().strip()
metas = [open(os.path.join(ck, step_dir, f)).read() for f in sorted(os.listdir(os.path.join(ck, step_dir)))
         if f.startswith("meta")]
if not all("applied_steps: %d" % (n - len(overflow)) in m for m in metas):
    sys.exit("checkpoint metadata does not record %d applied steps:\n%s" % (n - len(overflow), metas))
states = [np.load(os.path.join(ck, step_dir, f)) for f in sorted(os.listdir(os.path.join(ck, step_dir)))
          if f.startswith("state")]
params = [k for k in states[0].files if k.startswith("param:")]
if len(states) != 2 or not params:
    sys.exit("expected two rank state files with parameters, got %d" % len(states))
for k in params:
    if not np.array_equal(states[0][k], states[1][k]) or not np.isfinite(states[0][k]).all():
        sys.exit("ranks disagree on %s (or it is not finite)" % k)
print("fp16 ZeRO-2 on 2 ranks: overflow on rank 1 only skipped steps %s on every rank; "
      "loss scales %s" % (skipped, want))
