# RandomUniform, RandomNormal, their -Like forms and Bernoulli: what a model
# that samples (a VAE's reparameterisation, noise injection, stochastic
# depth) needs. No compiler can reproduce numpy's or torch's random stream,
# so what is checked is what the ONNX spec promises: the distribution (mean,
# variance, range, the fraction within one standard deviation, Bernoulli's
# per-row frequency against p), independence between two nodes, a seeded
# node drawing the same values on every run and an unseeded one following
# ds-run's --seed. Models come from PyTorch's exporter (torch.rand,
# torch.randn_like, torch.bernoulli) and from onnx's helpers (Bernoulli, the
# attributes the exporter does not write). Then the errors.
# REQUIRES: compiler
# RUN: %python %s --workdir %t
import os
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import onnx
import torch
from e2e import parse_args, run
from onnx import TensorProto, helper

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)


def ds_outputs(path, inputs, name, seed=None):
    plan = os.path.join(args.workdir, name + ".dsplan")
    if not os.path.exists(plan):
        run(["ds-opt", path, "-o", plan])
    out = os.path.join(args.workdir, name + "-out.npz")
    cmd = ["ds-run", plan, "--outputs", out]
    if inputs:
        inp = os.path.join(args.workdir, name + "-in.npz")
        np.savez(inp, **inputs)
        cmd += ["--inputs", inp]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    run(cmd)
    return dict(np.load(out))


def near(name, got, want, tol):
    print("%s: %.5f (expected %.5f +- %.5f)" % (name, got, want, tol))
    assert abs(got - want) <= tol, "%s is %g, expected %g +- %g" % (name, got, want, tol)


# ---- 1. PyTorch's exporter: rand, randn_like, bernoulli ------------------------
class Sampler(torch.nn.Module):
    def forward(self, mean, logvar, p):
        z = mean + torch.exp(0.5 * logvar) * torch.randn_like(mean)  # a VAE's sample
        return z, torch.rand(500, 400) * 4.0 - 1.0, torch.bernoulli(p)


mean = np.full((1000, 500), 1.5, np.float32)
logvar = np.full((1000, 500), np.log(4.0), np.float32)  # scale 2
p = np.repeat(np.linspace(0, 1, 11, dtype=np.float32)[:, None], 20000, axis=1)
path = os.path.join(args.workdir, "sampler.onnx")
torch.onnx.export(Sampler(), (torch.from_numpy(mean), torch.from_numpy(logvar), torch.from_numpy(p)),
                  path, input_names=["mean", "logvar", "p"], output_names=["z", "u", "b"],
                  opset_version=15)
ops = {n.op_type for n in onnx.load(path).graph.node}
print("exported ops:", sorted(ops))
# (PyTorch 1.13 writes bernoulli as RandomUniformLike < p.)
assert {"RandomNormalLike", "RandomUniform", "RandomUniformLike"} <= ops, ops
feed = {"mean": mean, "logvar": logvar, "p": p}
o1 = ds_outputs(path, feed, "sampler", seed=1)
z, u, b = o1["z"], o1["u"], o1["b"]
n = z.size
near("z mean", float(z.mean()), 1.5, 6 * 2 / np.sqrt(n))
near("z std", float(z.std()), 2.0, 6 * 2 / np.sqrt(2 * n))
near("z within one std", float((np.abs(z - 1.5) < 2).mean()), 0.682689, 6 * 0.466 / np.sqrt(n))
assert np.isfinite(z).all()
assert u.shape == (500, 400) and u.min() >= -1.0 and u.max() < 3.0, (u.min(), u.max())
near("u mean", float(u.mean()), 1.0, 6 * 4 / np.sqrt(12 * u.size))
near("u variance", float(u.var()), 16 / 12, 6 * 16 / 12 * np.sqrt(0.8 / u.size))
# Bernoulli: values 0/1 in p's type, the frequency of ones p per row.
assert b.dtype == np.float32 and set(np.unique(b)) <= {0.0, 1.0}
for row, pr in enumerate(np.linspace(0, 1, 11)):
    f = float(b[row].mean())
    assert abs(f - pr) <= 6 * np.sqrt(pr * (1 - pr) / 20000) + 1e-12, (row, pr, f)
print("bernoulli row frequencies:", np.round(b.mean(axis=1), 3).tolist())
# Another --seed draws other values; the same --seed the same ones.
o2 = ds_outputs(path, feed, "sampler", seed=2)
o1b = ds_outputs(path, feed, "sampler", seed=1)
for k in ("z", "u", "b"):
    assert np.array_equal(o1[k], o1b[k]), k
    assert not np.array_equal(o1[k], o2[k]), k
