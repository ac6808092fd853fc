"""Writes the reliability tests' small models (run once; the .onnx files are committed).

huge_input.onnx: y = Relu(x) with x declared float32 [2^32, 2^32], whose byte size
passes 2^64: onyx-run's random input for it must be refused, not allocated.
"""
import os

import onnx
from onnx import TensorProto, helper

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
os.makedirs(here, exist_ok=True)
big = 1 << 32
graph = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"])],
    "huge_input",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [big, big])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [big, big])],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, os.path.join(here, "huge_input.onnx"))
