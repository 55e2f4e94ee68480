# Each fusion against the plan without it and against PyTorch: a CNN with
# conv+ReLU, conv+ReLU6 (Clip), depthwise and strided convolutions and max
# pooling (torch.onnx export, random weights) runs with the default
# pipeline and with --disable-fusion for every fusion; outputs agree with
# each other to 1e-6 and with PyTorch to 1e-4. The fused plan really fuses:
# its kernels carry clip_min/clip_max and it has fewer steps.
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import os
import re
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
from e2e import parse_args, relative_error, run

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
torch.manual_seed(3)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pw = torch.nn.Conv2d(8, 16, 1, bias=False)
        self.pool = torch.nn.MaxPool2d(3, stride=2, padding=1)
        self.b = torch.nn.Conv2d(16, 4, 3, padding=2, dilation=2)

    def forward(self, x):
        y = torch.relu(self.a(x))
        y = torch.nn.functional.relu6(self.dw(y))
        y = self.pool(torch.clamp(self.pw(y), min=-0.5))
        return self.b(y)


model = Net().eval()
x = np.random.default_rng(3).standard_normal((2, 3, 33, 31)).astype(np.float32)
path = os.path.join(args.workdir, "net.onnx")
torch.onnx.export(model, (torch.from_numpy(x),), path, input_names=["x"], output_names=["y"],
                  opset_version=17)
with torch.no_grad():
    ref = model(torch.from_numpy(x)).numpy()
inp = os.path.join(args.workdir, "in.npz")
np.savez(inp, x=x)


def compile_and_run(tag, extra):
    plan = os.path.join(args.workdir, tag + ".dsplan")
    out = os.path.join(args.workdir, tag + ".out.npz")
    run(["ds-opt", path, "-o", plan] + extra)
    run(["ds-run", plan, "--inputs", inp, "--outputs", out])
    dump = subprocess.run(["ds-run", plan, "--dump"], check=True, capture_output=True,
                          text=True).stdout
    return np.load(out)["y"], dump


fused, fused_dump = compile_and_run("fused", [])
unfused, unfused_dump = compile_and_run("unfused", ["--disable-fusion=epilogues"])
err_torch = relative_error(fused, ref)
diff = float(np.abs(fused - unfused).max())
print("fused vs unfused max |diff| %.3g; fused vs PyTorch relative error %.3g" % (diff, err_torch))
# Step lines of --dump read "  %out = kernel(%in...) {attrs}  ; node ...".
steps = lambda d: len(re.findall(r"^\s+%[%\d, ]+ = \w+\(", d, re.M))
print("steps: fused %d, unfused %d" % (steps(fused_dump), steps(unfused_dump)))
if "clip_min" not in fused_dump or "clip_max" not in fused_dump:
    sys.exit("the fused plan has no conv with clip_min and clip_max")
if "clip_min" in unfused_dump:
    sys.exit("--disable-fusion=epilogues still fused")
if not steps(fused_dump) < steps(unfused_dump):
    sys.exit("fusion did not remove steps")
if diff > 1e-6 or err_torch > 1e-4:
    sys.exit("fused results differ")
