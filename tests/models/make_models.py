#!/usr/bin/env python3
"""Writes the small ONNX models the core tests use. Run from this folder; the
outputs are committed so that the C tests need no Python."""
import onnx
from onnx import TensorProto, helper


def save(graph, name, opsets):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = 8
    onnx.save(model, name)


def twice_chain(n, name):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info(f"v{n}", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Twice", [f"v{i}" if i else "x"], [f"v{i + 1}"], domain="onyx.test",
                              name=f"twice_{i}") for i in range(n)]
    save(helper.make_graph(nodes, name, [x], [y]), f"{name}.onnx", [("", 17), ("onyx.test", 1)])


twice_chain(1, "twice")
twice_chain(4, "twice_chain")

# An op that no provider claims, next to one the mock claims.
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
save(helper.make_graph([helper.make_node("Twice", ["x"], ["t"], domain="onyx.test"),
                        helper.make_node("Nope", ["t"], ["y"], domain="onyx.test", name="nope")],
                       "unclaimed", [x], [y]), "unclaimed.onnx", [("", 17), ("onyx.test", 1)])

# Twice followed by a standard op (Relu): with a strict config Relu must not fall back.
save(helper.make_graph([helper.make_node("Twice", ["x"], ["t"], domain="onyx.test"),
                        helper.make_node("Relu", ["t"], ["y"], name="relu")],
                       "mixed", [x], [y]), "mixed.onnx", [("", 17), ("onyx.test", 1)])
