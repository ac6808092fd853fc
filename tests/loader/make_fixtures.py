#!/usr/bin/env python3
"""Writes the loader test fixtures with the reference `onnx` package.

The C tests build most of their inputs with the protobuf-c pack functions; these
fixtures check the other direction: files written by the ONNX project's own Python
writer (typed fields and raw_data as onnx.helper and numpy_helper emit them, and
external data as onnx.save_model lays it out). The outputs are committed; run this
again only to change them:

    python3 tests/loader/make_fixtures.py
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")


def initializers_model():
    """Initializers of several dtypes, in both encodings, feeding a small graph."""
    inits = [
        # raw_data (numpy_helper always writes raw_data)
        numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5, "w_raw"),
        numpy_helper.from_array(np.array([-128, -1, 0, 127], dtype=np.int8), "i8_raw"),
        numpy_helper.from_array(np.array([1.0, -2.0], dtype=np.float16), "f16_raw"),
        # typed fields (helper.make_tensor without raw=True)
        helper.make_tensor("b_typed", TensorProto.FLOAT, [3], [0.25, -1.5, 3.0]),
        helper.make_tensor("i64_typed", TensorProto.INT64, [2], [-(2**40), 7]),
        helper.make_tensor("u16_typed", TensorProto.UINT16, [2], [65535, 3]),
        helper.make_tensor("bool_typed", TensorProto.BOOL, [3], [True, False, True]),
        helper.make_tensor("f16_typed", TensorProto.FLOAT16, [2], np.array([1.0, -2.0], dtype=np.float16)),
        helper.make_tensor("u32_typed", TensorProto.UINT32, [2], [4000000000, 1]),
        helper.make_tensor("f64_typed", TensorProto.DOUBLE, [], [2.5]),
    ]
    nodes = [
        helper.make_node("Add", ["x", "w_raw"], ["t"], name="add0"),
        helper.make_node("Add", ["t", "b_typed"], ["y"], name="add1"),
    ]
    graph = helper.make_graph(
        nodes,
        "fixture_initializers",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3]),
            # an input with a default value: Onyx treats it as an initializer
            helper.make_tensor_value_info("b_typed", TensorProto.FLOAT, [3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        initializer=inits,
        value_info=[helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def external_model():
    """Two initializers stored in one external file by onnx.save_model."""
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "w")
    b = numpy_helper.from_array(np.array([10, 20, 30, 40], dtype=np.int64), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        "fixture_external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        initializer=[w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    os.makedirs(os.path.join(OUT, "external"), exist_ok=True)
    onnx.save_model(initializers_model(), os.path.join(OUT, "initializers.onnx"))
    data = os.path.join(OUT, "external", "weights.bin")
    if os.path.exists(data):
        os.remove(data)  # save_model appends to an existing data file
    onnx.save_model(
        external_model(),
        os.path.join(OUT, "external", "model.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=0,
    )


if __name__ == "__main__":
    main()
