# Each fusion against the plan without it and against PyTorch: a CNN with
# conv+ReLU, conv+ReLU6 (Clip), depthwise and strided convolutions and max
# pooling (torch.onnx export, random weights) runs with the default
# pipeline and with --disable-fusion for every fusion; outputs agree with
# each other to 1e-6 and with PyTorch to 1e-4. The fused plan really fuses:
# its kernels carry clip_min/clip_max, compute channels-last with two
# transposes in all, and it has fewer steps.
# Elementwise chains: a block with the tanh and erf GELU forms, SiLU and a
# masked softmax whose NaN rows become zeros gives the same outputs fused
# and with --disable-fusion=elementwise (and PyTorch's to 1e-4); a GPT
# trained 6 steps fused and unfused logs the same losses, as it does with
# and without the residual stream's gradient added by its layer norm
# gradients (--disable-fusion=epilogues).
# Matmul epilogues: a transformer MLP (bias, tanh GELU spelled out, residual),
# an erf-GELU projection, Llama's SiLU-gated MLP and a scaled product fold
# into ds.fused_matmul (every activation recognized), and give the outputs
# of the plan without ds-fuse-matmul-epilogues and ds-raise-activations
# (1e-5) and PyTorch's (1e-4); inference weights take oneDNN's packed path,
# a training plan the GEMM path (bias and residual adds, the GELU backward),
# with the losses of the unfused plan.
# Attention: a GPT (masked_fill causal mask, TorchScript export), grouped-
# query attention as Hugging Face's Llama writes it (repeat_kv by
# unsqueeze/expand/reshape, an additive mask) and a 600-token sequence
# (keys in two blocks of the online softmax) become ds.attention with no
# softmax or layout op left, and agree with --disable-fusion=attention
# (1e-5) and PyTorch (1e-4).
# Masked softmax: the same GPT trained 6 steps gets ds.masked_softmax and a
# masked softmax_grad (no where left), its cross-entropy loss computed by
# the loss's gradient, and the losses of --disable-fusion=softmax. By default both go into the attention products
# (fused_matmul's softmax and softmax_grad row epilogues), with the losses of
# --disable-fusion=product-softmax, bit for bit.
# Matmul layouts: the GPT trained with its attention products reading and
# writing through strided views (no transpose left) logs the losses of
# --disable-fusion=layouts; grouped-query attention unfused agrees too.
# RMSNorm as Hugging Face's Llama writes it (rsqrt of the mean square) and
# with a division becomes ds.rms_norm, agreeing with --disable-fusion=norms
# (1e-6) and PyTorch (1e-5).
# Conv+BatchNorm (exported with BatchNormalization kept): the normalization
# folds into the convolutions' weights and biases and the residual add
# into the second convolution, agreeing with --disable-fusion=batch-norm
# and PyTorch (1e-5).
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
from torch_models import GPT
from train_reference import train_ds

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


def compile_and_run(tag, extra, model=path, inputs=inp):
    """The model compiled with `extra` flags and run: (outputs by name, plan dump)."""
    plan = os.path.join(args.workdir, tag + ".dsplan")
    out = os.path.join(args.workdir, tag + ".out.npz")
    run(["ds-opt", model, "-o", plan] + extra)
    run(["ds-run", plan, "--inputs", inputs, "--outputs", out])
    dump = subprocess.run(["ds-run", plan, "--dump"], check=True, capture_output=True,
                          text=True).stdout
    return dict(np.load(out)), dump


fused, fused_dump = compile_and_run("fused", [])
unfused, unfused_dump = compile_and_run("unfused", ["--disable-fusion=epilogues",
                                                    "--disable-fusion=channels-last",
                                                    "--disable-fusion=elementwise"])
fused, unfused = fused["y"], unfused["y"]
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
# Channels-last: every convolution and the pooling in it, and only two
# transposes (into the first convolution, out of the last).
if fused_dump.count("channels_last=1") != 5 or fused_dump.count("= transpose(") != 2:
    sys.exit("expected 4 channels-last convolutions, a channels-last pooling and 2 transposes")
if "channels_last" in unfused_dump:
    sys.exit("--disable-fusion=channels-last still made convolutions channels-last")
if not steps(fused_dump) < steps(unfused_dump):
    sys.exit("fusion did not remove steps")
