"""A Llama-style decoder as an ONNX graph written node by node (the ops
PyTorch's exporter writes for Hugging Face's LlamaForCausalLM: RMSNorm as
Pow/ReduceMean/Add/Sqrt/Div/Mul, rotary embeddings with Slice/Neg/Concat,
grouped-query attention, SwiGLU), with every weight stored as external
data in a file that need not exist: the graph alone describes a 7B-class
model for ds-opt --shapes-only --report (what-if at scale), in seconds and
without 13 GB of weights.

    python3 llama_graph.py out.onnx [--layers 32 --d 4096 --ffn 11008 ...]
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(path, vocab=32000, d=4096, layers=32, heads=32, kv_heads=32, ffn=11008, batch=1,
          seq=2048, weights_file="weights.bin", opset=17):
    nodes, inits = [], []
    offset = [0]
    head_dim = d // heads

    def weight(name, shape):
        """An initializer whose values live in `weights_file` (not written)."""
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        n = int(np.prod(shape)) * 4
        for k, v in (("location", weights_file), ("offset", str(offset[0])), ("length", str(n))):
            e = t.external_data.add()
            e.key, e.value = k, v
        offset[0] += n
        inits.append(t)
        return name

    def const(name, array):
        # Constant nodes, as the exporter writes buffers it folds (rotary
        # tables, the causal mask): not trained.
        nodes.append(helper.make_node("Constant", [], [name], name=name + "/Constant",
                                      value=numpy_helper.from_array(np.asarray(array), name)))
        return name

    def node(op, inputs, name, **attrs):
        out = name + "_out"
        nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    const("two", np.array(2.0, np.float32))
    const("eps", np.array(1e-5, np.float32))
    const("scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    const("q_shape", np.array([batch, seq, heads, head_dim], np.int64))
    const("kv_shape", np.array([batch, seq, kv_heads, head_dim], np.int64))
    const("merged", np.array([batch, seq, d], np.int64))
    half = head_dim // 2
    const("lo_start", np.array([0], np.int64))
    const("lo_end", np.array([half], np.int64))
    const("hi_end", np.array([head_dim], np.int64))
    const("last_axis", np.array([3], np.int64))
    inv = 1.0 / (10000 ** (np.arange(0, head_dim, 2) / head_dim))
    angles = np.outer(np.arange(seq), inv)
    angles = np.concatenate([angles, angles], axis=-1)[None, None].astype(np.float32)
    const("cos", np.cos(angles))
    const("sin", np.sin(angles))
    const("mask", np.triu(np.full((seq, seq), -1e9, np.float32), 1)[None, None])
    if kv_heads != heads:
        const("rep_shape", np.array([batch, kv_heads, heads // kv_heads, seq, head_dim], np.int64))
        const("rep_axis", np.array([2], np.int64))
        const("rep_out", np.array([batch, heads, seq, head_dim], np.int64))

    def rms_norm(x, w, name):
        sq = node("Pow", [x, "two"], name + "/Pow")
        mean = node("ReduceMean", [sq], name + "/ReduceMean", axes=[-1], keepdims=1)
        var = node("Add", [mean, "eps"], name + "/Add")
        rms = node("Sqrt", [var], name + "/Sqrt")
        normed = node("Div", [x, rms], name + "/Div")
        return node("Mul", [normed, w], name + "/Mul")

    def rotary(x, name):
        lo = node("Slice", [x, "lo_start", "lo_end", "last_axis"], name + "/Slice")
        hi = node("Slice", [x, "lo_end", "hi_end", "last_axis"], name + "/Slice_1")
        rot = node("Concat", [node("Neg", [hi], name + "/Neg"), lo], name + "/Concat", axis=-1)
        return node("Add", [node("Mul", [x, "cos"], name + "/Mul"),
                            node("Mul", [rot, "sin"], name + "/Mul_1")], name + "/Add")

    def heads_first(x, shape, name):
        r = node("Reshape", [x, shape], name + "/Reshape")
        return node("Transpose", [r], name + "/Transpose", perm=[0, 2, 1, 3])

    def repeat_kv(x, name):
        if kv_heads == heads:
            return x
        u = node("Unsqueeze", [x, "rep_axis"], name + "/Unsqueeze")
        e = node("Expand", [u, "rep_shape"], name + "/Expand")
        return node("Reshape", [e, "rep_out"], name + "/Reshape")

    x = node("Gather", [weight("model.embed_tokens.weight", [vocab, d]), "input_ids"],
             "/model/embed_tokens/Gather")
    for i in range(layers):
        p = "model.layers.%d." % i
        n = "/model/layers.%d" % i
        h = rms_norm(x, weight(p + "input_layernorm.weight", [d]), n + "/input_layernorm")
        a = n + "/self_attn"
        q = node("MatMul", [h, weight(p + "self_attn.q_proj.weight.T", [d, d])], a + "/q_proj/MatMul")
        k = node("MatMul", [h, weight(p + "self_attn.k_proj.weight.T", [d, kv_heads * head_dim])],
                 a + "/k_proj/MatMul")
        v = node("MatMul", [h, weight(p + "self_attn.v_proj.weight.T", [d, kv_heads * head_dim])],
                 a + "/v_proj/MatMul")
        q = rotary(heads_first(q, "q_shape", a + "/q"), a + "/q_rot")
        k = repeat_kv(rotary(heads_first(k, "kv_shape", a + "/k"), a + "/k_rot"), a + "/k_rep")
        v = repeat_kv(heads_first(v, "kv_shape", a + "/v"), a + "/v_rep")
        kt = node("Transpose", [k], a + "/Transpose_k", perm=[0, 1, 3, 2])
        s = node("Mul", [node("MatMul", [q, kt], a + "/MatMul"), "scale"], a + "/Mul")
        s = node("Add", [s, "mask"], a + "/Add")
        o = node("MatMul", [node("Softmax", [s], a + "/Softmax", axis=-1), v], a + "/MatMul_1")
        o = node("Transpose", [o], a + "/Transpose_o", perm=[0, 2, 1, 3])
        o = node("Reshape", [o, "merged"], a + "/Reshape_o")
        o = node("MatMul", [o, weight(p + "self_attn.o_proj.weight.T", [d, d])], a + "/o_proj/MatMul")
        x = node("Add", [x, o], n + "/Add")
        h = rms_norm(x, weight(p + "post_attention_layernorm.weight", [d]),
                     n + "/post_attention_layernorm")
        m = n + "/mlp"
        g = node("MatMul", [h, weight(p + "mlp.gate_proj.weight.T", [d, ffn])], m + "/gate_proj/MatMul")
        g = node("Mul", [g, node("Sigmoid", [g], m + "/act_fn/Sigmoid")], m + "/act_fn/Mul")
        u = node("MatMul", [h, weight(p + "mlp.up_proj.weight.T", [d, ffn])], m + "/up_proj/MatMul")
        y = node("MatMul", [node("Mul", [g, u], m + "/Mul"),
                            weight(p + "mlp.down_proj.weight.T", [ffn, d])], m + "/down_proj/MatMul")
        x = node("Add", [x, y], n + "/Add_1")
    x = rms_norm(x, weight("model.norm.weight", [d]), "/model/norm")
    logits = node("MatMul", [x, weight("lm_head.weight.T", [d, vocab])], "/lm_head/MatMul")
    nodes[-1].output[0] = "logits"
    graph = helper.make_graph(
        nodes, "llama", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, seq, vocab])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, path)
    params = sum(int(np.prod(t.dims)) for t in inits if t.data_location == TensorProto.EXTERNAL)
    return params


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    for k, v in (("vocab", 32000), ("d", 4096), ("layers", 32), ("heads", 32), ("kv_heads", 32),
                 ("ffn", 11008), ("batch", 1), ("seq", 2048)):
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=v)
    a = ap.parse_args()
    n = build(a.out, a.vocab, a.d, a.layers, a.heads, a.kv_heads, a.ffn, a.batch, a.seq)
    print("%s: %d parameters (%.2fB), weights not written" % (a.out, n, n / 1e9))
