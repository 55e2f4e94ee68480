# DeepSpeed's 1-bit Adam (optimizer type "OneBitAdam"), 0/1 Adam
# ("ZeroOneAdam") and 1-bit LAMB ("OneBitLamb") on 1, 2 and 4 data-
# parallel ranks follows a numpy transcription of the algorithm (DeepSpeed's
# runtime/fp16/onebit/adam.py and comm/nccl.py compressed_allreduce, as
# DEEPSPEED-ALGORITHMS.md records them) within 1e-5 per step over 20 steps:
# the first step only initializes, Adam without bias correction on averaged
# gradients until freeze_step, then each rank's momentum from its own
# gradients averaged by the error-compensated 1-bit all-reduce, the
# variance frozen; 0/1 Adam's variance steps at doubling intervals with
# 1-bit-averaged gradients between, then after var_freeze_step local steps
# (each rank its own parameters) synced at doubling intervals by the 1-bit
# all-reduce of their sum; 1-bit LAMB's LAMB warm-up tracking a frozen
# trust ratio, then every momentum scaled into one 1-bit all-reduce, the
# ratio from the frozen one and a fresh variance. A 1-bit decision is discontinuous: where the reference
# meets a near tie (an element within 1e-6 of its buffer's scale from 0,
# not exactly 0), ds's float-rounding-different momentum may take the other
# sign and the trajectories part; the strict comparison stops at such a
# step and must have covered at least 4 compressed updates. The report
# counts the compressed traffic (1/32 of the fp32 all-reduce's per element)
# and the comms logger measures it.
# REQUIRES: torch, compiler, mpi
# RUN: rm -rf %t && %python %s --workdir %t
import copy
import json
import math
import os
import re
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
import torch.nn.functional as F
from e2e import MPIRUN, parse_args, run
from torch_models import MLP
from train_reference import compare

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
STEPS, FREEZE = 20, 5
rng = np.random.default_rng(0)
data = {"x": rng.standard_normal((64, 32)).astype(np.float32),
        "labels": rng.integers(0, 10, 64).astype(np.int64)}
data_path = os.path.join(args.workdir, "data.npz")
np.savez(data_path, **data)
PARAMS = {"lr": 2e-3, "freeze_step": FREEZE, "betas": [0.9, 0.99], "eps": 1e-8,
          "weight_decay": 0.01}


def sign(x):  # DeepSpeed's: x >= 0 counts as +1
    return np.where(x >= 0, np.float32(1), np.float32(-1))


def rms(x):
    return np.float32(math.sqrt(float(np.dot(x.astype(np.float64), x.astype(np.float64)))) /
                      math.sqrt(x.size))


MARGINS = []  # each sign decision's distance from a tie, this step


def margin(x):
    nonzero = np.abs(x[x != 0])  # exact zeros (padding) decide alike everywhere
    return float(nonzero.min() / rms(x)) if nonzero.size else 1.0


def compressed_allreduce(bufs, worker_err, server_err):
    """bufs, worker_err: one flat padded float32 array per rank;
    server_err: one chunk per rank. Updates the errors; returns the
    average every rank receives."""
    n, N = len(bufs), len(worker_err[0])
    chunk = N // n
    signs, scales = [], []
    for r in range(n):
        x = bufs[r] + worker_err[r]
        MARGINS.append(margin(x))
        s = rms(x)
        worker_err[r][:] = x - s * sign(x)
        signs.append(sign(x))
        scales.append(s)
    out = np.empty(N, np.float32)
    for j in range(n):
        c = np.zeros(chunk, np.float32)
        for r in range(n):
            c += signs[r][j * chunk:(j + 1) * chunk] * scales[r]
        c = c * np.float32(1.0 / n) + server_err[j]
        MARGINS.append(margin(c))
        s = rms(c)
        server_err[j][:] = c - s * sign(c)
        out[j * chunk:(j + 1) * chunk] = s * sign(c)
    return out


def local_gradients(models, mbs, gas, micro):
    """Each rank's accumulated gradient (flat, per parameter) from the
    samples ds-run's loader gives it at micro-step `micro`, with its own
    model; and the ranks' losses summed."""
    world, n, total, grads = len(models), len(data["labels"]), 0.0, []
    for r, model in enumerate(models):
        model.zero_grad()
        for k in range(gas):
            first = (micro + k) * mbs * world + r * mbs
            idx = [(first + i) % n for i in range(mbs)]
            loss = F.cross_entropy(model(torch.from_numpy(data["x"][idx])),
                                   torch.from_numpy(data["labels"][idx]))
            (loss / gas).backward()
            total += loss.item() / gas
        grads.append([p.grad.detach().numpy().reshape(-1).copy() for p in model.parameters()])
    return grads, total


