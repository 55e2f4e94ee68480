# DFT and STFT at the sizes audio models use. A speech front end's STFT
# (n_fft 400, hop 160, Hann window, one-sided) against PyTorch's
# torch.stft; DFT models written with onnx's
# helpers (forward along an inner axis of a complex input with dft_length
# padding, the inverse, and numpy's irfft from a one-sided spectrum)
# against numpy's FFT in float64. ds imports each as one product with a
# constant matrix of cosines and sines, so the tolerance is f32 GEMM
# rounding relative to the spectrum's size. Then the errors: a transform
# along the real/imaginary dimension, frames longer than the signal.
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
from onnx import TensorProto, helper, numpy_helper

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
rng = np.random.default_rng(3)


def ds_outputs(path, inputs, name):
    plan = os.path.join(args.workdir, name + ".dsplan")
    run(["ds-opt", path, "-o", plan])
    inp, out = os.path.join(args.workdir, name + "-in.npz"), os.path.join(args.workdir, name + "-out.npz")
    np.savez(inp, **inputs)
    run(["ds-run", plan, "--inputs", inp, "--outputs", out])
    return dict(np.load(out))


def check(name, got, want):
    scale = np.abs(want).max()
    err = np.abs(got.astype(np.float64) - want).max() / scale
    print("%s: %s, max error / max |value| = %.2e" % (name, got.shape, err))
    assert got.shape == want.shape, (got.shape, want.shape)
    assert err < 2e-6, "%s differs: %.3g" % (name, err)


# ---- a speech front end's STFT against torch.stft ------------------------------
# (PyTorch 1.13 cannot export stft; this is the graph newer exporters write:
# a HannWindow node and STFT with the frame step and length as constants.)
audio = rng.standard_normal((2, 8000)).astype(np.float32)
frames = 1 + (8000 - 400) // 160
g = helper.make_graph(
    [helper.make_node("Unsqueeze", ["audio", "last"], ["signal"]),
     helper.make_node("HannWindow", ["size"], ["window"], periodic=1),
     helper.make_node("STFT", ["signal", "step", "window", "size"], ["spec"], onesided=1)],
    "stft", [helper.make_tensor_value_info("audio", TensorProto.FLOAT, [2, 8000])],
    [helper.make_tensor_value_info("spec", TensorProto.FLOAT, [2, frames, 201, 2])],
    [numpy_helper.from_array(np.array([2], np.int64), "last"),
     numpy_helper.from_array(np.array(400, np.int64), "size"),
     numpy_helper.from_array(np.array(160, np.int64), "step")])
path = os.path.join(args.workdir, "stft.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
with torch.no_grad():
    want = torch.stft(torch.from_numpy(audio).double(), n_fft=400, hop_length=160,
                      window=torch.hann_window(400, dtype=torch.float64), center=False,
                      return_complex=False).numpy().transpose(0, 2, 1, 3)
got = ds_outputs(path, {"audio": audio}, "stft")["spec"]
check("STFT (n_fft 400, hop 160, Hann) vs torch.stft", got, want)


# ---- DFT models --------------------------------------------------------------
def dft_model(name, x_shape, y_shape, attrs, length=None, axis=None, opset=20):
    inits, ins = [], ["x", "", ""]
    if length is not None:
        inits.append(numpy_helper.from_array(np.array(length, np.int64), "len"))
        ins[1] = "len"
    if axis is not None:
        inits.append(numpy_helper.from_array(np.array(axis, np.int64), "axis"))
        ins[2] = "axis"
    while ins and ins[-1] == "":
        ins.pop()
    g = helper.make_graph([helper.make_node("DFT", ins, ["y"], **attrs)], name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)
    p = os.path.join(args.workdir, name + ".onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), p)
    return p


def as_pairs(z):
    return np.stack([z.real, z.imag], axis=-1)


# A complex [3, 50, 4] signal along axis 1, padded to 64 points.
z = rng.standard_normal((3, 50, 4)) + 1j * rng.standard_normal((3, 50, 4))
x = as_pairs(z).astype(np.float32)
p = dft_model("dft_axis1", [3, 50, 4, 2], [3, 64, 4, 2], {}, length=64, axis=1)
check("DFT along an inner axis, padded 50 -> 64", ds_outputs(p, {"x": x}, "dft1")["y"],
      as_pairs(np.fft.fft(z.astype(np.complex128), n=64, axis=1)))
p = dft_model("idft", [3, 50, 4, 2], [3, 50, 4, 2], {"inverse": 1}, axis=1)
check("inverse DFT", ds_outputs(p, {"x": x}, "idft")["y"], as_pairs(np.fft.ifft(z, axis=1)))
# irfft: a one-sided spectrum of 257 bins to 512 real points (the default
# length 2 * (257 - 1)), and to 511 (odd: no middle bin).
spec = rng.standard_normal((2, 257)) + 1j * rng.standard_normal((2, 257))
xs = as_pairs(spec).astype(np.float32)
p = dft_model("irfft", [2, 257, 2], [2, 512, 1], {"inverse": 1, "onesided": 1}, axis=1)
check("irfft 257 bins -> 512 points", ds_outputs(p, {"x": xs}, "irfft")["y"],
      np.fft.irfft(spec.astype(np.complex128), axis=1)[..., None])
p = dft_model("irfft_odd", [2, 257, 2], [2, 511, 1], {"inverse": 1, "onesided": 1}, length=511,
              axis=1)
check("irfft 257 bins -> 511 points", ds_outputs(p, {"x": xs}, "irfft_odd")["y"],
      np.fft.irfft(spec.astype(np.complex128), n=511, axis=1)[..., None])

# ---- errors ------------------------------------------------------------------
p = dft_model("bad_axis", [3, 50, 4, 2], [3, 50, 4, 2], {}, axis=-1)
r = subprocess.run(["ds-opt", p, "-o", os.path.join(args.workdir, "bad.dsplan")],
                   capture_output=True, text=True)
assert r.returncode != 0 and "is the real/imaginary dimension" in r.stderr, r.stderr
print("refused:", r.stderr.strip().splitlines()[0])
g = helper.make_graph([helper.make_node("STFT", ["s", "step", "", "len"], ["y"])], "bad_stft",
                      [helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 100, 1])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, 2])],
                      [numpy_helper.from_array(np.array(10, np.int64), "step"),
                       numpy_helper.from_array(np.array(400, np.int64), "len")])
p = os.path.join(args.workdir, "bad_stft.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
r = subprocess.run(["ds-opt", p, "-o", os.path.join(args.workdir, "bad.dsplan")],
                   capture_output=True, text=True)
assert r.returncode != 0 and "frames of 400 samples do not fit a signal of 100" in r.stderr, r.stderr
print("refused:", r.stderr.strip().splitlines()[0])
print("spectral: OK")