if diff > 1e-6 or err_torch > 1e-4:
    sys.exit("fused results differ")


# ---- elementwise chains --------------------------------------------------
class Chains(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(16, 48)
        self.down = torch.nn.Linear(48, 16)

    def forward(self, x, mask):
        h = self.up(x)
        # HF GPT-2's NewGELUActivation, and the exact (erf) form.
        g = 0.5 * h * (1.0 + torch.tanh(0.7978845608028654 * (h + 0.044715 * torch.pow(h, 3.0))))
        e = h * 0.5 * (1.0 + torch.erf(h / 1.4142135623730951))
        s = torch.nn.functional.silu(g - e)
        scores = torch.matmul(s, s.transpose(-1, -2)) * 0.125
        scores = scores.masked_fill(mask, float("-inf"))
        p = torch.softmax(scores, dim=-1)
        p = torch.where(torch.isnan(p), torch.zeros_like(p), p)
        return self.down(torch.matmul(p, s)), (g > 0.1) & ~(e < -0.05)


chains = Chains().eval()
xc = np.random.default_rng(4).standard_normal((2, 8, 16)).astype(np.float32)
maskc = np.triu(np.ones((8, 8), dtype=bool), 1)[None].repeat(2, 0)
maskc[1, 3, :] = True  # a fully masked row: softmax gives NaN, the where makes it 0
chain_path = os.path.join(args.workdir, "chains.onnx")
torch.onnx.export(chains, (torch.from_numpy(xc), torch.from_numpy(maskc)), chain_path,
                  input_names=["x", "mask"], output_names=["y", "m"], opset_version=17)
with torch.no_grad():
    ref_y, ref_m = [t.numpy() for t in chains(torch.from_numpy(xc), torch.from_numpy(maskc))]
chain_in = os.path.join(args.workdir, "chains_in.npz")
np.savez(chain_in, x=xc, mask=maskc)


def run_chains(tag, extra):
    o, dump = compile_and_run(tag, extra, chain_path, chain_in)
    return o["y"], o["m"], dump


fy, fm, fdump = run_chains("chains_fused", [])
uy, um, udump = run_chains("chains_unfused", ["--disable-fusion=elementwise"])
nfused = fdump.count("fused_elementwise(")
print("elementwise: %d fused ops; steps fused %d, unfused %d; fused vs unfused max |diff| %.3g; "
      "vs PyTorch %.3g" % (nfused, steps(fdump), steps(udump), float(np.abs(fy - uy).max()),
                           relative_error(fy, ref_y)))
if nfused < 3 or "fused_elementwise" in udump:
    sys.exit("expected >= 3 fused_elementwise steps fused and none unfused")
if not steps(fdump) < steps(udump):
    sys.exit("elementwise fusion did not remove steps")
if float(np.abs(fy - uy).max()) > 1e-6 or relative_error(fy, ref_y) > 1e-4:
    sys.exit("fused elementwise results differ")
if not (np.array_equal(fm, um) and np.array_equal(fm.astype(bool), ref_m)):
    sys.exit("fused boolean result differs")

# Training: forward and backward chains fuse where the backward does not
# need the intermediates; the losses are those of the unfused plan.
torch.manual_seed(5)
gpt = GPT(vocab=32, ctx=8, d=16, heads=2, layers=1, tied=True, gelu_approx="tanh")
gpt_path = os.path.join(args.workdir, "gpt.onnx")
torch.onnx.export(gpt, (torch.zeros(4, 8, dtype=torch.long),), gpt_path, input_names=["idx"],
                  output_names=["logits"], opset_version=14)
tok = np.random.default_rng(5).integers(0, 32, (16, 9)).astype(np.int64)
gdata = {"idx": tok[:, :-1].copy(), "labels": tok[:, 1:].copy()}
gcfg = {"train_batch_size": 4, "train_micro_batch_size_per_gpu": 4, "gradient_clipping": 1.0,
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}}}


