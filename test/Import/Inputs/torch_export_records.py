"""Writes small ONNX models carrying what PyTorch 2's exporter records about
parameters (graph metadata `pkg.torch.export.ExportedProgram.graph_signature`,
node metadata `pkg.torch.onnx.fx_node`) in the shapes its optimizer leaves
them: merged scales, folded transposed weights, dropped zero biases, folded
tables, an embedding with a padding row. Debian's ONNX predates node and
graph metadata, so they are written as the protobuf fields the exporter
writes (GraphProto 16, NodeProto 9), which ds reads either way.

    torch_export_records.py OUTDIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def field(number, payload):
    """A length-delimited protobuf field."""
    return varint((number << 3) | 2) + varint(len(payload)) + payload


def entry(key, value):
    e = onnx.StringStringEntryProto(key=key, value=value)
    return e.SerializeToString()


def with_fx(node, fx):
    """The node with an exporter's FX node record."""
    out = onnx.NodeProto()
    out.ParseFromString(node.SerializeToString() + field(9, entry("pkg.torch.onnx.fx_node", fx)))
    return out


def signature(lines):
    return field(16, entry("pkg.torch.export.ExportedProgram.graph_signature",
                           "\n# inputs\n" + "\n".join(lines) + "\n"))


def fx(result, op, args):
    return "%%%s : [num_users=1] = call_function[target=torch.ops.aten.%s](args = (%s), kwargs = {})" % (
        result, op, args)


def save(path, graph, sig_lines, training_info=None):
    g = onnx.GraphProto()
    g.ParseFromString(graph.SerializeToString() + (signature(sig_lines) if sig_lines else b""))
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    if training_info:
        model.training_info.append(training_info)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def init(name, array):
    return numpy_helper.from_array(np.asarray(array, np.float32), name)


def merged(out):
    """Two LayerNorms sharing one scale and one bias (ones, zeros), a
    transposed weight folded into `val_5`, a Gemm whose zero bias was
    dropped, a RoPE-like table `unsqueeze_3` folded from a buffer, a
    position table `embedding_1` whose two rows are one parameter row, and
    an embedding with padding_idx 0."""
    r = np.random.default_rng(0)
    nodes = [
        with_fx(helper.make_node("Gather", ["emb.weight", "ids"], ["e"], name="node_embedding"),
                fx("embedding", "embedding.default", "%p_emb_weight, %ids, 0")),
        with_fx(helper.make_node("Add", ["e", "embedding_1"], ["h"], name="node_add"),
                fx("add", "add.Tensor", "%embedding, %embedding_1")),
        with_fx(helper.make_node("LayerNormalization", ["h", "ln1.weight", "ln1.bias"], ["n1"],
                                 name="node_ln1"),
                fx("layer_norm", "layer_norm.default",
                   "%add, [4], %p_ln1_weight, %p_ln1_bias, 1e-05")),
        with_fx(helper.make_node("MatMul", ["n1", "val_5"], ["m"], name="node_linear"),
                fx("linear", "linear.default", "%layer_norm, %p_fc_weight")),
        with_fx(helper.make_node("Mul", ["m", "unsqueeze_3"], ["r"], name="node_mul"),
                fx("mul", "mul.Tensor", "%linear, %unsqueeze_3")),
        with_fx(helper.make_node("LayerNormalization", ["r", "ln1.weight", "ln1.bias"], ["n2"],
                                 name="node_ln2"),
                fx("layer_norm_1", "layer_norm.default",
                   "%mul, [4], %p_ln2_weight, %p_ln2_bias, 1e-05")),
        with_fx(helper.make_node("Gemm", ["n2", "fc2.weight"], ["y"], name="node_Gemm_9"),
                fx("addmm", "addmm.default", "%p_fc2_bias, %layer_norm_1, %p_fc2_weight")),
    ]
    graph = helper.make_graph(
        nodes, "merged",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [init("emb.weight", r.standard_normal((5, 4))),
         init("embedding_1", np.repeat(r.standard_normal((1, 4)), 2, axis=0)),
         init("ln1.weight", np.ones(4)), init("ln1.bias", np.zeros(4)),
         init("val_5", r.standard_normal((4, 4))),
         init("unsqueeze_3", np.cos(np.arange(8).reshape(2, 4))),
         init("fc2.weight", r.standard_normal((4, 3)))])
    save(os.path.join(out, "merged.onnx"), graph, [
        "p_emb_weight: PARAMETER target='emb.weight'",
        "p_pos_weight: PARAMETER target='pos.weight'",
        "p_ln1_weight: PARAMETER target='ln1.weight'",
        "p_ln1_bias: PARAMETER target='ln1.bias'",
        "p_fc_weight: PARAMETER target='fc.weight'",
        "p_ln2_weight: PARAMETER target='ln2.weight'",
        "p_ln2_bias: PARAMETER target='ln2.bias'",
        "p_fc2_weight: PARAMETER target='fc2.weight'",
        "p_fc2_bias: PARAMETER target='fc2.bias'",
        "b_rope_inv_freq: BUFFER target='rope.inv_freq' persistent=False",
        "ids: USER_INPUT"])


