"""Makes the committed int8 models and onnxruntime's outputs that
test/E2E/quantize.py holds ds to (CI has no onnxruntime).

    bash bench/peers.sh --models gpt2   # once: makes bench/.venv
    bench/.venv/bin/python test/E2E/quantized/make_quantized_models.py

- matmul_q8.onnx: one product quantized by onnxruntime's quantize_dynamic
  (DynamicQuantizeLinear, MatMulInteger, Cast, Mul): ds must give
  onnxruntime's values exactly (the same uint8 activations, exact integer
  sums, the scales multiplied in the same order).
- bert_q8.onnx: a tiny BERT (Hugging Face, random weights, PyTorch 2's
  exporter) through quantize_dynamic, per-channel weights: its logits and
  onnxruntime's, and the f32 model's.
- cnn_qdq.onnx: a small CNN (strided and depthwise convolutions, a
  residual add, max pooling, a global mean, a linear head) through
  quantize_static in the QDQ format (uint8 activations calibrated on
  random images, int8 weights per channel): onnxruntime's outputs (its
  default optimizations, which run QLinearConv) and the f32 model's.

    bench/.venv/bin/python test/E2E/quantized/make_quantized_models.py [--only qdq]
"""
import argparse
import os

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers as tf
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_dynamic, quantize_static)

HERE = os.path.dirname(os.path.abspath(__file__))


def strip(path):
    m = onnx.load(path)
    for n in m.graph.node:
        del n.metadata_props[:]
        n.doc_string = ""
    onnx.save(m, path, save_as_external_data=False)
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")


def run_ort(path, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def qdq():
    torch.manual_seed(1)

    class CNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
            self.dw = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
            self.pw = torch.nn.Conv2d(16, 16, 1)
            self.head = torch.nn.Linear(16, 10)

        def forward(self, x):
            y = torch.relu(self.stem(x))
            y = torch.nn.functional.max_pool2d(torch.relu(self.pw(torch.relu(self.dw(y)))) + y, 2)
            return self.head(y.mean((2, 3)))

    f32 = os.path.join(HERE, "cnn_f32.onnx")
    x = np.random.default_rng(5).standard_normal((2, 3, 32, 32)).astype(np.float32)
    torch.onnx.export(CNN().eval(), (torch.from_numpy(x),), f32, input_names=["x"],
                      output_names=["y"], opset_version=17, dynamo=False)
    strip(f32)
    calib = np.random.default_rng(6)

    class Images(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": calib.standard_normal(x.shape).astype(np.float32)}
                            for _ in range(8)])

        def get_next(self):
            return next(self.it, None)

    q = os.path.join(HERE, "cnn_qdq.onnx")
    quantize_static(f32, q, Images(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    ort_default = ort.InferenceSession(q, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.savez(os.path.join(HERE, "cnn_qdq.npz"), x=x, ort=ort_default, f32=run_ort(f32, {"x": x}))
    os.remove(f32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["qdq"])
    if ap.parse_args().only == "qdq":
        qdq()
        print("wrote", sorted(os.listdir(HERE)))
        return
    qdq()
    rng = np.random.default_rng(3)
    k, n, m = 96, 40, 24
    w = (rng.standard_normal((k, n)) * 0.1).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                          [numpy_helper.from_array(w, "w")])
    f32 = os.path.join(HERE, "matmul_f32.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f32)
    q8 = os.path.join(HERE, "matmul_q8.onnx")
    quantize_dynamic(f32, q8, weight_type=QuantType.QInt8)
    os.remove(f32)
    x = (rng.standard_normal((m, k)) * 2).astype(np.float32)
    np.savez(os.path.join(HERE, "matmul.npz"), x=x, ort=run_ort(q8, {"x": x}))

    torch.manual_seed(0)
    cfg = tf.BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=64,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = tf.BertForMaskedLM(cfg).eval()

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids):
            return self.m(input_ids=ids).logits

    ids = torch.from_numpy(rng.integers(0, 512, (2, 32)).astype(np.int64))
    f32 = os.path.join(HERE, "bert_f32.onnx")
    torch.onnx.export(Logits(model).eval(), (ids,), f32, input_names=["ids"], output_names=["logits"],
                      opset_version=18, dynamo=True)
    strip(f32)
    q8 = os.path.join(HERE, "bert_q8.onnx")
    quantize_dynamic(f32, q8, weight_type=QuantType.QInt8, per_channel=True)
    feeds = {"ids": ids.numpy()}
    np.savez(os.path.join(HERE, "bert.npz"), ids=ids.numpy(), ort=run_ort(q8, feeds),
             f32=run_ort(f32, feeds))
    os.remove(f32)
    print("wrote", sorted(os.listdir(HERE)))


if __name__ == "__main__":
    main()
