# Every gradient rule against central finite differences of ds's own
# forward: for each op, loss = sum(op(x, ...) * R) with a random weight R;
# ds-opt --grad-input returns d loss / d x, compared at sampled coordinates.
# REQUIRES: onnx, numpy, compiler
# RUN: %python %s --workdir %t
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ap = argparse.ArgumentParser()
ap.add_argument("--workdir", required=True)
ap.add_argument("--only", default="")
args = ap.parse_args()
os.makedirs(args.workdir, exist_ok=True)
rng = np.random.default_rng(0)
F = TensorProto.FLOAT


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


# name: (node builder(inputs -> nodes, output), input shapes, positive inputs?, extra initializers)
def unary(op, **attrs):
    return lambda: ([helper.make_node(op, ["x0"], ["y"], **attrs)], [])


def binary(op):
    return lambda: ([helper.make_node(op, ["x0", "x1"], ["y"])], [])


CASES = {
    "Add": (binary("Add"), [(3, 4), (4,)], False),
    "Sub": (binary("Sub"), [(3, 4), (3, 1)], False),
    "Mul": (binary("Mul"), [(2, 3, 4), (3, 4)], False),
    "Div": (binary("Div"), [(3, 4), (4,)], True),
    "Min": (binary("Min"), [(3, 4), (3, 4)], False),
    "Mod": (lambda: ([helper.make_node("Mod", ["x0", "x1"], ["y"], fmod=1)], []), [(3, 4), (4,)], True),
    "Max": (binary("Max"), [(3, 4), (4,)], False),
    "Pow": (lambda: ([helper.make_node("Pow", ["x0", "e"], ["y"])], [const("e", np.float32(3.0))]),
            [(3, 4)], True),
    "PowBoth": (binary("Pow"), [(3, 4), (4,)], True),
    "Neg": (unary("Neg"), [(3, 4)], False),
    "Abs": (unary("Abs"), [(3, 4)], True),
    "Relu": (unary("Relu"), [(3, 4)], False),
    "Sqrt": (unary("Sqrt"), [(3, 4)], True),
    "Exp": (unary("Exp"), [(3, 4)], False),
    "Log": (unary("Log"), [(3, 4)], True),
    "Reciprocal": (unary("Reciprocal"), [(3, 4)], True),
    "Tanh": (unary("Tanh"), [(3, 4)], False),
    "Sigmoid": (unary("Sigmoid"), [(3, 4)], False),
    "Erf": (unary("Erf"), [(3, 4)], False),
    "Sin": (unary("Sin"), [(3, 4)], False),
    "Cos": (unary("Cos"), [(3, 4)], False),
    "Softplus": (unary("Softplus"), [(3, 4)], False),
    "Tan": (unary("Tan"), [(3, 4)], False),
    "Asin": (lambda: ([helper.make_node("Mul", ["x0", "h"], ["t"]), helper.make_node("Asin", ["t"], ["y"])],
                      [const("h", np.float32(0.3))]), [(3, 4)], False),
    "Acos": (lambda: ([helper.make_node("Mul", ["x0", "h"], ["t"]), helper.make_node("Acos", ["t"], ["y"])],
                      [const("h", np.float32(0.3))]), [(3, 4)], False),
    "Atan": (unary("Atan"), [(3, 4)], False),
    "Sinh": (unary("Sinh"), [(3, 4)], False),
    "Cosh": (unary("Cosh"), [(3, 4)], False),
    "Asinh": (unary("Asinh"), [(3, 4)], False),
    "Acosh": (lambda: ([helper.make_node("Add", ["x0", "h"], ["t"]), helper.make_node("Acosh", ["t"], ["y"])],
                       [const("h", np.float32(1.5))]), [(3, 4)], True),
    "Atanh": (lambda: ([helper.make_node("Mul", ["x0", "h"], ["t"]), helper.make_node("Atanh", ["t"], ["y"])],
                       [const("h", np.float32(0.3))]), [(3, 4)], False),
    "Elu": (unary("Elu", alpha=0.5), [(3, 4)], False),
    "HardSwish": (unary("HardSwish"), [(3, 4)], False),
    "BatchNorm": (lambda: ([helper.make_node("BatchNormalization", ["x0", "s", "b", "m", "v"], ["y"])],
                           [const("s", np.float32([1.5, -0.5])), const("b", np.float32([0.1, 0.2])),
                            const("m", np.float32([0.3, -0.1])), const("v", np.float32([0.8, 1.2]))]),
                  [(2, 2, 3)], False),
    "LeakyRelu": (unary("LeakyRelu", alpha=0.1), [(3, 4)], False),
    "Gelu": (unary("Gelu"), [(3, 4)], False),
    "GeluTanh": (unary("Gelu", approximate="tanh"), [(3, 4)], False),
    "Clip": (lambda: ([helper.make_node("Clip", ["x0", "lo", "hi"], ["y"])],
                      [const("lo", np.float32(-0.5)), const("hi", np.float32(0.5))]), [(3, 4)], False),
    "Where": (lambda: ([helper.make_node("Where", ["c", "x0", "x1"], ["y"])],
                       [const("c", rng.integers(0, 2, (3, 4)).astype(bool))]), [(3, 4), (4,)], False),
    "MatMul2D": (binary("MatMul"), [(3, 5), (5, 4)], False),
    "MatMul3Dx2D": (binary("MatMul"), [(2, 3, 5), (5, 4)], False),
    "MatMulBatched": (binary("MatMul"), [(2, 3, 5), (2, 5, 4)], False),
    "MatMulBroadcast": (binary("MatMul"), [(2, 3, 5), (1, 5, 4)], False),
    "MatMulVecMat": (binary("MatMul"), [(5,), (2, 5, 4)], False),
    "MatMulMatVec": (binary("MatMul"), [(3, 5), (5,)], False),
    "ReduceProd": (unary("ReduceProd", axes=[1], keepdims=0), [(3, 4)], True),
    "ReduceSum": (lambda: ([helper.make_node("ReduceSum", ["x0", "ax"], ["y"], keepdims=0)],
                           [const("ax", np.array([1], np.int64))]), [(3, 4, 2)], False),
    "ReduceMean": (unary("ReduceMean", axes=[0, 2], keepdims=1), [(3, 4, 2)], False),
    "ReduceMax": (unary("ReduceMax", axes=[1], keepdims=0), [(3, 4)], False),
    "Softmax": (unary("Softmax", axis=-1), [(3, 5)], False),
    "SoftmaxAxis0": (unary("Softmax", axis=0), [(3, 5)], False),
    "LogSoftmax": (unary("LogSoftmax", axis=1), [(3, 5)], False),
    "LayerNorm": (lambda: ([helper.make_node("LayerNormalization", ["x0", "g", "b"], ["y"], axis=-1)],
                           [const("g", rng.standard_normal(5).astype(np.float32)),
                            const("b", rng.standard_normal(5).astype(np.float32))]), [(3, 5)], False),
    "Reshape": (lambda: ([helper.make_node("Reshape", ["x0", "s"], ["y"])],
                         [const("s", np.array([4, 3], np.int64))]), [(3, 4)], False),
    "Transpose": (unary("Transpose", perm=[2, 0, 1]), [(2, 3, 4)], False),
    "Slice": (lambda: ([helper.make_node("Slice", ["x0", "st", "en", "ax", "sp"], ["y"])],
                       [const("st", np.array([1, 0], np.int64)), const("en", np.array([3, 5], np.int64)),
                        const("ax", np.array([0, 1], np.int64)), const("sp", np.array([1, 2], np.int64))]),
              [(4, 5)], False),
    "SliceReverse": (lambda: ([helper.make_node("Slice", ["x0", "st", "en", "ax", "sp"], ["y"])],
                              [const("st", np.array([-1], np.int64)), const("en", np.array([-9], np.int64)),
                               const("ax", np.array([1], np.int64)), const("sp", np.array([-1], np.int64))]),
                     [(3, 4)], False),
    "Concat": (lambda: ([helper.make_node("Concat", ["x0", "x1"], ["y"], axis=1)], []), [(3, 2), (3, 4)], False),
    "Split": (lambda: ([helper.make_node("Split", ["x0", "sz"], ["a", "b2"], axis=1),
                        helper.make_node("Mul", ["a", "b2"], ["y"])],
                       [const("sz", np.array([2, 2], np.int64))]), [(3, 4)], False),
    "Gather": (lambda: ([helper.make_node("Gather", ["x0", "i"], ["y"], axis=0)],
                        [const("i", np.array([[2, 0], [2, 1]], np.int64))]), [(3, 4)], False),
    "GatherElements": (lambda: ([helper.make_node("GatherElements", ["x0", "i"], ["y"], axis=1)],
                                [const("i", np.array([[0, 2, 2], [1, 1, 0], [3, 0, 1]], np.int64))]),
                       [(3, 4)], False),
    "NLLLossWeighted": (lambda: ([helper.make_node("LogSoftmax", ["x0"], ["lp"], axis=1),
                                  helper.make_node("NegativeLogLikelihoodLoss", ["lp", "t", "w"], ["y"],
                                                   ignore_index=2)],
                                 [const("t", np.array([0, 2, 1, 3], np.int64)),
                                  const("w", np.float32([0.5, 1.0, 2.0, 1.5]))]), [(4, 4)], False),
    "PRelu": (lambda: ([helper.make_node("PRelu", ["x0", "sl"], ["y"])],
                       [const("sl", np.float32([0.1, 0.2, 0.3, 0.4]))]), [(3, 4)], False),
    "Tile": (lambda: ([helper.make_node("Tile", ["x0", "r"], ["y"])],
                      [const("r", np.array([2, 3], np.int64))]), [(3, 4)], False),
    "GlobalAveragePool": (unary("GlobalAveragePool"), [(2, 3, 4, 4)], False),
    "Expand": (lambda: ([helper.make_node("Expand", ["x0", "s"], ["y"])],
                        [const("s", np.array([2, 3, 4], np.int64))]), [(3, 1)], False),
    "Unsqueeze": (lambda: ([helper.make_node("Unsqueeze", ["x0", "ax"], ["y"])],
                           [const("ax", np.array([0, 2], np.int64))]), [(3, 4)], False),
    "Squeeze": (lambda: ([helper.make_node("Squeeze", ["x0", "ax"], ["y"])],
                         [const("ax", np.array([1], np.int64))]), [(3, 1, 4)], False),
    "Flatten": (unary("Flatten", axis=2), [(2, 3, 4)], False),
    "CumSum": (lambda: ([helper.make_node("CumSum", ["x0", "ax"], ["y"], exclusive=1)],
                        [const("ax", np.array(1, np.int64))]), [(3, 4)], False),
    "Trilu": (unary("Trilu", upper=0), [(4, 4)], False),
    "GatherND": (lambda: ([helper.make_node("GatherND", ["x0", "i"], ["y"])],
                          [const("i", np.array([[[1, -1]], [[0, 2]], [[1, 2]]], np.int64))]),
                 [(2, 3, 4)], False),
    "DepthToSpaceCRD": (unary("DepthToSpace", blocksize=2, mode="CRD"), [(1, 8, 2, 3)], False),
    "SpaceToDepth": (unary("SpaceToDepth", blocksize=2), [(1, 2, 4, 6)], False),
    "Shrink": (unary("Shrink", lambd=0.3, bias=0.2), [(3, 4)], False),
    "ConvTranspose": (lambda: ([helper.make_node("ConvTranspose", ["x0", "x1", "x2"], ["y"], group=2,
                                                 strides=[2, 1], pads=[1, 0, 0, 1], output_padding=[1, 0],
                                                 dilations=[1, 2])], []),
                      [(2, 4, 3, 4), (4, 3, 3, 2), (6,)], False),
    "InstanceNorm": (lambda: ([helper.make_node("InstanceNormalization", ["x0", "sc", "b"], ["y"],
                                                epsilon=1e-3)],
                              [const("sc", np.float32([0.5, 1.5, -1.0])), const("b", np.float32([0.1, 0, -0.2]))]),
                     [(2, 3, 4, 5)], False),
    "PadConstant": (lambda: ([helper.make_node("Pad", ["x0", "p", "v"], ["y"])],
                             [const("p", np.array([1, -1, 0, 2], np.int64)), const("v", np.float32(0.5))]),
                    [(3, 4)], False),
    "PadReflect": (lambda: ([helper.make_node("Pad", ["x0", "p"], ["y"], mode="reflect")],
                            [const("p", np.array([0, 2, 1, 0, 1, 3], np.int64))]), [(2, 3, 5)], False),
    "PadEdge": (lambda: ([helper.make_node("Pad", ["x0", "p"], ["y"], mode="edge")],
                         [const("p", np.array([2, 1, 0, 3], np.int64))]), [(3, 4)], False),
    "Conv": (lambda: ([helper.make_node("Conv", ["x0", "x1", "x2"], ["y"], pads=[1, 0, 1, 2],
                                        strides=[2, 1])], []), [(2, 3, 5, 6), (4, 3, 3, 2), (4,)], False),
    "ConvGroupDilated": (lambda: ([helper.make_node("Conv", ["x0", "x1"], ["y"], group=2,
                                                    dilations=[2, 1], auto_pad="SAME_UPPER")], []),
                         [(1, 4, 6, 5), (6, 2, 2, 3)], False),
    "Conv1D": (lambda: ([helper.make_node("Conv", ["x0", "x1"], ["y"], pads=[1, 1])], []),
               [(2, 3, 7), (2, 3, 3)], False),
    "MaxPool": (unary("MaxPool", kernel_shape=[2, 3], strides=[2, 2], pads=[0, 1, 0, 1]),
                [(2, 3, 6, 7)], False),
    "AveragePool": (unary("AveragePool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                          count_include_pad=0, ceil_mode=1), [(2, 2, 6, 7)], False),
    "SoftmaxLongRows": (unary("Softmax", axis=-1), [(2, 37)], False),  # 16-lane sums and a tail
    # masked_fill and additive masks before a softmax: after autodiff,
    # ds-fuse-softmax makes them masked_softmax and masked softmax_grad.
    "MaskedFillSoftmax": (lambda: ([helper.make_node("Where", ["c", "ninf", "x0"], ["w"]),
                                    helper.make_node("Softmax", ["w"], ["y"], axis=-1)],
                                   [const("c", np.triu(np.ones((4, 6), bool), 1)),
                                    const("ninf", np.float32(-np.inf))]), [(2, 4, 6)], False),
    "KeepMaskSoftmax": (lambda: ([helper.make_node("Where", ["k", "x0", "lo"], ["w"]),
                                  helper.make_node("Softmax", ["w"], ["y"], axis=-1)],
                                 [const("k", np.tril(np.ones((4, 6), bool))),
                                  const("lo", np.float32(-3.4e38))]), [(2, 4, 6)], False),
    "AddMaskSoftmax": (lambda: ([helper.make_node("Add", ["x0", "m"], ["w"]),
                                 helper.make_node("Softmax", ["w"], ["y"], axis=-1)],
                                [const("m", np.linspace(-2, 0, 6, dtype=np.float32).reshape(1, 6))]),
                       [(3, 6)], False),
}


def build(name, spec):
    make, shapes, positive = spec
    nodes, inits = make()
    inputs = [helper.make_tensor_value_info("x%d" % i, F, s) for i, s in enumerate(shapes)]
    # loss = sum(y * R): R a trainable weight shaped like y, learned later.
    tmp = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(tmp, opset_imports=[helper.make_opsetid("", 20 if "Gelu" in name else 17)])
    return nodes, inits, inputs, m


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("command failed: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))


failures = []
for name, spec in CASES.items():
    if args.only and name != args.only:
        continue
    make, shapes, positive = spec
    nodes, inits = make()
    xs = []
    for s in shapes:
        a = rng.standard_normal(s).astype(np.float32)
        xs.append(np.abs(a) + 0.5 if positive else a)
    # First learn y's shape by compiling the forward alone.
    d = os.path.join(args.workdir, name)
    os.makedirs(d, exist_ok=True)
    ins = [helper.make_tensor_value_info("x%d" % i, F, s) for i, s in enumerate(shapes)]
    g0 = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y", F, None)], inits)
    m0 = helper.make_model(g0, opset_imports=[helper.make_opsetid("", 20 if "Gelu" in name else 17)])
    onnx.save(m0, os.path.join(d, "fwd.onnx"))
    run(["ds-opt", os.path.join(d, "fwd.onnx"), "-o", os.path.join(d, "fwd.dsplan")])
    np.savez(os.path.join(d, "x.npz"), **{"x%d" % i: x for i, x in enumerate(xs)})
    run(["ds-run", os.path.join(d, "fwd.dsplan"), "--inputs", os.path.join(d, "x.npz"),
         "--outputs", os.path.join(d, "y.npz")])
    yshape = np.load(os.path.join(d, "y.npz"))["y"].shape
    R = rng.standard_normal(yshape).astype(np.float32)
    nodes2, inits2 = make()
    nodes2 += [helper.make_node("Mul", ["y", "R"], ["yr"]),
               helper.make_node("ReduceSum", ["yr"], ["loss"], keepdims=0)]
    g = helper.make_graph(nodes2, "g", ins, [helper.make_tensor_value_info("loss", F, [])],
                          inits2 + [const("R", R)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20 if "Gelu" in name else 17)])
    onnx.save(m, os.path.join(d, "loss.onnx"))
    # Gradients: a training plan whose step also returns d loss / d inputs.
    # The micro batch is each input's leading dimension; no optimizer step runs.
    cmd = ["ds-opt", os.path.join(d, "loss.onnx"), "--loss", "graph", "--loss-output", "loss",
           "-o", os.path.join(d, "grad.dsplan")]
    for i in range(len(shapes)):
        cmd += ["--grad-input", "x%d" % i]
    run(cmd)
    run(["ds-run", os.path.join(d, "grad.dsplan"), "--program", "train_step", "--inputs",
         os.path.join(d, "x.npz"), "--outputs", os.path.join(d, "g.npz")])
    grads = np.load(os.path.join(d, "g.npz"))
    run(["ds-opt", os.path.join(d, "loss.onnx"), "-o", os.path.join(d, "lossfwd.dsplan")])

    def loss_at(values):
        np.savez(os.path.join(d, "p.npz"), **values)
        run(["ds-run", os.path.join(d, "lossfwd.dsplan"), "--inputs", os.path.join(d, "p.npz"),
             "--outputs", os.path.join(d, "l.npz")])
        return float(np.load(os.path.join(d, "l.npz"))["loss"])

    worst = 0.0
    for i, x in enumerate(xs):
        analytic = grads["grad:x%d" % i]
        assert analytic.shape == x.shape, (name, analytic.shape, x.shape)
        flat = rng.choice(x.size, size=min(3, x.size), replace=False)
        for k in flat:
            eps = 1e-2 * max(1.0, abs(float(x.flat[k])))
            vals = {"x%d" % j: v.copy() for j, v in enumerate(xs)}
            vals["x%d" % i].flat[k] += eps
            up = loss_at(vals)
            vals["x%d" % i].flat[k] -= 2 * eps
            down = loss_at(vals)
            numeric = (up - down) / (2 * eps)
            err = abs(analytic.flat[k] - numeric) / max(1.0, abs(numeric))
            worst = max(worst, err)
    status = "ok" if worst < 2e-3 else "FAIL"
    print("%-16s %s  worst error %.2e" % (name, status, worst))
    if status != "ok":
        failures.append(name)
if failures:
    sys.exit("gradient rules disagree with finite differences: " + ", ".join(failures))
print("%d gradient rules agree with finite differences" % len(CASES))
