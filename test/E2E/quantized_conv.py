# Quantized convolutions. QLinearConv models (written here with onnx's
# helpers) against ONNX's definition computed in numpy with exact integer
# sums: with a constant weight ds-raise-quantized-matmul makes each one a
# ds.quantized_conv (int8 dot products through oneDNN, the zero point
# taken out of the sums at the border), with the weight a graph input the
# f32 convolution of the dequantized values; both must give the
# definition's uint8 outputs. Geometries: stride, padding (where the input
# zero point must count as a real zero), dilation, groups and depthwise,
# 1x1, and a per-channel weight scale. Then ds.quantized_conv alone from
# IR with its weight an argument (the direct integer loops a run takes
# when the weight is not the plan's), channels-first and channels-last,
# with an addend and a clamp, against numpy.
# REQUIRES: compiler
# RUN: %python %s --workdir %t
import os
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import onnx
from e2e import parse_args, run
from onnx import TensorProto, helper, numpy_helper

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
rng = np.random.default_rng(7)


def conv_int(x, w, stride, pads, dil, group):
    """Exact int64 N-D (here 2-D) convolution of centered integers, zero padding."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]), np.int64)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    oh = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    y = np.zeros((n, m, oh, ow), np.int64)
    mg = m // group
    for o in range(m):
        g = o // mg
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg,
                           i * dil[0]:i * dil[0] + stride[0] * (oh - 1) + 1:stride[0],
                           j * dil[1]:j * dil[1] + stride[1] * (ow - 1) + 1:stride[1]]
                y[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, i, j].astype(np.int64))
    return y


def qlinearconv_model(path, x_shape, w, ws, y_shape, attrs, xs, xz, ys, yz, bias, weight_input):
    inits = [numpy_helper.from_array(np.array(xs, np.float32), "xs"),
             numpy_helper.from_array(np.array(xz, np.uint8), "xz"),
             numpy_helper.from_array(ws.astype(np.float32), "ws"),
             numpy_helper.from_array(np.zeros(ws.shape, np.int8), "wz"),
             numpy_helper.from_array(np.array(ys, np.float32), "ys"),
             numpy_helper.from_array(np.array(yz, np.uint8), "yz"),
             numpy_helper.from_array(bias, "b")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.UINT8, x_shape)]
    if weight_input:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.INT8, list(w.shape)))
    else:
        inits.append(numpy_helper.from_array(w, "w"))
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                            ["y"], **attrs)
    g = helper.make_graph([node], "g", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, y_shape)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


cases = [
    # name, x shape, M, kernel, group, strides, pads, dilations, per-channel scale,
    # input zero point (0: oneDNN writes the f32 result itself)
    ("stride_pad", (2, 5, 9, 9), 8, (3, 3), 1, (2, 2), (1, 1, 1, 1), (1, 1), True, 119),
    ("stride_pad_zero", (2, 5, 9, 9), 8, (3, 3), 1, (2, 2), (1, 1, 1, 1), (1, 1), True, 0),
    ("depthwise_dilated", (1, 6, 8, 7), 6, (3, 3), 6, (1, 1), (2, 2, 2, 2), (2, 2), True, 119),
    ("depthwise_zero", (1, 6, 8, 7), 6, (3, 3), 6, (1, 1), (1, 1, 1, 1), (1, 1), True, 0),
    ("grouped_1x1", (1, 8, 5, 5), 4, (1, 1), 2, (1, 1), (0, 0, 0, 0), (1, 1), False, 0),
    ("uneven_pads", (1, 3, 10, 12), 16, (7, 7), 1, (2, 2), (3, 2, 1, 3), (1, 1), True, 119),
]
for name, xshape, m, k, group, strides, pads, dil, per_channel, xz in cases:
    c = xshape[1]
    x = rng.integers(0, 256, xshape).astype(np.uint8)
    w = rng.integers(-127, 128, (m, c // group) + k).astype(np.int8)
    ws = rng.uniform(0.002, 0.01, m).astype(np.float32) if per_channel else \
        np.array(0.005, np.float32)
    xs, ys, yz = 0.02, 0.05, 100
    bias = rng.integers(-3000, 3000, m).astype(np.int32)
    acc = conv_int(x.astype(np.int64) - xz, w, strides, pads, dil, group) + bias[None, :, None, None]
    wsb = np.broadcast_to(ws, (m,)).astype(np.float64)
    want = np.clip(np.rint(acc * (xs * wsb[None, :, None, None]) / ys) + yz, 0, 255).astype(np.uint8)
    attrs = dict(kernel_shape=list(k), group=group, strides=list(strides), pads=list(pads),
                 dilations=list(dil))
    np.save(os.path.join(args.workdir, name + "_x.npy"), x)
    for weight_input in (False, True):
        tag = name + ("_winput" if weight_input else "")
        path = os.path.join(args.workdir, tag + ".onnx")
        qlinearconv_model(path, list(xshape), w, ws, list(want.shape), attrs, xs, xz, ys, yz, bias,
                          weight_input)
        plan = os.path.join(args.workdir, tag + ".dsplan")
        run(["ds-opt", path, "-o", plan])
        dump = run(["ds-run", plan, "--dump"])
        if ("quantized_conv(" in dump) == weight_input:
            sys.exit("%s: expected %s, plan:\n%s" % (
                tag, "an f32 conv" if weight_input else "a quantized_conv", dump))
        feeds = os.path.join(args.workdir, tag + ".npz")
        arrays = {"x": x}
        if weight_input:
            arrays["w"] = w
        np.savez(feeds, **arrays)
        out = os.path.join(args.workdir, tag + ".out.npz")
        run(["ds-run", plan, "--inputs", feeds, "--outputs", out])
        got = np.load(out)["y"]
        diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
        # Equal but where the requantization lands on a half (float order).
        if diff.max() > 1 or (diff > 0).mean() > 0.002:
            sys.exit("%s: %d of %d outputs differ from the definition (max %d)" % (
                tag, int((diff > 0).sum()), diff.size, diff.max()))
        print("%s: %s, %d of %d outputs equal to the definition" % (
            tag, "f32 convolution" if weight_input else "quantized_conv", int((diff == 0).sum()),
            diff.size))

# Two QLinearConvs back to back: the first hands the second its uint8
# output as it is (ds-keep-activations-quantized), stored by oneDNN
# (channels-last) or rounded from the f32 result after the int32 path
# (channels-first, --disable-fusion=channels-last).
x = rng.integers(0, 256, (1, 4, 10, 10)).astype(np.uint8)
w1 = rng.integers(-127, 128, (8, 4, 3, 3)).astype(np.int8)
w2 = rng.integers(-127, 128, (6, 8, 3, 3)).astype(np.int8)
ws1, ws2 = rng.uniform(0.002, 0.01, 8).astype(np.float32), rng.uniform(0.002, 0.01, 6).astype(np.float32)
b1, b2 = rng.integers(-3000, 3000, 8).astype(np.int32), rng.integers(-3000, 3000, 6).astype(np.int32)
(xs, xz), (ms, mz), (ys, yz) = (0.02, 119), (0.08, 7), (0.05, 100)
mid = np.clip(np.rint((conv_int(x.astype(np.int64) - xz, w1, (1, 1), (1, 1, 1, 1), (1, 1), 1)
                       + b1[None, :, None, None]) * (xs * ws1.astype(np.float64))[None, :, None, None]
                      / ms) + mz, 0, 255)
want = np.clip(np.rint((conv_int(mid.astype(np.int64) - mz, w2, (2, 2), (1, 1, 1, 1), (1, 1), 1)
                        + b2[None, :, None, None]) * (ms * ws2.astype(np.float64))[None, :, None, None]
                       / ys) + yz, 0, 255).astype(np.uint8)
consts = [numpy_helper.from_array(np.array(v, t), name) for v, t, name in (
    (xs, np.float32, "xs"), (xz, np.uint8, "xz"), (ms, np.float32, "ms"), (mz, np.uint8, "mz"),
    (ys, np.float32, "ys"), (yz, np.uint8, "yz"))] + [
    numpy_helper.from_array(v, name) for v, name in (
        (w1, "w1"), (w2, "w2"), (ws1, "ws1"), (ws2, "ws2"), (b1, "b1"), (b2, "b2"),
        (np.zeros(8, np.int8), "wz1"), (np.zeros(6, np.int8), "wz2"))]
nodes = [helper.make_node("QLinearConv", ["x", "xs", "xz", "w1", "ws1", "wz1", "ms", "mz", "b1"],
                          ["m"], pads=[1, 1, 1, 1]),
         helper.make_node("QLinearConv", ["m", "ms", "mz", "w2", "ws2", "wz2", "ys", "yz", "b2"],
                          ["y"], pads=[1, 1, 1, 1], strides=[2, 2])]
g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.UINT8, list(x.shape))],
                      [helper.make_tensor_value_info("y", TensorProto.UINT8, list(want.shape))], consts)
chain = os.path.join(args.workdir, "chain.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), chain)
np.save(os.path.join(args.workdir, "chain_x.npy"), x)
for flags in ([], ["--disable-fusion=channels-last"]):
    plan = os.path.join(args.workdir, "chain.dsplan")
    run(["ds-opt", chain, "-o", plan] + flags)
    dump = run(["ds-run", plan, "--dump"])
    if dump.count("quantized_conv(") != 2 or "output_zero_point=7" not in dump:
        sys.exit("the QLinearConv chain did not keep its activations in uint8:\n" + dump)
    out = os.path.join(args.workdir, "chain_out.npy")
    run(["ds-run", plan, "--inputs", os.path.join(args.workdir, "chain_x.npy"), "--outputs", out])
    diff = np.abs(np.load(out).astype(np.int32) - want.astype(np.int32))
    if diff.max() > 1 or (diff > 0).mean() > 0.01:
        sys.exit("QLinearConv chain %s: %d of %d outputs differ from the definition (max %d)" % (
            flags, int((diff > 0).sum()), diff.size, diff.max()))
    print("QLinearConv chain%s: uint8 between the layers, %d of %d outputs equal to the definition"
          % (" (channels-first)" if flags else "", int((diff == 0).sum()), diff.size))

# ds.quantized_conv alone, its weight an argument: the direct loops.
x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
scale = rng.uniform(0.001, 0.003, 4).astype(np.float32)  # |y| about 1: few clamped
bias = rng.standard_normal(4).astype(np.float32)
s_in, z_in = 0.03, 77
q = np.clip(np.rint(x / np.float32(s_in)) + z_in, 0, 255).astype(np.int64)
acc = conv_int(q - z_in, w, (1, 2), (1, 0, 1, 1), (1, 1), 1)
addend = rng.standard_normal(acc.shape).astype(np.float32)
want = np.clip(np.float32(s_in) * scale[None, :, None, None] * acc + bias[None, :, None, None]
               + addend, -0.5, 1.5).astype(np.float32)
for layout in ("first", "last"):
    last = layout == "last"
    xs, ys = (list(x.transpose(0, 2, 3, 1).shape), list(want.transpose(0, 2, 3, 1).shape)) if last \
        else (list(x.shape), list(want.shape))
    t = lambda s, e="f32": "tensor<%s%s>" % ("".join("%dx" % d for d in s), e)
    mlir = """func.func @main(%x: {X} {{ds.name = "x"}}, %w: {W} {{ds.name = "w"}}, %s: {S} {{ds.name = "s"}},
                 %b: {S} {{ds.name = "b"}}, %a: {Y} {{ds.name = "a"}}) -> ({Y} {{ds.name = "y"}}) {{
  %y = ds.quantized_conv %x, %w, %s bias %b addend %a {{strides = array<i64: 1, 2>,
      dilations = array<i64: 1, 1>, pads = array<i64: 1, 0, 1, 1>, group = 1 : i64,
      input_scale = {SI} : f64, input_zero_point = {ZI} : i64, clip_min = -0.5 : f64,
      clip_max = 1.5 : f64{CL}}} : ({X}, {W}, {S}, {S}, {Y}) -> {Y}
  return %y : {Y}
}}
""".format(X=t(xs), W=t(w.shape, "i8"), S=t([4]), Y=t(ys), SI=repr(s_in), ZI=z_in,
           CL=", channels_last" if last else "")
    src = os.path.join(args.workdir, "qconv_%s.mlir" % layout)
    open(src, "w").write(mlir)
    plan = os.path.join(args.workdir, "qconv_%s.dsplan" % layout)
    run(["ds-opt", src, "-o", plan])
    perm = (0, 2, 3, 1)
    feeds = os.path.join(args.workdir, "qconv_%s.npz" % layout)
    np.savez(feeds, x=x.transpose(perm) if last else x, w=w, s=scale, b=bias,
             a=addend.transpose(perm) if last else addend)
    out = os.path.join(args.workdir, "qconv_%s.out.npz" % layout)
    run(["ds-run", plan, "--inputs", feeds, "--outputs", out])
    got = np.load(out)["y"]
    if last:
        got = got.transpose(0, 3, 1, 2)
    err = np.abs(got - want).max()
    if err > 1e-5:
        sys.exit("quantized_conv (%s, direct loops): max error %.2e" % (layout, err))
    print("quantized_conv channels-%s, weight an argument: max error %.1e" % (layout, err))
