# Quantization. ds-opt --quantize against references computed here in
# PyTorch: weight-only int8 and int4 (group-wise) are the model with each
# projection's weight rounded as ds rounds it (symmetric, per output
# channel or group), so ds's plan must give that model's logits to float
# rounding; int8-dynamic also rounds each product's input rows to int8.
# Then models quantized by onnxruntime's quantize_dynamic (committed with
# onnxruntime's outputs: CI has no onnxruntime): one product bit for bit,
# a BERT within the int8 noise onnxruntime shows between its own
# optimization levels; and a CNN quantize_static wrote in the QDQ format,
# on int8 kernels with onnxruntime's outputs. And the errors a user meets.
# REQUIRES: compiler, torch
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

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
torch.manual_seed(0)
model = GPT(vocab=128, ctx=32, d=64, heads=4, layers=2, tied=True).eval()
ids = torch.randint(0, 128, (2, 16))
onnx_path = os.path.join(args.workdir, "gpt.onnx")
torch.onnx.export(model, (ids,), onnx_path, input_names=["ids"], output_names=["logits"],
                  opset_version=17)
inp = os.path.join(args.workdir, "ids.npy")
np.save(inp, ids.numpy())


def ds_logits(name, *flags):
    plan = os.path.join(args.workdir, name + ".dsplan")
    report = run(["ds-opt", onnx_path, "-o", plan, "--report", *flags])
    out = os.path.join(args.workdir, name + ".out.npy")
    run(["ds-run", plan, "--inputs", inp, "--outputs", out])
    return np.load(out), report