# Two nodes' streams are independent.
corr = np.corrcoef((z.ravel()[:200000] - 1.5), (o1["u"].ravel()[:200000] - 1.0))[0, 1]
near("correlation of two nodes' draws", float(corr), 0.0, 6 / np.sqrt(200000))

# ---- 2. onnx's helpers: dtype, seed, the -Like form's type ----------------------
g = helper.make_graph(
    [helper.make_node("RandomNormal", [], ["n64"], shape=[400000], mean=-3.0, scale=0.5,
                      dtype=TensorProto.DOUBLE, seed=7.0),
     helper.make_node("RandomUniformLike", ["x"], ["u16"], low=2.0, high=2.5),
     helper.make_node("RandomUniform", [], ["bf"], shape=[300, 300], dtype=TensorProto.BFLOAT16,
                      low=-1.0, high=1.0, seed=3.0),
     helper.make_node("Bernoulli", ["q"], ["bi"], dtype=TensorProto.INT32, seed=11.0)],
    "rand", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [256, 1024]),
             helper.make_tensor_value_info("q", TensorProto.DOUBLE, [4, 50000])],
    [helper.make_tensor_value_info("n64", TensorProto.DOUBLE, [400000]),
     helper.make_tensor_value_info("u16", TensorProto.FLOAT16, [256, 1024]),
     helper.make_tensor_value_info("bf", TensorProto.BFLOAT16, [300, 300]),
     helper.make_tensor_value_info("bi", TensorProto.INT32, [4, 50000])])
path = os.path.join(args.workdir, "rand.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)]), path)
q = np.repeat(np.array([[0.0], [0.1], [0.75], [1.0]]), 50000, axis=1)
feed = {"x": np.zeros((256, 1024), np.float16), "q": q}
r1 = ds_outputs(path, feed, "rand", seed=5)
r2 = ds_outputs(path, feed, "rand", seed=6)
n64 = r1["n64"]
assert n64.dtype == np.float64
near("n64 mean", float(n64.mean()), -3.0, 6 * 0.5 / np.sqrt(n64.size))
near("n64 std", float(n64.std()), 0.5, 6 * 0.5 / np.sqrt(2 * n64.size))
u16 = r1["u16"]
assert u16.dtype == np.float16 and u16.min() >= 2.0 and u16.max() < 2.5, (u16.min(), u16.max())
near("u16 mean", float(u16.astype(np.float64).mean()), 2.25, 0.002)
bf = r1["bf"].astype(np.uint32) << 16
bf = bf.view(np.float32)
assert bf.min() >= -1.0 and bf.max() < 1.0, (bf.min(), bf.max())
near("bf16 mean", float(bf.mean()), 0.0, 6 / np.sqrt(3 * bf.size))
bi = r1["bi"]
assert bi.dtype == np.int32 and bi[0].max() == 0 and bi[3].min() == 1
near("bernoulli p=0.1", float(bi[1].mean()), 0.1, 6 * np.sqrt(0.09 / 50000))
near("bernoulli p=0.75", float(bi[2].mean()), 0.75, 6 * np.sqrt(0.1875 / 50000))
# Seeded nodes ignore --seed; the unseeded one follows it.
for k in ("n64", "bf", "bi"):
    assert np.array_equal(r1[k], r2[k]), k
assert not np.array_equal(r1["u16"], r2["u16"])
print("seeded nodes repeat across --seed; the unseeded one does not")

# ---- 3. errors: named node, attribute, type ----------------------------------------
def refused(node, inputs, want):
    g = helper.make_graph([node], "bad", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    p = os.path.join(args.workdir, "bad.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    r = subprocess.run(["ds-opt", p, "-o", os.path.join(args.workdir, "bad.dsplan")],
                       capture_output=True, text=True)
    print("refused:", r.stderr.strip().splitlines()[0] if r.stderr.strip() else "")
    assert r.returncode != 0 and want in r.stderr, r.stderr


refused(helper.make_node("RandomUniform", [], ["y"], shape=[3], low=2.0, high=1.0, name="u"), [],
        "needs finite low <= high, got 2 and 1")
refused(helper.make_node("RandomNormal", [], ["y"], shape=[3], dtype=TensorProto.INT32, name="n"),
        [], "draws float16, bfloat16, float or double values")
refused(helper.make_node("RandomNormal", [], ["y"], name="n"), [], "needs the attribute 'shape'")
refused(helper.make_node("Bernoulli", ["x"], ["y"], name="b"),
        [helper.make_tensor_value_info("x", TensorProto.INT64, [3])], "needs float probabilities")
print("random ops: OK")