def train_fused_and_unfused(tag, unfused_flags, is_fused, what, tolerance, both=(), model=None):
    """The GPT (or `model`) trained 6 steps with the default pipeline and
    with `unfused_flags` (`both` added to each): is_fused(plan dump) holds
    for the first plan only, and the losses agree within `tolerance`."""
    losses = []
    for fused, extra in ((True, list(both)), (False, list(both) + unfused_flags)):
        work = os.path.join(args.workdir, "%s_%s" % (tag, "fused" if fused else "unfused"))
        os.makedirs(work, exist_ok=True)
        losses.append(train_ds(model or gpt_path, gcfg, gdata, 6, work, extra=extra))
        dump = subprocess.run(["ds-run", os.path.join(work, "train.dsplan"), "--dump"],
                              check=True, capture_output=True, text=True).stdout
        if fused != is_fused(dump):
            sys.exit("%s: %s %s" % (tag, what, "missing" if fused else "present unfused"))
    worst = max(abs(a - b) / abs(b) for a, b in zip(*losses))
    print("training (%s): losses fused %s unfused %s; worst relative difference %.2e"
          % (what, losses[0], losses[1], worst))
    if worst > tolerance:
        sys.exit("%s: fused training differs from unfused" % tag)


train_fused_and_unfused("train", ["--disable-fusion=elementwise"],
                        lambda dump: "fused_elementwise(" in dump, "fused_elementwise steps", 1e-6)
# The residual stream's gradient added by the layer norm gradient's kernel
# (its fourth operand, the addend): the same sums, up to FMA rounding.
# Opset 17, where LayerNormalization is one op.
gpt17_path = os.path.join(args.workdir, "gpt17.onnx")
torch.onnx.export(gpt, (torch.zeros(4, 8, dtype=torch.long),), gpt17_path, input_names=["idx"],
                  output_names=["logits"], opset_version=17)
train_fused_and_unfused("train_norm_residual", ["--disable-fusion=epilogues"],
                        lambda dump: re.search(r"layer_norm_grad\(%\d+, %\d+, %\d+, %\d+\)", dump)
                        is not None, "layer norm gradients with an addend", 1e-6, model=gpt17_path)


# ---- matmul epilogues ----------------------------------------------------
class Epilogues(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 64)
        self.proj = torch.nn.Linear(64, 32)
        self.erf = torch.nn.Linear(32, 32)
        self.gate = torch.nn.Linear(32, 48, bias=False)
        self.up = torch.nn.Linear(32, 48, bias=False)
        self.down = torch.nn.Linear(48, 32, bias=False)
        self.w = torch.nn.Parameter(torch.randn(32, 16))

    def forward(self, x):
        h = self.fc(x)
        h = 0.5 * h * (1.0 + torch.tanh(0.7978845608028654 * (h + 0.044715 * torch.pow(h, 3.0))))
        x = x + self.proj(h)
        x = torch.nn.functional.gelu(self.erf(x))
        x = x + self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))
        return torch.matmul(x, self.w) * 0.25


epi = Epilogues().eval()
xe = np.random.default_rng(6).standard_normal((2, 12, 32)).astype(np.float32)
epi_path = os.path.join(args.workdir, "epilogues.onnx")
torch.onnx.export(epi, (torch.from_numpy(xe),), epi_path, input_names=["x"], output_names=["y"],
                  opset_version=17)
with torch.no_grad():
    ref_e = epi(torch.from_numpy(xe)).numpy()
epi_in = os.path.join(args.workdir, "epilogues_in.npz")
np.savez(epi_in, x=xe)
# (layouts too: a product read through a view is a fused_matmul as well)
no_epilogues = ["--disable-fusion=matmul-epilogues", "--disable-fusion=activations",
                "--disable-fusion=layouts"]
fe, fedump = compile_and_run("epi_fused", [], epi_path, epi_in)
ue, uedump = compile_and_run("epi_unfused", no_epilogues, epi_path, epi_in)
fe, ue = fe["y"], ue["y"]
print("matmul epilogues: %d fused products; steps fused %d, unfused %d; fused vs unfused %.3g, "
      "vs PyTorch %.3g" % (fedump.count("fused_matmul("), steps(fedump), steps(uedump),
                            relative_error(fe, ue), relative_error(fe, ref_e)))
for want in ('activation="gelu_tanh"', 'activation="gelu"', 'activation="silu"', "bias=1",
             'combine="add"', 'combine="mul"', "alpha=0.25"):
    if want not in fedump:
        sys.exit("the fused plan has no fused_matmul with " + want)
if "fused_matmul" in uedump or "gelu" in uedump:
    sys.exit("--disable-fusion=matmul-epilogues,activations still fused")
