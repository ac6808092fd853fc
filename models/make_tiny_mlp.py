#!/usr/bin/env python3
"""Writes models/tiny-mlp: a two-layer MLP classifier as an ONNX backend-test
directory (model.onnx + test_data_set_0) with ONNX Runtime's outputs. Committed, so
running it needs no Python; rerun to regenerate."""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(20261129)
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny-mlp")
os.makedirs(os.path.join(here, "test_data_set_0"), exist_ok=True)

w1 = rng.standard_normal((16, 32)).astype(np.float32) * 0.3
b1 = rng.standard_normal(32).astype(np.float32) * 0.1
w2 = rng.standard_normal((32, 4)).astype(np.float32) * 0.3
nodes = [
    helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
    helper.make_node("Add", ["h0", "b1"], ["h1"], name="bias1"),
    helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
    helper.make_node("Gemm", ["h2", "w2"], ["logits"], name="fc2", alpha=1.0),
    helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
]
graph = helper.make_graph(
    nodes, "tiny_mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
    [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 4])],
    [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
     numpy_helper.from_array(w2, "w2")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, os.path.join(here, "model.onnx"))

x = rng.standard_normal((3, 16)).astype(np.float32)
(probs,) = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
for name, arr in (("input_0.pb", x), ("output_0.pb", probs)):
    with open(os.path.join(here, "test_data_set_0", name), "wb") as f:
        f.write(numpy_helper.from_array(arr).SerializeToString())
print("wrote", here)
