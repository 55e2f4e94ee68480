# The narrow types end to end: float8 (e4m3fn, e5m2, e8m0) and 4-bit
# integers through Cast, QuantizeLinear and DequantizeLinear, as newer
# exporters write them. The model is built with Debian's onnx 1.12, which
# has no names for these types (data types are plain ints in the proto):
# an int4 weight packed two per byte in raw_data (odd count, so a padding
# nibble), a uint4 weight packed in int32_data, a float8 weight as bit
# patterns in int32_data, an int4 graph input and int4/float8 outputs.
# Expected values come from the formats' definitions, enumerated here
# (every code's value, nearest with ties to the even code), not from ds's
# arithmetic. Then ds-run's .npy conventions: int4 as int8 values or
# uint8 bit patterns in, int8 values out; float8 as uint8 bits; a value
# outside int4 is an error naming the input.
# REQUIRES: compiler
# RUN: %python %s --workdir %t
import os
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import onnx
from e2e import parse_args, run
from onnx import TensorProto, helper

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
FLOAT8E4M3FN, FLOAT8E5M2, UINT4, INT4, FLOAT8E8M0 = 17, 19, 21, 22, 24


def f8_values(ebits, mbits, bias, fn):
    """Value of every positive code of a float8 format (None: not finite)."""
    vals = []
    for code in range(128):
        e, m = code >> mbits, code & ((1 << mbits) - 1)
        if fn and code == 127:
            vals.append(None)  # e4m3fn's NaN
        elif not fn and e == (1 << ebits) - 1:
            vals.append(None)  # e5m2's infinities and NaNs
        elif e == 0:
            vals.append(m * 2.0 ** (1 - bias - mbits))
        else:
            vals.append((1 + m / 2.0 ** mbits) * 2.0 ** (e - bias))
    return vals


E4M3 = f8_values(4, 3, 7, True)
E5M2 = f8_values(5, 2, 15, False)


def to_f8(x, vals, saturate, inf_code):
    """Nearest code, ties to the even code; past the largest finite value
    (as if the exponent went on: the next code, one ulp up) the largest
    when saturating, else infinity (inf_code) or NaN (0x7F)."""
    finite = [(v, c) for c, v in enumerate(vals) if v is not None]
    (vprev, _), (vmax, cmax) = finite[-2], finite[-1]
    mid = vmax + (vmax - vprev) / 2
    overflow_code = 0x7F if inf_code is None else inf_code
    out = []
    for v in np.asarray(x, np.float64):
        sign = 0x80 if np.signbit(v) else 0
        a = abs(v)
        if np.isnan(v):
            out.append(0x7F if inf_code is None else 0x7E)
        elif np.isinf(a) or a > mid or (a == mid and (cmax + 1) % 2 == 0):
            out.append(sign | (cmax if saturate else overflow_code))
        else:
            out.append(sign | min(finite, key=lambda vc: (abs(vc[0] - a), vc[1] % 2))[1])
    return np.array(out, np.uint8)


# ---- the model ---------------------------------------------------------------
x = np.array([1.0, -1.0, 0.30, 447.0, 470.0, 1e6, 3.3e-3, -2.6, 0.75], np.float32)
w4_vals = np.array([-8, -1, 0, 3, 7])
# nibbles 8 F 0 3 7 (-8 -1 0 3 7) and one of padding
w4 = onnx.TensorProto(name="w4", data_type=INT4, dims=[5], raw_data=bytes([0xF8, 0x30, 0x07]))
u4 = onnx.TensorProto(name="u4", data_type=UINT4, dims=[3], int32_data=[0x2F, 0x09])  # 15 2 9
f8w = onnx.TensorProto(name="f8w", data_type=FLOAT8E4M3FN, dims=[4],
                       int32_data=[0x38, 0xB8, 0x7E, 0x01])  # 1 -1 448 2^-9
zp4 = onnx.TensorProto(name="zp4", data_type=INT4, dims=[], raw_data=bytes([0x01]))
s = helper.make_tensor("s", TensorProto.FLOAT, [], [0.5])
nodes = [
    helper.make_node("DequantizeLinear", ["w4", "s", "zp4"], ["dw"]),
    helper.make_node("DequantizeLinear", ["u4", "s"], ["du"]),
    helper.make_node("Cast", ["f8w"], ["df8"], to=TensorProto.FLOAT),
    helper.make_node("Cast", ["x"], ["y8"], to=FLOAT8E4M3FN, saturate=0),
    helper.make_node("Cast", ["x"], ["y52"], to=FLOAT8E5M2),
    helper.make_node("Cast", ["x"], ["e8"], to=FLOAT8E8M0, round_mode="nearest"),
    helper.make_node("QuantizeLinear", ["x", "s", "zp4"], ["qx"]),
    helper.make_node("DequantizeLinear", ["q", "s"], ["dq"]),
]
n = len(x)
graph = helper.make_graph(
    nodes, "narrow",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n]),
     helper.make_tensor_value_info("q", INT4, [4])],
    [helper.make_tensor_value_info("dw", TensorProto.FLOAT, [5]),
     helper.make_tensor_value_info("du", TensorProto.FLOAT, [3]),
     helper.make_tensor_value_info("df8", TensorProto.FLOAT, [4]),
     helper.make_tensor_value_info("y8", FLOAT8E4M3FN, [n]),
     helper.make_tensor_value_info("y52", FLOAT8E5M2, [n]),
     helper.make_tensor_value_info("e8", FLOAT8E8M0, [n]),
     helper.make_tensor_value_info("qx", INT4, [n]),
     helper.make_tensor_value_info("dq", TensorProto.FLOAT, [4])],
    [w4, u4, f8w, zp4, s])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
