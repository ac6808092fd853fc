#!/usr/bin/env python3
"""Writes model/ — the example provider's model and one test case (onyx-run compares
the outputs): x[4,8] -> com.example Scale -> RowSoftmax -> TakeRows(k = 3) -> Sqrt.
The three com.example nodes run on the example provider, Sqrt on the CPU provider.
Run from this folder (numpy, onnx); the outputs are committed."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ALPHA, BETA, K = 0.5, 0.25, 3
x = np.random.default_rng(17).uniform(-3.0, 3.0, size=(4, 8)).astype(np.float32)

nodes = [
    helper.make_node("Scale", ["x"], ["scaled"], domain="com.example", name="scale",
                     alpha=ALPHA, beta=BETA),
    helper.make_node("RowSoftmax", ["scaled"], ["soft"], domain="com.example", name="softmax"),
    helper.make_node("TakeRows", ["soft", "k"], ["rows"], domain="com.example", name="take"),
    helper.make_node("Sqrt", ["rows"], ["y"], name="sqrt"),
]
graph = helper.make_graph(
    nodes, "example",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [K, 8])],
    initializer=[numpy_helper.from_array(np.array([K], dtype=np.int64), "k")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.example", 1)])
model.ir_version = 8

s = ALPHA * x.astype(np.float64) + BETA
e = np.exp(s - s.max(axis=1, keepdims=True))
y = np.sqrt((e / e.sum(axis=1, keepdims=True))[:K]).astype(np.float32)

os.makedirs("model/test_data_set_0", exist_ok=True)
onnx.save(model, "model/model.onnx")
for name, arr in (("input_0", ("x", x)), ("output_0", ("y", y))):
    with open(f"model/test_data_set_0/{name}.pb", "wb") as f:
        f.write(numpy_helper.from_array(arr[1], arr[0]).SerializeToString())