if relative_error(fe, ue) > 1e-5 or relative_error(fe, ref_e) > 1e-4:
    sys.exit("fused matmul epilogues differ")

train_fused_and_unfused("epi_train", no_epilogues, lambda dump: "fused_matmul(" in dump,
                        "fused_matmul steps", 1e-5)


# ---- attention -----------------------------------------------------------
class GQA(torch.nn.Module):
    def __init__(self, d=64, heads=8, kv_heads=2):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, d // heads
        self.q = torch.nn.Linear(d, d, bias=False)
        self.k = torch.nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v = torch.nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o = torch.nn.Linear(d, d, bias=False)

    @staticmethod
    def repeat_kv(x, n):
        b, kv, s, hd = x.shape
        return x[:, :, None, :, :].expand(b, kv, n, s, hd).reshape(b, kv * n, s, hd)

    def forward(self, x, mask):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.h, self.hd).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv, self.hd).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv, self.hd).transpose(1, 2)
        k, v = self.repeat_kv(k, self.h // self.kv), self.repeat_kv(v, self.h // self.kv)
        att = torch.softmax(q @ k.transpose(2, 3) / self.hd ** 0.5 + mask, dim=-1)
        return self.o((att @ v).transpose(1, 2).reshape(b, s, -1))


def attention_case(tag, model, inputs, names):
    path = os.path.join(args.workdir, tag + ".onnx")
    torch.onnx.export(model, tuple(torch.from_numpy(a) for a in inputs), path, input_names=names,
                      output_names=["y"], opset_version=17)
    with torch.no_grad():
        ref = model(*[torch.from_numpy(a) for a in inputs]).numpy()
    data = os.path.join(args.workdir, tag + "_in.npz")
    np.savez(data, **dict(zip(names, inputs)))
    f, fdump = compile_and_run(tag + "_fused", [], path, data)
    u, udump = compile_and_run(tag + "_unfused", ["--disable-fusion=attention"], path, data)
    f, u = f["y"], u["y"]
    print("attention %s: %d fused; steps fused %d, unfused %d; vs unfused %.3g, vs PyTorch %.3g"
          % (tag, fdump.count("attention("), steps(fdump), steps(udump), relative_error(f, u),
             relative_error(f, ref)))
    if fdump.count("attention(") == 0 or "softmax(" in fdump or "attention(" in udump:
        sys.exit(tag + ": expected ds.attention and no softmax fused, none unfused")
    if "expand(" in fdump or "= transpose(" in fdump:
        sys.exit(tag + ": layout ops left around the fused attention")
    if relative_error(f, u) > 1e-5 or relative_error(f, ref) > 1e-4:
        sys.exit(tag + ": fused attention differs")


torch.manual_seed(7)
gpt_att = GPT(vocab=64, ctx=32, d=32, heads=4, layers=2).eval()
attention_case("att_gpt", gpt_att, [np.random.default_rng(7).integers(0, 64, (2, 32)).astype(np.int64)],
               ["idx"])
causal_mask = np.triu(np.full((1, 1, 40, 40), -np.inf, np.float32), 1)
xg = np.random.default_rng(8).standard_normal((2, 40, 64)).astype(np.float32)
attention_case("att_gqa", GQA().eval(), [xg, causal_mask], ["x", "mask"])
long_mask = np.zeros((1, 1, 600, 600), np.float32)
long_mask[..., 550:] = -np.inf  # padding: the last 50 keys
xl = np.random.default_rng(9).standard_normal((1, 600, 64)).astype(np.float32)
attention_case("att_long", GQA(heads=4, kv_heads=4).eval(), [xl, long_mask], ["x", "mask"])


# ---- masked softmax (training) ----------------------------------------------
# The GPT's causal masked_fill stays a softmax in training (the backward reads
# the probabilities): ds-fuse-softmax makes the forward's where + softmax one
# masked_softmax and the backward's where the softmax_grad's mask, and the
# losses equal the unfused plan's.
# (Fused into the scores product by default: --disable-fusion=product-softmax
# keeps the masked_softmax step to look at.)
train_fused_and_unfused("sm_train", ["--disable-fusion=softmax"],
                        lambda dump: "masked_softmax(" in dump and not re.search(r"= where\(", dump)
                        and "softmax_cross_entropy(" not in dump,
                        "masked_softmax without a where", 1e-6, ["--disable-fusion=product-softmax"])

# ---- softmax in the product ------------------------------------------------
# The scores product normalizes its rows as it stores them (softmax with the
# causal mask), and the backward's product of dO and V applies the masked
# softmax gradient: no masked_softmax or softmax_grad step is left, and the
# losses are the very bits of --disable-fusion=product-softmax.
train_fused_and_unfused("product_softmax_train", ["--disable-fusion=product-softmax"],
                        lambda dump: "softmax=1" in dump and 'combine="softmax_grad"' in dump
                        and "masked_softmax(" not in dump and "softmax_grad(" not in dump,
                        "softmax and its gradient in the products", 0.0)


# ---- matmul layouts ----------------------------------------------------------
# Training's attention products read the split heads where they are and
# write the merged heads in place: ds-fold-matmul-layouts leaves no
# transpose in the GPT's plan, and the losses equal --disable-fusion=layouts'.
train_fused_and_unfused("layouts_train", ["--disable-fusion=layouts"],
                        lambda dump: "= transpose(" not in dump and "lhs_strides" in dump,
                        "strided product views and no transpose", 1e-6)
# Inference with ds-fuse-attention off (its products take the views):
# grouped-query heads (an expand read with stride 0), against the plan
# without views.
gqa_path = os.path.join(args.workdir, "att_gqa.onnx")
gqa_in = os.path.join(args.workdir, "att_gqa_in.npz")
lv, lvdump = compile_and_run("layouts_gqa", ["--disable-fusion=attention"], gqa_path, gqa_in)
nv, nvdump = compile_and_run("layouts_gqa_off", ["--disable-fusion=attention",
                                                 "--disable-fusion=layouts"], gqa_path, gqa_in)
lv, nv = lv["y"], nv["y"]
print("layouts: transposes with views %d, without %d; vs without %.3g"
      % (lvdump.count("= transpose("), nvdump.count("= transpose("), relative_error(lv, nv)))
if "lhs_strides" not in lvdump or lvdump.count("= transpose(") >= nvdump.count("= transpose("):
    sys.exit("layouts: expected products with views and fewer transposes")
if relative_error(lv, nv) > 1e-6:
    sys.exit("layouts: products through views differ")


# ---- RMSNorm ---------------------------------------------------------------
class RMSNorms(torch.nn.Module):
    def __init__(self, d=48):
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(d) + 0.5)

    def forward(self, x):
        a = self.w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
        return a / torch.sqrt((a * a).mean(-1, keepdim=True) + 1e-5)


