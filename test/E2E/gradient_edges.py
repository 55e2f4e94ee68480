# Gradients at the points where a rule's formula breaks down, against
# PyTorch's autograd (a held-out adversarial round found each, docs/security.md):
# ReduceMax / ReduceMin at ties split the gradient among the tied elements
# (each got all of it); Pow's exponent gradient at base 0 is 0 (was
# 0 * ln 0 = NaN), and the base's is 0 for exponent 0 (was 0 * 0^-1);
# ReduceProd with one or two zeros gives the product of the
# others (was prod / x = NaN); ReduceL2 of an all-zero slice gives 0 (was
# NaN); LeakyRelu and Celu at exactly 0 take one branch's derivative (both
# were counted), PRelu the slope's, HardSigmoid 0 at its bounds; Max and Min
# split the gradient at ties (Clip's bounds pass all of it, as clamp); Elu's and Celu's negative branch stays finite for large x
# (its unselected gradient was 0 * inf = NaN).
# Each model is loss = sum(op(x * W)) for trained W; ds-run's train_step
# stores dloss/dW (--save-state), compared with torch's.
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import json
import os
import sys

sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import onnx
import torch
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh
from e2e import parse_args, run

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
F = torch.nn.functional

# name, ONNX nodes from h (= x * W) to the per-sample value r, torch of h, W, x
CASES = [
    ("reduce_max_ties", [oh.make_node("ReduceMax", ["h"], ["r"], axes=[1], keepdims=0)],
     lambda h: h.amax(1), [[1, 1, 1, 1]], [[1, 1, 1, 1], [2, 2, 1, 2]]),
    ("reduce_min_ties", [oh.make_node("ReduceMin", ["h"], ["r"], axes=[1], keepdims=0)],
     lambda h: h.amin(1), [[1, 1, 1, 1]], [[1, 1, 1, 1], [1, 3, 1, 2]]),
    ("pow_zero_base", [oh.make_node("Pow", ["b", "h"], ["p"]),
                       oh.make_node("ReduceSum", ["p"], ["r"], axes=[1], keepdims=0)],
     lambda h: torch.pow(torch.tensor([[0.0, 2.0, 3.0]]), h).sum(1), [[0.5, 1.5, 2.0]],
     [[1, 1, 1], [2, 1, 0.5]]),
    ("reduce_prod_one_zero", [oh.make_node("ReduceProd", ["h"], ["r"], axes=[1], keepdims=0)],
     lambda h: h.prod(1), [[0, 2, 3]], [[1, 1, 1], [2, 1, 3]]),
    ("reduce_prod_two_zeros", [oh.make_node("ReduceProd", ["h"], ["r"], axes=[1], keepdims=0)],
     lambda h: h.prod(1), [[0, 0, 3]], [[1, 1, 1], [2, 1, 3]]),
    ("reduce_prod_no_zero", [oh.make_node("ReduceProd", ["h"], ["r"], axes=[1], keepdims=0)],
     lambda h: h.prod(1), [[0.5, 2, 3]], [[1, 1, 1], [2, 1, 3]]),
    ("reduce_l2_zero_row", [oh.make_node("ReduceL2", ["h"], ["r"], axes=[1], keepdims=0)],
     lambda h: torch.linalg.vector_norm(h, dim=1), [[0, 0, 0]], [[1, 1, 1], [2, 1, 3]]),
    ("reduce_l2", [oh.make_node("ReduceL2", ["h"], ["r"], axes=[1], keepdims=0)],
     lambda h: torch.linalg.vector_norm(h, dim=1), [[1, -2, 3]], [[1, 1, 1], [2, 1, 3]]),
    ("leaky_relu_at_zero", [oh.make_node("LeakyRelu", ["h"], ["a"], alpha=0.5),
                            oh.make_node("ReduceSum", ["a"], ["r"], axes=[1], keepdims=0)],
     lambda h: F.leaky_relu(h, 0.5).sum(1), [[0, 1, -1]], [[1, 1, 1], [1, 1, 1]]),
    ("celu_at_zero", [oh.make_node("Celu", ["h"], ["a"], alpha=2.0),
                      oh.make_node("ReduceSum", ["a"], ["r"], axes=[1], keepdims=0)],
     lambda h: F.celu(h, 2.0).sum(1), [[0, 1, -1]], [[1, 1, 1], [1, 1, 1]]),
    ("pow_zero_exponent", [oh.make_node("Pow", ["h", "z"], ["p"]),
                           oh.make_node("ReduceSum", ["p"], ["r"], axes=[1], keepdims=0)],
     lambda h: torch.pow(h, 0.0).sum(1), [[0, 1, -2]], [[1, 1, 1], [0, 2, 1]]),
    ("max_ties", [oh.make_node("Max", ["h", "c"], ["a"]),
                  oh.make_node("ReduceSum", ["a"], ["r"], axes=[1], keepdims=0)],
     lambda h: torch.maximum(h, torch.tensor([[1.0, 0.0, 3.0]])).sum(1), [[1, 1, 1]], [[1, 1, 1], [1, 0, 3]]),
    ("min_ties", [oh.make_node("Min", ["h", "c"], ["a"]),
                  oh.make_node("ReduceSum", ["a"], ["r"], axes=[1], keepdims=0)],
     lambda h: torch.minimum(h, torch.tensor([[1.0, 0.0, 3.0]])).sum(1), [[1, 1, 1]], [[1, 1, 1], [1, 0, 3]]),
    ("clip_at_bounds", [oh.make_node("Constant", [], ["lo"], value=nh.from_array(np.array(-1, np.float32))),
                        oh.make_node("Constant", [], ["hi"], value=nh.from_array(np.array(1, np.float32))),
                        oh.make_node("Clip", ["h", "lo", "hi"], ["a"]),
                        oh.make_node("ReduceSum", ["a"], ["r"], axes=[1], keepdims=0)],
     lambda h: torch.clamp(h, -1.0, 1.0).sum(1), [[1, -1, 0.5]], [[1, 1, 1], [1, 1, 4]]),
    ("prelu_at_zero", [oh.make_node("PRelu", ["h", "s"], ["a"]),
                       oh.make_node("ReduceSum", ["a"], ["r"], axes=[1], keepdims=0)],
     lambda h: F.prelu(h, torch.tensor([0.25])).sum(1), [[0, 1, -1]], [[1, 1, 1], [1, 1, 1]]),
    ("hard_sigmoid_at_bounds", [oh.make_node("HardSigmoid", ["h"], ["a"], alpha=1.0 / 6, beta=0.5),
                                oh.make_node("ReduceSum", ["a"], ["r"], axes=[1], keepdims=0)],
     lambda h: F.hardsigmoid(h).sum(1), [[-3, 3, 0]], [[1, 1, 1], [1, 1, 1]]),
    ("elu_large", [oh.make_node("Elu", ["h"], ["a"], alpha=1.0),
                   oh.make_node("ReduceSum", ["a"], ["r"], axes=[1], keepdims=0)],
     lambda h: F.elu(h).sum(1), [[100, 0, -1]], [[1, 1, 1], [1, 1, 1]]),
]

