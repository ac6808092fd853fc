#!/usr/bin/env python3
"""act_chain.onnx for tests/core/act_pool_test.c: x [n, 1024] float through seven Neg
nodes (v1..v7), with v3 a graph output as well as the last, so that a run frees
same-sized activations node after node and keeps one to the end."""
import onnx
from onnx import TensorProto, helper

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1024])
outs = [helper.make_tensor_value_info(v, TensorProto.FLOAT, ["n", 1024]) for v in ("v3", "v7")]
nodes = [helper.make_node("Neg", [f"v{i}" if i else "x"], [f"v{i + 1}"], name=f"neg_{i + 1}")
         for i in range(7)]
model = helper.make_model(helper.make_graph(nodes, "act_chain", [x], outs),
                          opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, "act_chain.onnx")