def rounded(w, bits, group):
    """w [N, K] rounded as ds-quantize rounds it: symmetric, per row of N
    (or per `group` values of K), to int8 or int4."""
    n, k = w.shape
    g = group or k
    qmax, qmin = (127, -127) if bits == 8 else (7, -8)
    blocks = w.reshape(n, k // g, g)
    amax = blocks.abs().amax(dim=2, keepdim=True)
    scale = torch.where(amax > 0, amax / qmax, torch.ones_like(amax))
    q = torch.clamp(torch.round(blocks / scale), qmin, qmax)
    return (q * scale).reshape(n, k)


def quantized_reference(bits, group, dynamic):
    """The model with every projection (and the tied LM head, which reads
    the embedding transposed) rounded, its inputs too with `dynamic`."""
    ref = GPT(vocab=128, ctx=32, d=64, heads=4, layers=2, tied=True).eval()
    ref.load_state_dict(model.state_dict())
    # The LM head shares the embedding (tied): ds rounds the head's copy
    # only, the gather keeps the f32 rows.
    linears = [m for m in ref.modules()
               if isinstance(m, torch.nn.Linear) and m.weight is not ref.wte.weight]
    with torch.no_grad():
        head = rounded(ref.wte.weight.clone(), bits, group)
        for lin in linears:
            lin.weight.copy_(rounded(lin.weight, bits, group))

    def quant_rows(x):
        amax = x.abs().amax(dim=-1, keepdim=True)
        s = torch.where(amax > 0, amax / 127, torch.ones_like(amax))
        return torch.round(x * (1 / s)) * s

    if dynamic:
        for lin in linears:
            lin.register_forward_pre_hook(lambda mod, inputs: (quant_rows(inputs[0]),))
    with torch.no_grad():
        hidden = []
        h = ref.ln_f.register_forward_hook(lambda mod, i, o: hidden.append(o))
        ref(ids)
        h.remove()
        x = hidden[0]
        if dynamic:
            x = quant_rows(x)
        return (x @ head.t()).numpy()


f32, _ = ds_logits("f32")
for name, flags, bits, group, dynamic, tol in [
        ("int8-weight", ["--quantize", "int8-weight"], 8, 0, False, 1e-5),
        ("int4-weight", ["--quantize", "int4-weight", "--group-size", "16"], 4, 16, False, 1e-5),
        ("int8-dynamic", ["--quantize", "int8-dynamic"], 8, 0, True, 2e-4),
        ("int4-dynamic", ["--quantize", "int4-dynamic", "--group-size", "16"], 4, 16, True, 2e-4)]:
    got, report = ds_logits(name, *flags)
    want = quantized_reference(bits, group, dynamic)
    err = relative_error(got, want)
    if err > tol:
        sys.exit("%s: ds differs from the rounded model by %.2e (tolerance %.0e)" % (name, err, tol))
    drift = relative_error(got, f32)
    print("%s: the rounded model's logits (%.1e); %.1e from f32" % (name, err, drift))
    # The weights' bytes in the report: int8 a quarter of f32's, int4 an
    # eighth plus a scale per 16 values (the embedding stays f32 for the
    # gather).
    consts = int(re.search(r"constants\s+(\d+) B", report).group(1))
    print("  --report constants: %d B" % consts)
# The int4 plan's projections take an eighth of the f32 bytes plus scales.
proj = sum(m.weight.numel() for m in model.modules()
           if isinstance(m, torch.nn.Linear) and m.weight is not model.wte.weight)
head = model.wte.weight.numel()
_, r4 = ds_logits("int4-size", "--quantize", "int4-weight", "--group-size", "16")
c4 = int(re.search(r"constants\s+(\d+) B", r4).group(1))
want4 = (proj + head) // 2 + (proj + head) // 16 * 4
if not (want4 <= c4 <= want4 + 4 * 2048):
    sys.exit("int4 weights: %d B of constants, expected about %d" % (c4, want4))

# Keeping the LM head (the last product) in f32: then only the layers round.
kept, _ = ds_logits("keep", "--quantize", "int8-weight", "--quantize-keep-last")
if relative_error(kept, f32) >= relative_error(ds_logits("all", "--quantize", "int8-weight")[0], f32):
    sys.exit("--quantize-keep-last did not keep the head in f32")

# onnxruntime's quantize_dynamic models.
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quantized")
mm = np.load(os.path.join(here, "matmul.npz"))
plan = os.path.join(args.workdir, "mm.dsplan")
run(["ds-opt", os.path.join(here, "matmul_q8.onnx"), "-o", plan])
x_path = os.path.join(args.workdir, "mm_x.npy")
np.save(x_path, mm["x"])
out = os.path.join(args.workdir, "mm_out.npy")
run(["ds-run", plan, "--inputs", x_path, "--outputs", out])
if not np.array_equal(np.load(out), mm["ort"]):
    sys.exit("onnxruntime's int8 product: ds differs by %.2e" % relative_error(np.load(out), mm["ort"]))
dump = run(["ds-run", plan, "--dump"])
if "quantized_matmul" not in dump or " matmul(" in dump:
    sys.exit("onnxruntime's int8 product did not become a quantized_matmul:\n" + dump)
print("onnxruntime's int8 product: the same values, on ds.quantized_matmul")
bert = np.load(os.path.join(here, "bert.npz"))
plan = os.path.join(args.workdir, "bert.dsplan")
run(["ds-opt", os.path.join(here, "bert_q8.onnx"), "-o", plan])
ids_path = os.path.join(args.workdir, "bert_ids.npy")
np.save(ids_path, bert["ids"])
out = os.path.join(args.workdir, "bert_out.npy")
run(["ds-run", plan, "--inputs", ids_path, "--outputs", out])
got = np.load(out)
err, top1 = relative_error(got, bert["ort"]), float((got.argmax(-1) == bert["ort"].argmax(-1)).mean())
err32 = relative_error(got, bert["f32"])
ort32 = relative_error(bert["ort"], bert["f32"])
if err > 2e-2 or top1 < 0.95 or err32 > 2 * ort32:
    sys.exit("onnxruntime's int8 BERT: %.2e from onnxruntime, top-1 %.3f; %.2e from f32 (onnxruntime "
             "%.2e)" % (err, top1, err32, ort32))
print("onnxruntime's int8 BERT: %.1e from onnxruntime (top-1 %.3f), %.1e from f32 (onnxruntime %.1e)"
      % (err, top1, err32, ort32))

# onnxruntime's quantize_static CNN (QDQ): every convolution and the head
# on int8 kernels, reading the activations before their
# QuantizeLinear/DequantizeLinear; onnxruntime's outputs to a quantization
# step of the output (ds matches them exactly here; a requantization that
# lands on a half may round the other way).
cnn = np.load(os.path.join(here, "cnn_qdq.npz"))
plan = os.path.join(args.workdir, "cnn.dsplan")
run(["ds-opt", os.path.join(here, "cnn_qdq.onnx"), "-o", plan])
dump = run(["ds-run", plan, "--dump"])
if dump.count("quantized_conv(") != 3 or "static_per_tensor" not in dump or " conv(" in dump:
    sys.exit("the QDQ CNN's convolutions and head are not all int8:\n" + dump)
x_path = os.path.join(args.workdir, "cnn_x.npy")
np.save(x_path, cnn["x"])
out = os.path.join(args.workdir, "cnn_out.npy")
run(["ds-run", plan, "--inputs", x_path, "--outputs", out])
got = np.load(out)
step = float(np.min(np.diff(np.unique(cnn["ort"]))))  # the output's quantization step
diff = np.abs(got - cnn["ort"])
if diff.max() > step * 1.01 or (diff > 1e-6).mean() > 0.01:
    sys.exit("onnxruntime's QDQ CNN: %d of %d outputs differ (max %.2e, a step is %.2e)" % (
        int((diff > 1e-6).sum()), diff.size, diff.max(), step))
print("onnxruntime's QDQ CNN: %d of %d outputs equal to onnxruntime's; %.1e from f32 (onnxruntime "
      "%.1e)" % (int((diff <= 1e-6).sum()), diff.size, relative_error(got, cnn["f32"]),
                 relative_error(cnn["ort"], cnn["f32"])))


def fails(cmd, needle):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode == 0 or needle not in res.stderr:
        sys.exit("%s: expected an error with %r, got rc %d: %s" % (" ".join(cmd), needle,
                                                                  res.returncode, res.stderr))


x = os.path.join(args.workdir, "x.dsplan")
fails(["ds-opt", onnx_path, "--quantize", "int3", "-o", x], "expected int8-dynamic, int8-weight, int4-weight or int4-dynamic")
fails(["ds-opt", onnx_path, "--quantize", "int8-dynamic", "--group-size", "32", "-o", x],
      "--group-size applies to int8-weight and int4-weight")
fails(["ds-opt", onnx_path, "--group-size", "32", "-o", x], "apply to --quantize")
fails(["ds-opt", onnx_path, "--quantize", "int8-weight", "--loss", "softmax-cross-entropy", "-o", x],
      "--quantize compiles inference plans")
print("errors: an unknown scheme, a group size int8-dynamic does not take, flags without --quantize, training")