rms = RMSNorms().eval()
xr = np.random.default_rng(10).standard_normal((2, 7, 48)).astype(np.float32) * 3
rms_path = os.path.join(args.workdir, "rms.onnx")
torch.onnx.export(rms, (torch.from_numpy(xr),), rms_path, input_names=["x"], output_names=["y"],
                  opset_version=17)
with torch.no_grad():
    ref_r = rms(torch.from_numpy(xr)).numpy()
rms_in = os.path.join(args.workdir, "rms_in.npz")
np.savez(rms_in, x=xr)
fr, frdump = compile_and_run("rms_fused", [], rms_path, rms_in)
ur, urdump = compile_and_run("rms_unfused", ["--disable-fusion=norms"], rms_path, rms_in)
fr, ur = fr["y"], ur["y"]
print("rms_norm: %d fused; steps fused %d, unfused %d; vs unfused %.3g, vs PyTorch %.3g"
      % (frdump.count("rms_norm("), steps(frdump), steps(urdump), relative_error(fr, ur),
         relative_error(fr, ref_r)))
if frdump.count("rms_norm(") != 2 or "rms_norm" in urdump:
    sys.exit("expected 2 rms_norm steps fused and none unfused")
if relative_error(fr, ur) > 1e-6 or relative_error(fr, ref_r) > 1e-5:
    sys.exit("fused RMSNorm differs")


# ---- Conv + BatchNorm ------------------------------------------------------
class ConvBN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
        self.c2, self.b2 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        return self.b2(self.c2(y)) + y


torch.manual_seed(11)
cbn = ConvBN()
for bn in (cbn.b1, cbn.b2):
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    bn.weight.data.uniform_(0.5, 1.5)
    bn.bias.data.uniform_(-1, 1)