def unrecorded(out):
    """The merge without the exporter's records: one bias read by two bias
    adds and one scale by two LayerNorms; and a weight read by a Gather and
    a MatMul (a genuine tie, which stays)."""
    r = np.random.default_rng(1)
    nodes = [
        helper.make_node("Gather", ["tok", "ids"], ["e"]),
        helper.make_node("LayerNormalization", ["e", "scale", "shift"], ["n1"], name="ln_a"),
        helper.make_node("MatMul", ["n1", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "bias"], ["a1"], name="fc_a"),
        helper.make_node("LayerNormalization", ["a1", "scale", "shift"], ["n2"], name="ln_b"),
        helper.make_node("MatMul", ["n2", "w2"], ["m2"]),
        helper.make_node("Add", ["m2", "bias"], ["a2"], name="fc_b"),
        helper.make_node("Transpose", ["tok"], ["tokT"], perm=[1, 0]),
        helper.make_node("MatMul", ["a2", "tokT"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "unrecorded",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
        [init("tok", r.standard_normal((5, 4))), init("scale", np.ones(4)),
         init("shift", np.zeros(4)), init("bias", np.zeros(4)),
         init("w1", r.standard_normal((4, 4))), init("w2", r.standard_normal((4, 4)))])
    save(os.path.join(out, "unrecorded.onnx"), graph, None)


def transposed(out):
    """`x @ w.T` (Falcon's FalconLinear): the optimizer folds the transpose
    of w into an initializer named after its FX node (`permute`), which no
    record ties to w; a causal mask folded from buffers stays constant."""
    r = np.random.default_rng(3)
    nodes = [
        with_fx(helper.make_node("MatMul", ["x", "permute"], ["h"], name="node_matmul"),
                fx("matmul", "matmul.default", "%x, %permute")),
        with_fx(helper.make_node("Add", ["h", "val_7"], ["y"], name="node_add"),
                fx("add", "add.Tensor", "%matmul, %expand_2")),
    ]
    graph = helper.make_graph(
        nodes, "transposed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [init("permute", r.standard_normal((4, 3))), init("val_7", np.triu(np.ones((2, 3))))])
    save(os.path.join(out, "transposed.onnx"), graph, [
        "p_fc_weight: PARAMETER target='fc.weight'",
        "b_mask: BUFFER target='mask' persistent=False",
        "x: USER_INPUT"])


def merged_nodes(out):
    """Two LayerNorms of one input with equal parameters (GPT-NeoX's parallel
    residual at initialization): the optimizer keeps one node, and the
    second reader's FX node still names the merged one (`%layer_norm_1`)."""
    r = np.random.default_rng(4)
    nodes = [
        with_fx(helper.make_node("LayerNormalization", ["x", "ln1.weight", "ln1.bias"],
                                 ["layer_norm"], name="node_ln"),
                fx("layer_norm", "layer_norm.default",
                   "%x, [4], %p_ln1_weight, %p_ln1_bias, 1e-05")),
        with_fx(helper.make_node("MatMul", ["layer_norm", "val_1"], ["a"], name="node_fc1"),
                fx("linear", "linear.default", "%layer_norm, %p_fc1_weight")),
        with_fx(helper.make_node("MatMul", ["layer_norm", "val_2"], ["b"], name="node_fc2"),
                fx("linear_1", "linear.default", "%layer_norm_1, %p_fc2_weight")),
        with_fx(helper.make_node("Add", ["a", "b"], ["y"], name="node_add"),
                fx("add", "add.Tensor", "%linear, %linear_1")),
    ]
    graph = helper.make_graph(
        nodes, "merged_nodes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [init("ln1.weight", np.ones(4)), init("ln1.bias", np.zeros(4)),
         init("val_1", r.standard_normal((4, 3))), init("val_2", r.standard_normal((4, 3)))])
    save(os.path.join(out, "merged_nodes.onnx"), graph, [
        "p_ln1_weight: PARAMETER target='ln1.weight'",
        "p_ln1_bias: PARAMETER target='ln1.bias'",
        "p_ln2_weight: PARAMETER target='ln2.weight'",
        "p_ln2_bias: PARAMETER target='ln2.bias'",
        "p_fc1_weight: PARAMETER target='fc1.weight'",
        "p_fc2_weight: PARAMETER target='fc2.weight'",
        "x: USER_INPUT"])


def shifted_scales(out):
    """`x * (1 + w)` (Gemma's RMSNorm) in two layers: the optimizer folds
    both `1 + w` (ones at initialization) into one table `add_1`; each
    reader's FX node still names its own add."""
    r = np.random.default_rng(5)
    nodes = [
        with_fx(helper.make_node("Mul", ["x", "add_1"], ["m1"], name="node_mul_1"),
                fx("mul_1", "mul.Tensor", "%x, %add_1")),
        with_fx(helper.make_node("MatMul", ["m1", "val_3"], ["h"], name="node_linear"),
                fx("linear", "linear.default", "%mul_1, %p_fc_weight")),
        with_fx(helper.make_node("Mul", ["h", "add_1"], ["y"], name="node_mul_2"),
                fx("mul_2", "mul.Tensor", "%linear, %add_2")),
    ]
    graph = helper.make_graph(
        nodes, "shifted", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [init("add_1", np.ones(4)), init("val_3", r.standard_normal((4, 4)))])
    save(os.path.join(out, "shifted.onnx"), graph, [
        "p_norm1_weight: PARAMETER target='norm1.weight'",
        "p_fc_weight: PARAMETER target='fc.weight'",
        "p_norm2_weight: PARAMETER target='norm2.weight'",
        "x: USER_INPUT"])


def training_info(out):
    """ONNX training_info: its update bindings name what is trained."""
    r = np.random.default_rng(2)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "a"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
        "ti", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [init("a", r.standard_normal((3, 3))), init("b", r.standard_normal(3))])
    info = onnx.TrainingInfoProto()
    info.algorithm.CopyFrom(helper.make_graph([], "algorithm", [], []))
    info.update_binding.add(key="a", value="a_new")
    save(os.path.join(out, "training_info.onnx"), graph, None, info)


if __name__ == "__main__":
    os.makedirs(sys.argv[1], exist_ok=True)
    merged(sys.argv[1])
    unrecorded(sys.argv[1])
    transposed(sys.argv[1])
    merged_nodes(sys.argv[1])
    shifted_scales(sys.argv[1])
    training_info(sys.argv[1])
