"""Trains a PyTorch model the way a DeepSpeed engine configured by a
ds_config.json would (AdamW/Adam/SGD, DeepSpeed's LR schedules, loss scaled
by 1/gradient_accumulation_steps, global-norm clipping), and trains the
same exported model with ds-opt/ds-run; returns both loss trajectories."""
import json
import math
import os
import sys

import numpy as np
import torch

from e2e import run


def deepspeed_lr(cfg, step, base=None):
    """The rate of the optimizer step after `step` applied steps, as
    DeepSpeed 0.19's engine runs lr_schedules.py: the constructor sets the
    rate at last_batch_iteration -1, and each applied step advances it, so
    step k (from 1) runs at i = k - 2. Checked against DeepSpeed 0.19.8's
    WarmupLR, WarmupDecayLR and WarmupCosineLR."""
    if base is None:
        base = cfg.get("optimizer", {}).get("params", {}).get("lr", 1e-3)
    sched = cfg.get("scheduler")
    if not sched:
        return base
    i = step - 1
    p = sched.get("params", {})
    warm = max(2, p.get("warmup_num_steps", 1000))
    linear = p.get("warmup_type", "log") == "linear"
    gamma_w = i / warm if linear else (math.log(i + 1) / math.log(warm) if i >= 0 else 0.0)
    if sched["type"] == "WarmupLR":
        lo, hi = p.get("warmup_min_lr", 0.0), p.get("warmup_max_lr", 0.001)
        if i < 0:
            return lo
        return lo + (hi - lo) * (gamma_w if i < warm else 1.0)
    if sched["type"] == "WarmupDecayLR":
        lo, hi, total = p.get("warmup_min_lr", 0.0), p.get("warmup_max_lr", 0.001), p["total_num_steps"]
        if i < 0:
            return lo
        g = gamma_w if i < warm else max(0.0, (total - i) / max(1.0, total - warm))
        return lo + (hi - lo) * g
    if sched["type"] == "WarmupCosineLR":
        total = p["total_num_steps"]
        wmin, cmin = p.get("warmup_min_ratio", 0.0), p.get("cos_min_ratio", 0.0001)
        if i < 0:
            return 0.0
        if i < warm:
            ratio = wmin + gamma_w * (1 - wmin)
        else:
            progress = min(1.0, (i - warm + 1) / max(1, total - warm))
            ratio = (1 + math.cos(math.pi * progress)) / 2
            ratio = max(0.0, cmin + (1 - cmin) * ratio)
        return base * ratio
    raise ValueError(sched["type"])