def clipped(grads, averaged):
    """The ranks' gradients as the optimizer takes them: averaged when the
    engine all-reduces them, then clipped (1.0) by each rank's own norm."""
    world = len(grads)
    if averaged:
        avg = [sum(g[i] for g in grads) / np.float32(world) for i in range(len(grads[0]))]
        grads = [avg] * world
    out = []
    for g in grads:
        norm = math.sqrt(sum(float(np.dot(x.astype(np.float64), x)) for x in g))
        out.append([x * np.float32(min(1.0, 1.0 / (norm + 1e-6))) for x in g])
    return out


def reference(model, world, mbs, gas):
    """Per-step losses of 1-bit Adam over `world` ranks, each reading the
    samples ds-run's loader gives it, from `model`'s weights; and the first
    step whose update met a near tie (None if none did)."""
    params = [p for p in model.parameters()]
    m = [np.zeros(p.numel(), np.float32) for p in params]
    v = [np.zeros(p.numel(), np.float32) for p in params]
    unit = world * (world * 8 // math.gcd(world, 8))
    padded = [(p.numel() + unit - 1) // unit * unit for p in params]
    we = [[np.zeros(N, np.float32) for _ in range(world)] for N in padded]
    se = [[np.zeros(N // world, np.float32) for _ in range(world)] for N in padded]
    b1, b2 = PARAMS["betas"]
    eps, wd, lr = PARAMS["eps"], PARAMS["weight_decay"], PARAMS["lr"]
    losses, micro, n, tie = [], 0, len(data["labels"]), None
    for step in range(STEPS):
        grads, total = local_gradients([model] * world, mbs, gas, micro)
        micro += gas
        losses.append(total / world)
        compressed = step >= max(2, FREEZE)
        grads = clipped(grads, averaged=not compressed)
        if step == 0:
            continue  # DeepSpeed's initialization step
        with torch.no_grad():
            for i, p in enumerate(params):
                if compressed:
                    local = [b1 * m[i] + (1 - b1) * grads[r][i] for r in range(world)]
                    if world > 1:
                        bufs = [np.concatenate([x, np.zeros(padded[i] - x.size, np.float32)])
                                for x in local]
                        m[i] = compressed_allreduce(bufs, we[i], se[i])[:p.numel()]
                    else:
                        m[i] = local[0]
                else:
                    g = grads[0][i]
                    m[i] = b1 * m[i] + (1 - b1) * g
                    v[i] = b2 * v[i] + (1 - b2) * g * g
                update = m[i] / (np.sqrt(v[i]) + np.float32(eps)) + np.float32(wd) * \
                    p.detach().numpy().reshape(-1)
                p -= torch.from_numpy((np.float32(lr) * update).reshape(p.shape))
        if tie is None and MARGINS and min(MARGINS) < 1e-6:
            tie = step + 1
        MARGINS.clear()
    return losses, tie


def zero_one_reference(model, world, mbs, gas, zo):
    """0/1 Adam (zoadam.py) over `world` ranks, each with its own copy of
    the parameters (they differ between syncs); as reference()."""
    models = [copy.deepcopy(model) for _ in range(world)]
    params = [list(mm.parameters()) for mm in models]
    shapes = [p.shape for p in params[0]]
    sizes = [p.numel() for p in params[0]]
    m = [[np.zeros(k, np.float32) for k in sizes] for _ in range(world)]
    v = [np.zeros(k, np.float32) for k in sizes]
    acc = [[np.zeros(k, np.float32) for k in sizes] for _ in range(world)]
    unit = world * (world * 8 // math.gcd(world, 8))
    padded = [(k + unit - 1) // unit * unit for k in sizes]
    errors = {}

    def err(key, i):
        if (key, i) not in errors:
            errors[(key, i)] = ([np.zeros(padded[i], np.float32) for _ in range(world)],
                                [np.zeros(padded[i] // world, np.float32) for _ in range(world)])
        return errors[(key, i)]

    def allreduce(key, i, values):
        bufs = [np.concatenate([x, np.zeros(padded[i] - x.size, np.float32)]) for x in values]
        we, se = err(key, i)
        return compressed_allreduce(bufs, we, se)[:sizes[i]]

    b1, b2 = PARAMS["betas"]
    eps, wd, lr = np.float32(PARAMS["eps"]), np.float32(PARAMS["weight_decay"]), PARAMS["lr"]
    var_interval, var_counter, local_interval, local_counter, lrs, frozen = 1, 0, 1, 0, 0.0, False
    losses, micro, n, tie = [], 0, len(data["labels"]), None
    for s in range(1, STEPS + 1):
        grads, total = local_gradients(models, mbs, gas, micro)
        micro += gas
        losses.append(total / world)
        if s == 1:
            kind = "init"
        elif not frozen:
            kind = "variance" if s % var_interval == 0 else "gradient"
            if kind == "variance":
                var_counter += 1
                if var_counter == zo["var_update_scaler"]:
                    var_counter, var_interval = 0, var_interval * 2
        else:
            lrs += lr
            kind = "sync" if s % local_interval == 0 else "local"
            local_counter += 1
            if local_counter == zo["local_step_scaler"]:
                local_counter = 0
                local_interval = min(zo["local_step_clipper"], 2 * local_interval)
        if s > 1 and s > zo["var_freeze_step"]:
            frozen = True
        grads = clipped(grads, averaged=kind in ("init", "variance"))
        if kind == "init":
            continue
        with torch.no_grad():
            for i in range(len(sizes)):
                denom = np.sqrt(v[i]) + eps
                if kind == "variance":
                    for r in range(world):
                        m[r][i] = b1 * m[r][i] + (1 - b1) * grads[r][i]
                    v[i] = b2 * v[i] + (1 - b2) * grads[0][i] * grads[0][i]
                    denom = np.sqrt(v[i]) + eps
                elif kind == "gradient":
                    if world > 1:
                        g1 = allreduce("grad", i, [grads[r][i] for r in range(world)])
                        for r in range(world):
                            m[r][i] = b1 * m[r][i] + (1 - b1) * g1
                else:
                    for r in range(world):
                        m[r][i] = b1 * m[r][i] + (1 - b1) * grads[r][i]
                steps = []
                for r in range(world):
                    p = params[r][i]
                    u = m[r][i] / denom + wd * p.detach().numpy().reshape(-1)
                    step = np.float32(lr) * u
                    p -= torch.from_numpy(step.reshape(shapes[i]))
                    steps.append(step)
                    if kind in ("local", "sync"):
                        acc[r][i] = acc[r][i] - step
                if kind == "sync":
                    scaled = [acc[r][i] * denom for r in range(world)]
                    avg = allreduce("acc", i, scaled) if world > 1 else scaled[0]
                    for r in range(world):
                        p = params[r][i]
                        back = p.detach().numpy().reshape(-1) - acc[r][i]
                        p.copy_(torch.from_numpy((back + avg / denom).reshape(shapes[i])))
                        m[r][i] = -avg / np.float32(lrs)
                        acc[r][i] = np.zeros(sizes[i], np.float32)
        if kind == "sync":
            lrs = 0.0
        if tie is None and MARGINS and min(MARGINS) < 1e-6:
            tie = s
        MARGINS.clear()
    return losses, tie


def lamb_reference(model, world, mbs, gas, freeze):
    """1-bit LAMB (lamb.py) over `world` ranks; as reference()."""
    params = list(model.parameters())
    sizes = [p.numel() for p in params]
    m = [np.zeros(k, np.float32) for k in sizes]
    v = [np.zeros(k, np.float32) for k in sizes]
    fresh = [np.zeros(k, np.float32) for k in sizes]
    coeff_freeze, last_factor, scaling = [0.0] * len(sizes), [1.0] * len(sizes), None
    unit = world * (world * 8 // math.gcd(world, 8))
    total = sum(sizes)
    padded = (total + unit - 1) // unit * unit
    we = [np.zeros(padded, np.float32) for _ in range(world)]
    se = [np.zeros(padded // world, np.float32) for _ in range(world)]
    b1, b2 = PARAMS["betas"]
    eps, wd, lr = PARAMS["eps"], PARAMS["weight_decay"], PARAMS["lr"]
    cb, fmax, fmin, thr = 0.9, 4.0, 0.5, 0.1
    losses, micro, tie = [], 0, None
    for s in range(1, STEPS + 1):
        grads, total_loss = local_gradients([model] * world, mbs, gas, micro)
        micro += gas
        losses.append(total_loss / world)
        compressed = s - 1 >= max(2, freeze)
        grads = clipped(grads, averaged=not compressed)
        if s == 1:
            continue
        with torch.no_grad():
            if not compressed:  # LAMB without bias correction
                for i, p in enumerate(params):
                    g = grads[0][i]
                    m[i] = b1 * m[i] + (1 - b1) * g
                    v[i] = b2 * v[i] + (1 - b2) * g * g
                    if s == freeze:
                        fresh[i] = v[i].copy()
                    pv = p.detach().numpy().reshape(-1)
                    u = m[i] / (np.sqrt(v[i]) + np.float32(eps)) + np.float32(wd) * pv
                    wn, un = float(np.linalg.norm(pv)), float(np.linalg.norm(u))
                    c = 1.0
                    if wn != 0 and un != 0:
                        c = min(max(wn / un, 0.01), 10.0)
                    if c != 1.0:
                        coeff_freeze[i] = cb * coeff_freeze[i] + (1 - cb) * c
                    p -= torch.from_numpy((np.float32(lr * c) * u).reshape(p.shape))
            else:
                last = [x.copy() for x in m]
                if scaling is None:
                    scales = [float(np.linalg.norm(x)) / math.sqrt(x.size) for x in m]
                    united = sum(scales) / len(scales)
                    scaling = [np.float32(united / x) for x in scales]
                flats = []
                for r in range(world):
                    parts = [(b1 * m[i] + (1 - b1) * grads[r][i]) * scaling[i]
                             for i in range(len(sizes))]
                    flats.append(np.concatenate(parts + [np.zeros(padded - total, np.float32)]))
                avg = compressed_allreduce(flats, we, se) if world > 1 else flats[0]
                offset = 0
                for i, p in enumerate(params):
                    m[i] = avg[offset:offset + sizes[i]] / scaling[i]
                    offset += sizes[i]
                    rebuilt = (m[i] - last[i] * b1) / (1 - b1)
                    fresh[i] = b2 * fresh[i] + (1 - b2) * rebuilt * rebuilt
                    denom = np.sqrt(v[i]) + np.float32(eps)
                    prelim = m[i] / denom
                    pv = p.detach().numpy().reshape(-1)
                    update = prelim + np.float32(wd) * pv
                    factor = float((denom / (np.sqrt(fresh[i]) + np.float32(eps))).max())
                    ratio = min(1.0, float(np.linalg.norm(prelim)) / float(np.linalg.norm(update)))
                    factor = factor * ratio + (1.0 - ratio)
                    factor = max(min(factor, fmax), fmin)
                    factor = max(min(factor, last_factor[i] * (1 + thr)), last_factor[i] * (1 - thr))
                    last_factor[i] = factor
                    p -= torch.from_numpy((np.float32(lr * coeff_freeze[i] * factor) * update)
                                          .reshape(p.shape))
        if tie is None and MARGINS and min(MARGINS) < 1e-6:
            tie = s
        MARGINS.clear()
    return losses, tie


def train_ds(world, mbs, gas, optimizer=None, name="onebit"):
    work = os.path.join(args.workdir, "%s_ranks%d" % (name, world))
    os.makedirs(work, exist_ok=True)
    cfg = {"train_micro_batch_size_per_gpu": mbs, "gradient_accumulation_steps": gas,
           "gradient_clipping": 1.0,
           "optimizer": optimizer or {"type": "OneBitAdam", "params": PARAMS},
           "steps_per_print": STEPS, "comms_logger": {"enabled": True}}
    json.dump(cfg, open(os.path.join(work, "c.json"), "w"))
    plan = os.path.join(work, "t.dsplan")
    report = run(["ds-opt", onnx_path, "--config", os.path.join(work, "c.json"), "--world-size",
                  str(world), "--loss", "softmax-cross-entropy", "--input-shape",
                  "x=%d,32" % mbs, "--report", "-o", plan])
    log = os.path.join(work, "train.jsonl")
    cmd = ["ds-run", plan, "--data", data_path, "--steps", str(STEPS), "--log", log]
    out = run(MPIRUN + ["-np", str(world)] + cmd if world > 1 else cmd)
    return [json.loads(l)["loss"] for l in open(log)], report, out


def compare_until_tie(name, world, got, reference_result):
    """The losses against the reference's up to its first near tie (the
    loss of step k reflects the updates before it: with a near tie in
    update k, losses 1..k are comparable), which must leave at least 4
    compressed updates checked."""
    want, tie = reference_result
    upto = tie or STEPS
    checked = upto - 1 - max(2, FREEZE)
    print("%s ranks %d: near tie in update %s; comparing %d steps (%d compressed updates)"
          % (name, world, tie, upto, checked))
    if checked < 4:
        sys.exit("only %d compressed updates before a near tie" % checked)
    compare("%s on %d rank%s" % (name, world, "s" if world > 1 else ""), got[:upto], want[:upto],
            tol=1e-5)


torch.manual_seed(0)
model = MLP()
onnx_path = os.path.join(args.workdir, "mlp.onnx")
torch.onnx.export(copy.deepcopy(model), (torch.zeros(4, 32),), onnx_path, input_names=["x"],
                  output_names=["logits"], opset_version=17,
                  dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
for world, mbs, gas in ((1, 8, 2), (2, 4, 2), (4, 4, 1)):
    got, report, out = train_ds(world, mbs, gas)
    compare_until_tie("1-bit Adam", world, got, reference(copy.deepcopy(model), world, mbs, gas))
    if world == 1:
        continue
    # Traffic: the report's per-program volume, the logger's measurement.
    volume = dict(re.findall(r"^\s*(optimizer_step\S*: \S+)\s+([0-9.]+ \S+)", report, re.M))
    print("ranks %d: report: %s" % (world, volume))
    if "optimizer_step_compressed: compressed_all_reduce" not in volume:
        sys.exit("the report lacks the compressed all-reduce:\n" + report)
    if "compressed_allreduce" not in out:
        sys.exit("the comms logger did not log the compressed all-reduce:\n" + out)
    print(out[out.index("Comm. Op"):])

# 0/1 Adam with short intervals, so that 20 steps see every kind of step:
# variance steps at intervals 1, 2, 4, 8 with 1-bit gradient steps between,
# frozen after step 12, then synced local steps at intervals 1, 2, 4.
ZO = {"var_freeze_step": 12, "var_update_scaler": 2, "local_step_scaler": 2,
      "local_step_clipper": 4}
zo_params = {k: v for k, v in PARAMS.items() if k != "freeze_step"}
zo_params.update(ZO)
for world, mbs, gas in ((1, 8, 2), (2, 4, 2), (4, 4, 1)):
    got, report, out = train_ds(world, mbs, gas, {"type": "ZeroOneAdam", "params": zo_params},
                                "zero_one")
    want, tie = zero_one_reference(copy.deepcopy(model), world, mbs, gas, ZO)
    upto = tie or STEPS
    print("0/1 Adam ranks %d: near tie in update %s; comparing %d steps" % (world, tie, upto))
    if upto < 10:
        sys.exit("a near tie before the 1-bit gradient steps were checked (update %d)" % upto)
    compare("0/1 Adam on %d rank%s" % (world, "s" if world > 1 else ""), got[:upto], want[:upto],
            tol=1e-5)
    if world > 1 and "optimizer_step_sync: compressed_all_reduce" not in report:
        sys.exit("the report lacks 0/1 Adam's synced all-reduce:\n" + report)

# 1-bit LAMB: warm-up to step 5, then 14 compressed updates.
lamb_params = dict(PARAMS, lr=1e-2)
for world, mbs, gas in ((1, 8, 2), (2, 4, 2), (4, 4, 1)):
    got, report, out = train_ds(world, mbs, gas, {"type": "OneBitLamb", "params": lamb_params},
                                "onebit_lamb")
    PARAMS_SAVED, PARAMS = PARAMS, lamb_params
    want = lamb_reference(copy.deepcopy(model), world, mbs, gas, FREEZE)
    PARAMS = PARAMS_SAVED
    compare_until_tie("1-bit LAMB", world, got, want)
    if world > 1 and "optimizer_step_lamb_compressed: compressed_all_reduce" not in report:
        sys.exit("the report lacks 1-bit LAMB's all-reduce:\n" + report)
