# Convolutions and poolings at their edges, against PyTorch:
# - pooling with ceil_mode whose window overhangs the end, also one larger
#   than the whole input (avg_pool2d(x[2x2], 3, ceil_mode=True) is 1x1),
#   average and max, with and without count_include_pad, alone and after a
#   convolution (channels-last);
# - non-finite values: an inf input to a convolution ds runs with Winograd
#   (3x3, 16 -> 64 channels, 14x14), or an inf weight, gives PyTorch's
#   +-inf, not inf - inf = NaN; a NaN reaching a fused ReLU becomes 0 (as onnxruntime's fused
#   activations; docs/security.md) and a clamp from above alone is not
#   fused, so NaN stays NaN there.
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import os
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
import torch.nn.functional as F
from e2e import parse_args, run

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
torch.manual_seed(7)
failures = []


def ds_outputs(name, model, x, extra=()):
    path = os.path.join(args.workdir, name + ".onnx")
    torch.onnx.export(model, (torch.from_numpy(x),), path, input_names=["x"],
                      output_names=["y"], opset_version=17)
    plan, inp, out = (os.path.join(args.workdir, name + s) for s in (".dsplan", ".in.npz", ".out.npz"))
    run(["ds-opt", path, "-o", plan] + list(extra))
    np.savez(inp, x=x)
    run(["ds-run", plan, "--inputs", inp, "--outputs", out])
    dump = subprocess.run(["ds-run", plan, "--dump"], check=True, capture_output=True, text=True).stdout
    return np.load(out)["y"], dump


def same(name, got, ref, tol=1e-5):
    """NaN where PyTorch has NaN, the same infinities, finite values close."""
    ok = (got.shape == ref.shape and np.array_equal(np.isnan(got), np.isnan(ref)) and
          np.array_equal(np.isposinf(got), np.isposinf(ref)) and
          np.array_equal(np.isneginf(got), np.isneginf(ref)))
    fin = np.isfinite(ref)
    if ok and fin.any():
        err = np.abs(got[fin] - ref[fin]).max() / max(np.abs(ref[fin]).max(), 1e-30)
        ok = err <= tol
    print("%-28s %s (NaN %d/%d, inf %d/%d)" % (name, "ok" if ok else "DIFFERS",
          np.isnan(got).sum(), np.isnan(ref).sum(), np.isinf(got).sum(), np.isinf(ref).sum()))
    if not ok:
        failures.append(name)


class Pool(torch.nn.Module):
    def __init__(self, kind, k, s, p, include_pad, conv):
        super().__init__()
        self.kind, self.k, self.s, self.p, self.include_pad = kind, k, s, p, include_pad
        self.conv = torch.nn.Conv2d(3, 3, 1) if conv else None

    def forward(self, x):
        if self.conv is not None:
            x = self.conv(x)
        if self.kind == "max":
            y = F.max_pool2d(x, self.k, self.s, self.p, ceil_mode=True)
        else:
            y = F.avg_pool2d(x, self.k, self.s, self.p, ceil_mode=True,
                             count_include_pad=self.include_pad)
        return y if self.conv is None else self.conv(y)


rng = np.random.default_rng(7)
for hw, k, s, p in (((2, 2), 3, 3, 0), ((2, 3), 3, 2, 1), ((5, 4), 3, 2, 0), ((1, 1), 2, 2, 0)):
    x = rng.standard_normal((1, 3) + hw).astype(np.float32)
    for kind in ("avg", "max"):
        for include_pad in ((False, True) if kind == "avg" and p else (False,)):
            for conv in (False, True):
                m = Pool(kind, k, s, p, include_pad, conv).eval()
                with torch.no_grad():
                    ref = m(torch.from_numpy(x)).numpy()
                name = "pool_%s_%dx%d_k%d_s%d_p%d%s%s" % (kind, hw[0], hw[1], k, s, p,
                                                        "_pad" if include_pad else "",
                                                        "_conv" if conv else "")
                got, _ = ds_outputs(name, m, x)
                same(name, got, ref)

# Winograd with an inf input.
wconv = torch.nn.Conv2d(16, 64, 3, padding=1).eval()
x = rng.standard_normal((1, 16, 14, 14)).astype(np.float32)
x[0, 3, 5, 6] = np.inf
with torch.no_grad():
    ref = wconv(torch.from_numpy(x)).numpy()
got, _ = ds_outputs("winograd_inf", wconv, x)
same("winograd_inf", got, ref)
# An inf weight: the direct kernel too (checked once, at plan load).
x[0, 3, 5, 6] = 1.0
winf = torch.nn.Conv2d(16, 64, 3, padding=1).eval()
with torch.no_grad():
    winf.weight[5, 2, 1, 1] = float("inf")
    ref = winf(torch.from_numpy(x)).numpy()
got, _ = ds_outputs("winograd_inf_weight", winf, x)
same("winograd_inf_weight", got, ref)
with torch.no_grad():
    ref = wconv(torch.from_numpy(x)).numpy()
got, dump = ds_outputs("winograd_finite", wconv, x)
same("winograd_finite", got, ref)


# NaN through fused activations.
class Act(torch.nn.Module):
    def __init__(self, act):
        super().__init__()
        self.conv, self.act = torch.nn.Conv2d(2, 2, 1), act

    def forward(self, x):
        return self.act(self.conv(x))


x = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
x[0, 0, 0, 0] = np.nan
for name, act, fused in (("relu", torch.relu, True), ("clamp_max", lambda v: v.clamp(max=0.5), False)):
    m = Act(act).eval()
    with torch.no_grad():
        ref = m(torch.from_numpy(x)).numpy()
    got, dump = ds_outputs("nan_" + name, m, x)
    if fused:
        # The documented difference: the NaN pixel is 0 after a fused ReLU.
        if "clip_min=0" not in dump:
            failures.append("nan_relu: ReLU not fused")
        ref = np.where(np.isnan(ref), 0.0, ref).astype(np.float32)
    elif "clip_" in dump:
        failures.append("nan_%s: a clamp from above alone was fused" % name)
    same("nan_" + name, got, ref)

if failures:
    sys.exit("differ: %s" % ", ".join(failures))