class DeepSpeedLion(torch.optim.Optimizer):
    """DeepSpeed's Lion as its CPU kernel computes it (csrc/lion/cpu_lion_impl.cpp):
    c = b1 m + (1 - b1) g; p = p (1 - lr wd) - copysign(lr, c); m = b2 m + (1 - b2) g."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, (b1, b2), wd = group["lr"], group["betas"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                m = self.state[p].setdefault("exp_avg", torch.zeros_like(p))
                c = b1 * m + (1 - b1) * p.grad
                p.mul_(1 - lr * wd).sub_(torch.copysign(torch.full_like(c, lr), c))
                m.mul_(b2).add_(p.grad, alpha=1 - b2)


class DeepSpeedLamb(torch.optim.Optimizer):
    """DeepSpeed's FusedLamb (csrc/lamb/fused_lamb_cuda_kernel.cu), per tensor:
    m, v as Adam's; u = m / (sqrt(v) + eps) + wd p with the moments
    uncorrected; c = clamp(|p| / |u|, min_coeff, max_coeff) (1 if a norm is
    0); p -= lr sqrt(1 - b2^t) / (1 - b1^t) c u."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 max_coeff=10.0, min_coeff=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      max_coeff=max_coeff, min_coeff=min_coeff))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            (b1, b2), eps, wd = group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                st = self.state[p]
                if not st:
                    st["t"], st["m"], st["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                st["t"] += 1
                g = p.grad.double()
                st["m"].mul_(b1).add_(p.grad, alpha=1 - b1)
                st["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                u = st["m"].double() / (st["v"].double().sqrt() + eps) + wd * p.double()
                pn, un = float(p.double().norm()), float(u.norm())
                c = min(max(pn / un, group["min_coeff"]), group["max_coeff"]) if pn and un else 1.0
                step = group["lr"] * math.sqrt(1 - b2 ** st["t"]) / (1 - b1 ** st["t"])
                p.sub_((step * c * u).float())
                del g


def newton_schulz(g, steps=5):
    """DeepSpeed's zeropower_via_newtonschulz5 (quintic, on the wide
    orientation) in float64: DeepSpeed runs it in fp16 (Gram) or bf16, ds in
    f32; the iteration is the same (muon.py checks it against DeepSpeed's)."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.double()
    tall = x.shape[-2] > x.shape[-1]
    if tall:
        x = x.transpose(-1, -2)
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(steps):
        A = x @ x.transpose(-1, -2)
        x = a * x + (b * A + c * A @ A) @ x
    return x.transpose(-1, -2) if tall else x


def muon_direction(grad, buf, beta):
    """DeepSpeed's muon_update (Nesterov): the momentum buffer updated in
    place, and the scaled orthogonalized update."""
    buf.lerp_(grad, 1 - beta)
    u = grad.lerp(buf, beta)
    shaped = u.reshape(len(u), -1) if u.ndim == 4 else u
    o = newton_schulz(shaped).reshape(u.shape)
    rows, cols = grad.shape[-2], grad.shape[-1]
    return o * (math.sqrt(rows / cols) if rows > cols else 1.0)


class DeepSpeedMuon(torch.optim.Optimizer):
    """DeepSpeed 0.19's MuonWithAuxAdam as deepspeed.initialize sets it up:
    parameters of rank >= 2 whose name has neither "embed" nor "lm_head"
    (the `use_muon` flag, set by train_torch) take Muon's update
    p = p (1 - lr wd) - lr muon_update(g); the rest take AdamW (Adam with
    L2 decay when adam_w_mode is false). Each group keeps its own base rate
    (`base_lr`) for the schedules that scale it."""

    def __init__(self, params, muon_lr, adam_lr, momentum, betas, eps, weight_decay, adam_w_mode):
        params = list(params)
        groups = [dict(params=[p for p in params if p.use_muon], lr=muon_lr, base_lr=muon_lr,
                       use_muon=True),
                  dict(params=[p for p in params if not p.use_muon], lr=adam_lr, base_lr=adam_lr,
                       use_muon=False)]
        super().__init__([g for g in groups if g["params"]],
                         dict(momentum=momentum, betas=betas, eps=eps, weight_decay=weight_decay))
        self.adam_w_mode = adam_w_mode

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                st = self.state[p]
                if group["use_muon"]:
                    buf = st.setdefault("momentum_buffer", torch.zeros_like(p))
                    update = muon_direction(p.grad, buf, group["momentum"])
                    p.mul_(1 - lr * wd).sub_((lr * update).float())
                    continue
                (b1, b2), eps = group["betas"], group["eps"]
                g = p.grad if self.adam_w_mode else p.grad.add(p, alpha=wd)
                if not st:
                    st["t"], st["m"], st["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                st["t"] += 1
                st["m"].lerp_(g, 1 - b1)
                st["v"].mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (st["v"] / (1 - b2 ** st["t"])).sqrt() + eps
                if self.adam_w_mode:
                    p.mul_(1 - lr * wd)
                p.addcdiv_(st["m"] / (1 - b1 ** st["t"]), denom, value=-lr)


def torch_optimizer(cfg, params):
    o = cfg.get("optimizer", {"type": "AdamW"})
    p = o.get("params", {})
    kind = o["type"].lower()
    if kind == "muon":
        return DeepSpeedMuon(params, muon_lr=p.get("muon_lr", p.get("lr", 0.02)),
                             adam_lr=p.get("adam_lr", p.get("lr", 3e-4)),
                             momentum=p.get("momentum", 0.95),
                             betas=tuple(p.get("betas", (0.9, 0.95))), eps=p.get("eps", 1e-10),
                             weight_decay=p.get("weight_decay", 0.0),
                             adam_w_mode=p.get("adam_w_mode", True))
    if kind == "lamb":
        return DeepSpeedLamb(params, lr=p.get("lr", 1e-3), betas=tuple(p.get("betas", (0.9, 0.999))),
                             eps=p.get("eps", 1e-8), weight_decay=p.get("weight_decay", 0.0),
                             max_coeff=p.get("max_coeff", 10.0), min_coeff=p.get("min_coeff", 0.01))
    if kind == "lion":
        return DeepSpeedLion(params, lr=p.get("lr", 1e-3), betas=tuple(p.get("betas", (0.9, 0.999))),
                             weight_decay=p.get("weight_decay", 0.0))
    if kind == "adagrad":
        return torch.optim.Adagrad(params, lr=p.get("lr", 1e-2), eps=p.get("eps", 1e-10),
                                   weight_decay=p.get("weight_decay", 0.0))
    if kind in ("adam", "adamw"):
        betas = tuple(p.get("betas", (0.9, 0.999)))
        decoupled = kind == "adamw" or p.get("adam_w_mode", True)
        cls = torch.optim.AdamW if decoupled else torch.optim.Adam
        return cls(params, lr=p.get("lr", 1e-3), betas=betas, eps=p.get("eps", 1e-8),
                   weight_decay=p.get("weight_decay", 0.0))
    return torch.optim.SGD(params, lr=p["lr"], momentum=p.get("momentum", 0.0),
                           dampening=p.get("dampening", 0.0), weight_decay=p.get("weight_decay", 0.0),
                           nesterov=p.get("nesterov", False))


def batch_sizes(cfg, world=1):
    """DeepSpeed's batch arithmetic: (micro batch, accumulation steps)."""
    tbs = cfg.get("train_batch_size")
    mbs = cfg.get("train_micro_batch_size_per_gpu")
    gas = cfg.get("gradient_accumulation_steps")
    if mbs is None:
        gas = gas or 1
        mbs = tbs // (gas * world)
    elif gas is None:
        gas = tbs // (mbs * world) if tbs else 1
    return mbs, gas


def train_torch(model, cfg, data, steps, loss_fn, autocast=None, half_states=False,
                schedule=None):
    """data: dict of numpy arrays with a leading sample dim, in model input
    order then 'labels'. Micro-batches in order, wrapping around. autocast:
    a torch dtype to run the forward under torch.autocast("cpu") with fp32
    master weights (the loss is computed on fp32 logits). half_states (with
    autocast): DeepSpeed's mixed-precision model states as well: the model
    computes with its parameters rounded to that type, gradients are
    accumulated rounded to it, and the optimizer updates fp32 masters."""
    import contextlib
    mbs, gas = batch_sizes(cfg)
    clip = cfg.get("gradient_clipping", 1.0)
    named = list(model.named_parameters())
    params = [p for _, p in named]
    masters = [p.detach().clone().requires_grad_(True) for p in params] if half_states else params
    for (name, _), m in zip(named, masters):  # DeepSpeed's set_optimizer_flags, for Muon
        m.use_muon = m.ndim >= 2 and not any(k in name.lower() for k in ("embed", "lm_head"))
    opt = torch_optimizer(cfg, masters)
    n = len(data["labels"])
    cursor = 0
    losses = []
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = (deepspeed_lr(cfg, step, g.get("base_lr")) if schedule is None
                       else schedule["lr"][step])
            if schedule is not None and "betas" in g:  # DeepSpeed's own values, step by step
                g["betas"] = (schedule["beta1"][step], schedule["beta2"][step])
        total = 0.0
        if half_states:
            with torch.no_grad():
                for p, m in zip(params, masters):
                    p.copy_(m.to(autocast).float())
        for _ in range(gas):
            idx = [(cursor + i) % n for i in range(mbs)]
            cursor += mbs
            inputs = [torch.from_numpy(v[idx]) for k, v in data.items() if k != "labels"]
            labels = torch.from_numpy(data["labels"][idx])
            ctx = (torch.autocast("cpu", dtype=autocast) if autocast is not None
                   else contextlib.nullcontext())
            with ctx:
                out = model(*inputs)
            loss = loss_fn(out.float(), labels)
            (loss / gas).backward()
            if half_states:
                with torch.no_grad():
                    for p in params:
                        if p.grad is not None:
                            p.grad.copy_(p.grad.to(autocast).float())
            total += loss.item()
        if half_states:
            for p, m in zip(params, masters):
                m.grad = None if p.grad is None else p.grad.clone()
                p.grad = None
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(masters, clip)
        opt.step()
        opt.zero_grad()
        losses.append(total / gas)
    return losses


def train_ds(onnx_path, cfg, data, steps, workdir, loss="softmax-cross-entropy", extra=()):
    cfg_path = os.path.join(workdir, "ds_config.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    plan = os.path.join(workdir, "train.dsplan")
    run(["ds-opt", onnx_path, "--config", cfg_path, "--loss", loss, "-o", plan, *extra])
    data_path = os.path.join(workdir, "data.npz")
    np.savez(data_path, **data)
    log = os.path.join(workdir, "train.jsonl")
    run(["ds-run", plan, "--data", data_path, "--steps", str(steps), "--log", log])
    return [json.loads(l)["loss"] for l in open(log)]


def compare(name, ds_losses, torch_losses, tol=1e-4):
    worst = 0.0
    for i, (a, b) in enumerate(zip(ds_losses, torch_losses)):
        rel = abs(a - b) / max(abs(b), 1e-12)
        worst = max(worst, rel)
        print("%s step %2d  ds %.7f  torch %.7f  rel %.2e" % (name, i + 1, a, b, rel))
    if len(ds_losses) != len(torch_losses):
        sys.exit("%s: %d ds steps vs %d torch steps" % (name, len(ds_losses), len(torch_losses)))
    if worst > tol:
        sys.exit("%s: loss trajectories differ: worst relative error %.3g > %.1g" % (name, worst, tol))
    print("%s: %d steps agree, worst relative error %.2e" % (name, len(ds_losses), worst))


def gpt_training_setup(workdir, seed, samples=64, vocab=64, ctx=16, T=16):
    """Next-token data and a GPT-style decoder exported with a dynamic batch
    (fixed per run with --input-shape): what the multi-rank training tests
    share. Returns (data_path, onnx_path, model)."""
    import copy
    import torch
    from torch_models import GPT, randomize_layernorms
    os.makedirs(workdir, exist_ok=True)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, vocab, (samples, T + 1)).astype(np.int64)
    data_path = os.path.join(workdir, "data.npz")
    np.savez(data_path, idx=tokens[:, :-1].copy(), labels=tokens[:, 1:].copy())
    torch.manual_seed(seed)
    model = GPT(vocab=vocab, ctx=ctx, d=32, heads=4, layers=2, tied=True)
    randomize_layernorms(model, torch.Generator().manual_seed(seed))
    onnx_path = os.path.join(workdir, "gpt.onnx")
    torch.onnx.export(copy.deepcopy(model), (torch.zeros(2, T, dtype=torch.long),), onnx_path,
                      input_names=["idx"], output_names=["logits"], opset_version=17,
                      dynamic_axes={"idx": {0: "batch"}, "logits": {0: "batch"}})
    return data_path, onnx_path, model
