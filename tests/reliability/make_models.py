"""Writes the reliability tests' small models (run once; the .onnx files are committed).

huge_input.onnx: y = Relu(x) with x declared float32 [2^32, 2^32], whose byte size
passes 2^64: onyx-run's random input for it must be refused, not allocated.
micro-decoder/: a one-layer GroupQueryAttention decoder of 16 hidden units and 32 ids
in the GenAI layout (tools/decoder/make_random_decoder.py, seed 7), small enough for
fault injection over a whole generation and as a fuzzing seed.
"""
import os
import subprocess
import sys

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

decoder = os.path.join(os.path.dirname(here), "micro-decoder")
tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "decoder")
subprocess.run([sys.executable, os.path.join(tools, "make_random_decoder.py"), "--out", decoder,
                "--hidden", "16", "--layers", "1", "--heads", "2", "--kv-heads", "1",
                "--head-dim", "8", "--mlp", "32", "--vocab", "32", "--max-length", "64",
                "--embed-data", "--seed", "7"], check=True)
os.remove(os.path.join(decoder, "model_info.json"))
