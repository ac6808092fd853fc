#!/usr/bin/env python3
"""Writes model.onnx, the app's model: y = Relu(x[2,4] @ W[4,3] + b), standard ops
that the CPU provider runs. Run from this folder (numpy, onnx); the output is committed."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)
w = rng.uniform(-1, 1, size=(4, 3)).astype(np.float32)
b = rng.uniform(-0.5, 0.5, size=(3,)).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["xw"], name="matmul"),
     helper.make_node("Add", ["xw", "b"], ["z"], name="add"),
     helper.make_node("Relu", ["z"], ["y"], name="relu")],
    "example_app",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, "model.onnx")