failed = []
for name, nodes, reference, w, x in CASES:
    d = os.path.join(args.workdir, name)
    os.makedirs(d, exist_ok=True)
    w = np.array(w, np.float32)
    x = np.array(x, np.float32)
    inits = [nh.from_array(w, "W")]
    if name == "pow_zero_base":
        inits.append(nh.from_array(np.array([[0, 2, 3]], np.float32), "b"))
    if name == "pow_zero_exponent":
        inits.append(nh.from_array(np.array(0, np.float32), "z"))
    if name in ("max_ties", "min_ties"):
        inits.append(nh.from_array(np.array([[1, 0, 3]], np.float32), "c"))
    if name == "prelu_at_zero":
        inits.append(nh.from_array(np.array([0.25], np.float32), "s"))
    graph = oh.make_graph([oh.make_node("Mul", ["x", "W"], ["h"])] + nodes +
                          [oh.make_node("ReduceSum", ["r"], ["loss"], keepdims=0)], name,
                          [oh.make_tensor_value_info("x", TP.FLOAT, list(x.shape))],
                          [oh.make_tensor_value_info("loss", TP.FLOAT, [])], inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 12)])  # axes attributes
    model.ir_version = 8
    onnx.save(model, os.path.join(d, "m.onnx"))
    json.dump({"train_batch_size": len(x), "optimizer": {"type": "SGD", "params": {"lr": 1.0}}},
              open(os.path.join(d, "c.json"), "w"))
    open(os.path.join(d, "p.txt"), "w").write("W\n")
    plan = os.path.join(d, "t.dsplan")
    run(["ds-opt", os.path.join(d, "m.onnx"), "--config", os.path.join(d, "c.json"), "--loss",
         "graph", "--loss-output", "loss", "--parameters", os.path.join(d, "p.txt"), "-o", plan])
    np.savez(os.path.join(d, "in.npz"), x=x)
    state = os.path.join(d, "state.npz")
    run(["ds-run", plan, "--program", "train_step", "--inputs", os.path.join(d, "in.npz"),
         "--save-state", state])
    got = np.load(state)["grad:W"]
    W = torch.tensor(w, requires_grad=True)
    reference(torch.tensor(x) * W).sum().backward()
    want = W.grad.numpy()
    ok = np.isfinite(got).all() and np.allclose(got, want, rtol=1e-5, atol=1e-6)
    print("%-22s ds %s torch %s %s" % (name, got.ravel().tolist(), want.ravel().tolist(),
                                       "ok" if ok else "DIFFERENT"))
    if not ok:
        failed.append(name)