cbn.eval()
xb = np.random.default_rng(11).standard_normal((2, 3, 16, 16)).astype(np.float32)
bn_path = os.path.join(args.workdir, "convbn.onnx")
torch.onnx.export(cbn, (torch.from_numpy(xb),), bn_path, input_names=["x"], output_names=["y"],
                  opset_version=17, do_constant_folding=False,
                  training=torch.onnx.TrainingMode.PRESERVE)
with torch.no_grad():
    ref_b = cbn(torch.from_numpy(xb)).numpy()
bn_in = os.path.join(args.workdir, "convbn_in.npz")
np.savez(bn_in, x=xb)
fb, fbdump = compile_and_run("bn_fused", [], bn_path, bn_in)
ub, ubdump = compile_and_run("bn_unfused", ["--disable-fusion=batch-norm"], bn_path, bn_in)
fb, ub = fb["y"], ub["y"]
print("batch-norm: steps fused %d, unfused %d; vs unfused %.3g, vs PyTorch %.3g"
      % (steps(fbdump), steps(ubdump), relative_error(fb, ub), relative_error(fb, ref_b)))
if "sub" in fbdump or "sqrt" in fbdump or "sqrt" not in ubdump:
    sys.exit("expected the normalization folded away (and kept with --disable-fusion=batch-norm)")
# The residual add after the second convolution is its epilogue.
if "addend=1" not in fbdump or " add(" in fbdump:
    sys.exit("expected the residual add folded into the convolution (ds.conv's addend)")
if relative_error(fb, ub) > 1e-5 or relative_error(fb, ref_b) > 1e-5:
    sys.exit("folded batch norm differs")


# ---- HardSwish epilogue and channel shuffle ---------------------------------
# MobileNetV3's HardSwish after a convolution becomes its `activation` (a
# oneDNN post-op); ShuffleNet's channel shuffle (split C into [2, C/2],
# swap, merge) between channels-last convolutions shuffles the
# channels-last tensor instead of converting it to channels-first and back,
# and the split and concatenation around it stay channels-last too.
class ShuffleSwish(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 1)
        self.c3 = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.c4 = torch.nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = torch.nn.functional.hardswish(self.c1(x))
        a, b = y.chunk(2, dim=1)
        y = torch.cat([a, torch.relu(self.c2(b))], dim=1)
        n, c, h, w = y.shape
        y = y.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        a, b = torch.nn.functional.hardswish(self.c3(y)).chunk(2, dim=1)
        return self.c4(b) + a[:, :4]


torch.manual_seed(5)
ss = ShuffleSwish().eval()
xs = np.random.default_rng(5).standard_normal((2, 3, 20, 18)).astype(np.float32) * 4
ss_path = os.path.join(args.workdir, "shuffle.onnx")
torch.onnx.export(ss, (torch.from_numpy(xs),), ss_path, input_names=["x"], output_names=["y"],
                  opset_version=17)
with torch.no_grad():
    ref_s = ss(torch.from_numpy(xs)).numpy()
ss_in = os.path.join(args.workdir, "shuffle_in.npz")
np.savez(ss_in, x=xs)
fs, fsdump = compile_and_run("shuffle_fused", [], ss_path, ss_in)
us, usdump = compile_and_run("shuffle_unfused", ["--disable-fusion=epilogues",
                                                 "--disable-fusion=channels-last"], ss_path, ss_in)
fs, us = fs["y"], us["y"]
print("hard-swish / shuffle: steps fused %d, unfused %d, transposes fused %d; vs unfused %.3g, "
      "vs PyTorch %.3g" % (steps(fsdump), steps(usdump), fsdump.count("= transpose("),
                           relative_error(fs, us), relative_error(fs, ref_s)))
if fsdump.count('activation="hard_swish"') != 2 or "hard_swish" in usdump:
    sys.exit("expected both HardSwishes in their convolutions (and none unfused)")
# Into the first convolution, the shuffle itself, and out of the last.
if fsdump.count("= transpose(") != 3:
    sys.exit("expected 3 transposes in the fused plan")
if relative_error(fs, us) > 1e-5 or relative_error(fs, ref_s) > 1e-4:
    sys.exit("hard-swish / shuffle results differ")
