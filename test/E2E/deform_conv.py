# DeformConv (ONNX opset 19, torchvision's deform_conv2d as an ONNX op) at
# a detection head's size: groups, offset groups, strides, dilations,
# padding, offsets that move taps outside the image, and a modulation mask
# (DCNv2), against torchvision.ops.deform_conv2d. ds imports it as bilinear
# gathers (positions computed from the offsets in the graph) and one
# batched product with the weight. Then a bad offset shape is refused,
# naming the node.
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
from torchvision.ops import deform_conv2d

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
rng = np.random.default_rng(5)

N, C, H, W, OC, KH, KW = 2, 8, 11, 13, 6, 3, 3
group, offset_group, stride, dilation, pad = 2, 2, (2, 1), (1, 2), (1, 2)
OH = (H + 2 * pad[0] - dilation[0] * (KH - 1) - 1) // stride[0] + 1
OW = (W + 2 * pad[1] - dilation[1] * (KW - 1) - 1) // stride[1] + 1
x = rng.standard_normal((N, C, H, W)).astype(np.float32)
w = (rng.standard_normal((OC, C // group, KH, KW)) * 0.3).astype(np.float32)
b = rng.standard_normal(OC).astype(np.float32)
offset = (rng.standard_normal((N, offset_group * KH * KW * 2, OH, OW)) * 2.5).astype(np.float32)
mask = rng.uniform(0, 1, (N, offset_group * KH * KW, OH, OW)).astype(np.float32)

want = deform_conv2d(torch.from_numpy(x), torch.from_numpy(offset), torch.from_numpy(w),
                     torch.from_numpy(b), stride=stride, padding=pad, dilation=dilation,
                     mask=torch.from_numpy(mask)).numpy()


def model(with_mask, offset_channels):
    inputs = ["x", "w", "offset", "b"] + (["mask"] if with_mask else [])
    node = helper.make_node("DeformConv", inputs, ["y"], name="dcn", group=group,
                            offset_group=offset_group, strides=list(stride),
                            dilations=list(dilation), pads=[pad[0], pad[1], pad[0], pad[1]],
                            kernel_shape=[KH, KW])
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, C, H, W]),
           helper.make_tensor_value_info("offset", TensorProto.FLOAT, [N, offset_channels, OH, OW])]
    if with_mask:
        ins.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT,
                                                 [N, offset_group * KH * KW, OH, OW]))
    g = helper.make_graph([node], "dcn", ins,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, OC, OH, OW])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


path = os.path.join(args.workdir, "dcn.onnx")
onnx.save(model(True, offset_group * KH * KW * 2), path)
plan = os.path.join(args.workdir, "dcn.dsplan")
run(["ds-opt", path, "-o", plan])
inp, out = os.path.join(args.workdir, "in.npz"), os.path.join(args.workdir, "out.npz")
np.savez(inp, x=x, offset=offset, mask=mask)
run(["ds-run", plan, "--inputs", inp, "--outputs", out])
got = np.load(out)["y"]
err = float(np.abs(got - want).max() / np.abs(want).max())
outside = float(np.mean(np.abs(offset) > 2.5))
print("deform conv %s (group %d, offset_group %d, %.0f%% offsets over 2.5 px): max error / "
      "max |y| = %.2e against torchvision" % (got.shape, group, offset_group, 100 * outside, err))
assert got.shape == want.shape and err < 1e-5, err

bad = os.path.join(args.workdir, "bad.onnx")
onnx.save(model(True, offset_group * KH * KW), bad)
r = subprocess.run(["ds-opt", bad, "-o", os.path.join(args.workdir, "bad.dsplan")],
                   capture_output=True, text=True)
print("refused:", r.stderr.splitlines()[0] if r.stderr else "")
assert r.returncode != 0 and "node 'dcn' (DeformConv" in r.stderr and \
    "offset must be [N, offset_group * kH * kW * 2, oH, oW]" in r.stderr, r.stderr
print("deform conv: OK")