if failed:
    sys.exit("gradients differ from PyTorch: " + ", ".join(failed))

# A weight read by a Gather and by a Gemm with transB (a tied embedding and
# head, as torch.onnx exports a GPT's on 2-D activations) is one parameter:
# its gradient sums both readers' (the importer's transposed copy for the
# Gemm was trained apart, the Gather's rows missing the head's part).
d = os.path.join(args.workdir, "tied_gemm")
os.makedirs(d, exist_ok=True)
E = np.random.default_rng(4).standard_normal((5, 3)).astype(np.float32)
graph = oh.make_graph([oh.make_node("Gather", ["E", "idx"], ["h"]),
                       oh.make_node("Gemm", ["h", "E"], ["logits"], transB=1),
                       oh.make_node("Mul", ["logits", "logits"], ["sq"]),
                       oh.make_node("ReduceSum", ["sq"], ["loss"], keepdims=0)], "tied",
                      [oh.make_tensor_value_info("idx", TP.INT64, [2])],
                      [oh.make_tensor_value_info("loss", TP.FLOAT, [])], [nh.from_array(E, "E")])
model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 12)])
model.ir_version = 8
onnx.save(model, os.path.join(d, "m.onnx"))
json.dump({"train_batch_size": 2, "optimizer": {"type": "SGD", "params": {"lr": 1.0}}},
          open(os.path.join(d, "c.json"), "w"))
plan = os.path.join(d, "t.dsplan")
run(["ds-opt", os.path.join(d, "m.onnx"), "--config", os.path.join(d, "c.json"), "--loss", "graph",
     "--loss-output", "loss", "-o", plan])
idx = np.array([0, 3], np.int64)
np.savez(os.path.join(d, "in.npz"), idx=idx)
state = os.path.join(d, "state.npz")
run(["ds-run", plan, "--program", "train_step", "--inputs", os.path.join(d, "in.npz"), "--save-state", state])
grads = {k: v for k, v in np.load(state).items() if k.startswith("grad:")}
Et = torch.tensor(E, requires_grad=True)
h = Et[torch.tensor(idx)]
((h @ Et.t()) ** 2).sum().backward()
print("tied_gemm              ds grads %s; torch %s" % (sorted(grads), Et.grad.numpy().ravel().tolist()))
if list(grads) != ["grad:E"] or not np.allclose(grads["grad:E"], Et.grad.numpy(), rtol=1e-5, atol=1e-5):
    sys.exit("tied Gather + Gemm(transB) weight: gradients differ from PyTorch")
