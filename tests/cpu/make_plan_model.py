#!/usr/bin/env python3
"""Writes shape_chain.onnx, the model cpu_plan_test plans and runs: a decoder's
shape arithmetic (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) around
activations whose values the planner never knows, plus the seqlens_k chain of a
GenAI decoder. Run from this folder; the output is committed."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

H = 8
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", H])
mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["B", "T"])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", H])
seqlens = helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["B"])
total = helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, [])
rng = np.random.default_rng(7)
inits = [
    numpy_helper.from_array(np.array([0], np.int64), "zero1"),
    numpy_helper.from_array(np.array(0, np.int64), "i0"),
    numpy_helper.from_array(np.array(1, np.int64), "i1"),
    numpy_helper.from_array(np.array([2, H // 2], np.int64), "heads"),
    numpy_helper.from_array(np.array([H], np.int64), "hidden"),
    numpy_helper.from_array(np.array([1], np.int64), "axis1"),
    numpy_helper.from_array(np.array(1, np.int64), "one"),
    numpy_helper.from_array(rng.standard_normal((H, H)).astype(np.float32), "w"),
    numpy_helper.from_array(rng.standard_normal((H,)).astype(np.float32), "gamma"),
]
nodes = [
    helper.make_node("Shape", ["x"], ["xs"]),
    helper.make_node("Gather", ["xs", "i0"], ["b"], axis=0),
    helper.make_node("Gather", ["xs", "i1"], ["s"], axis=0),
    helper.make_node("Unsqueeze", ["b", "zero1"], ["b1"]),
    helper.make_node("Unsqueeze", ["s", "zero1"], ["s1"]),
    helper.make_node("Concat", ["b1", "s1", "heads"], ["split_shape"], axis=0),
    helper.make_node("Reshape", ["x", "split_shape"], ["xh"]),
    helper.make_node("Transpose", ["xh"], ["xt"], perm=[0, 2, 1, 3]),
    helper.make_node("Transpose", ["xt"], ["xb"], perm=[0, 2, 1, 3]),
    helper.make_node("Concat", ["b1", "s1", "hidden"], ["merge_shape"], axis=0),
    helper.make_node("Reshape", ["xb", "merge_shape"], ["xm"]),
    helper.make_node("MatMul", ["xm", "w"], ["h"]),
    helper.make_node("SkipSimplifiedLayerNormalization", ["h", "x", "gamma"],
                     ["y", "", "", "resid"], domain="com.microsoft", epsilon=1e-6),
    helper.make_node("ReduceSum", ["attention_mask", "axis1"], ["msum"], keepdims=0),
    helper.make_node("Sub", ["msum", "one"], ["msub"]),
    helper.make_node("Cast", ["msub"], ["seqlens_k"], to=TensorProto.INT32),
    helper.make_node("Shape", ["attention_mask"], ["ms"]),
    helper.make_node("Gather", ["ms", "i1"], ["t"], axis=0),
    helper.make_node("Cast", ["t"], ["total_sequence_length"], to=TensorProto.INT32),
]
graph = helper.make_graph(nodes, "shape_chain", [x, mask], [y, seqlens, total], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.microsoft", 1)])
model.ir_version = 8
onnx.save(model, "shape_chain.onnx")