model.ir_version = 10
path = os.path.join(args.workdir, "narrow.onnx")
with open(path, "wb") as f:
    f.write(model.SerializeToString())

# ---- what the formats' definitions say ---------------------------------------
want = {
    "dw": ((w4_vals - 1) * 0.5).astype(np.float32),
    "du": (np.array([15, 2, 9]) * 0.5).astype(np.float32),
    "df8": np.array([1, -1, 448, 2.0 ** -9], np.float32),
    "y8": to_f8(x, E4M3, saturate=False, inf_code=None),
    "y52": to_f8(x, E5M2, saturate=True, inf_code=0x7C),
    "qx": np.clip(np.rint(x / 0.5) + 1, -8, 7).astype(np.int8),
}
# e8m0, nearest: the power of two the float32's exponent field gives,
# plus one when the mantissa is at least a half (ties up when the
# exponent field is nonzero, as ONNX's reference rounds).
bits = x.view(np.uint32)
expo = (bits >> 23) & 0xFF
g, r, st = (bits >> 22) & 1, (bits >> 21) & 1, (bits & 0x1FFFFF) != 0
want["e8"] = (expo + (g & (r | st | (expo > 0)))).astype(np.uint8)
print("expected float8 e4m3fn codes:", [hex(c) for c in want["y8"]])
# The model's own checks of the reference: 470 is past e4m3fn's 448 + 16
# (NaN without saturation), 447 rounds to 448, 1e6 is e5m2's largest.
assert want["y8"][3] == 0x7E and want["y8"][4] == 0x7F and want["y52"][5] == 0x7B

# ---- compile and run ------------------------------------------------------------
mlir = run(["ds-opt", path, "--emit=mlir"])
# The constant weights fold at import: their unpacked values minus the
# zero point show the nibble order and the padding dropped.
for t in ["tensor<4xi4>", "tensor<9xi4>", "tensor<4xf8E4M3FN>", "tensor<9xf8E5M2>",
          "tensor<9xf8E8M0FNU>", "saturate = false", 'round_mode = "nearest"',
          "dense<[-9.000000e+00, -2.000000e+00, -1.000000e+00, 2.000000e+00, 6.000000e+00]>",
          "dense<[1.500000e+01, 2.000000e+00, 9.000000e+00]>"]:
    assert t in mlir, "the IR lacks %s" % t
plan = os.path.join(args.workdir, "narrow.dsplan")
run(["ds-opt", path, "-o", plan])


def ds_run(q, name):
    inp = os.path.join(args.workdir, name + ".npz")
    out = os.path.join(args.workdir, name + "-out.npz")
    np.savez(inp, x=x, q=q)
    r = subprocess.run(["ds-run", plan, "--inputs", inp, "--outputs", out],
                       capture_output=True, text=True)
    return r, (dict(np.load(out)) if r.returncode == 0 else None)


q_vals = np.array([-8, -1, 0, 7], np.int8)
for form, q in [("int8 values", q_vals), ("uint8 bit patterns", (q_vals & 0xF).astype(np.uint8))]:
    r, got = ds_run(q, "run-" + form.split()[0])
    assert r.returncode == 0, r.stderr
    want["dq"] = (q_vals * 0.5).astype(np.float32)
    for k, v in want.items():
        g = got[k]
        assert g.dtype == v.dtype, "%s: %s is %s, expected %s" % (form, k, g.dtype, v.dtype)
        if v.dtype == np.float32:
            np.testing.assert_array_equal(g, v, err_msg=k)
        else:
            assert np.array_equal(g, v), "%s: %s is %s, expected %s" % (form, k, g.tolist(), v.tolist())
    print("%s: every output equals the formats' definitions" % form)

r, _ = ds_run(np.array([-8, 9, 0, 1], np.int8), "bad")
assert r.returncode != 0 and "input 'q'" in r.stderr and "element 1 is 9" in r.stderr, r.stderr
print("an int4 input of 9:", r.stderr.strip().splitlines()[-1])
# Packed tensors that do not hold what their shape needs are errors naming
# the tensor.
def refused(tensor, message):
    g = helper.make_graph([helper.make_node("DequantizeLinear", [tensor.name, "s"], ["y"])], "bad",
                          [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(tensor.dims))],
                          [tensor, s])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 25)])
    p = os.path.join(args.workdir, "bad.onnx")
    with open(p, "wb") as f:
        f.write(m.SerializeToString())
    r = subprocess.run(["ds-opt", p, "-o", os.path.join(args.workdir, "bad.dsplan")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and message in r.stderr, r.stderr
    print("refused:", r.stderr.strip().splitlines()[0])


refused(onnx.TensorProto(name="t", data_type=INT4, dims=[5], raw_data=bytes(2)),
        "tensor 't' has 2 bytes of raw_data but its shape and type need 3")
refused(onnx.TensorProto(name="t", data_type=UINT4, dims=[3], int32_data=[1, 2, 3]),
        "tensor 't' holds 3 packed bytes in int32_data but its shape and type need 2")
refused(onnx.TensorProto(name="t", data_type=UINT4, dims=[3], int32_data=[1, 256]),
        "tensor 't' holds 256, outside its UINT4 (packed bytes) range [0, 255]")
refused(onnx.TensorProto(name="t", data_type=FLOAT8E4M3FN, dims=[2], int32_data=[1]),
        "tensor 't' holds 1 values but its shape needs 2")
print("narrow types: OK")
