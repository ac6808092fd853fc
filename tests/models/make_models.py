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


# Workspace tests (tests/workspace): onyx.ws::Scratch nodes (y = x + 1) whose
# workspace requirement the attributes spell out, per region: name, lifetime (0 STEP,
# 1 SESSION), alignment, fixed bytes, bytes per element of x, bytes per S*S
# (S = dims[1]) and the least S whose route uses the region.
def scratch(name, regions, op="Scratch", inp="x", out=None, **extra):
    names = [r[0] for r in regions]
    cols = ["lifetime", "align", "fixed", "per_elem", "per_s2", "min_s"]
    attrs = {c: [r[1 + k] for r in regions] for k, c in enumerate(cols)}
    return helper.make_node(op, [inp], [out or name], domain="onyx.ws", name=name,
                            regions=names, **attrs, **extra)


#                 region      life align fixed elem s2 min_s
ATTN = [("q_bnsh",   0,   64,  0,    4,   0, 2),   # BNSH transpose: prefill only
        ("out_bnsh", 0,   64,  0,    4,   0, 2),
        ("scores",   0,  256,  0,    0,   8, 2),   # S*S scores, prefill only
        ("kv_stage", 1,  256,  0,    4,   0, 0)]   # persists, grows with S
PROJ = [("acc",      0, 4096,  0,    8,   0, 0),
        ("packed",   1,  128, 1000,  0,   0, 0)]
ATTN1 = [("q_bnsh",  0,   64,  0,    4,   0, 2),
         ("out_bnsh", 0,  64,  0,    4,   0, 2),
         ("kv_stage", 1,  64,  0,    8,   0, 0)]
NORM = [("tiny",     0,   16, 16,    0,   0, 0),
        ("unused",   0,   64,  0,    0,   0, 0)]  # never used: 0 bytes, NULL view


def ws_chain(name, seq, op1="Scratch", short=False):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, 8])
    extra = {"compute_extra": 8} if short else {}
    nodes = [scratch("attn_0", ATTN, inp="x", out="a0", **extra),
             scratch("proj", PROJ, op=op1, inp="a0", out="p"),
             scratch("attn_1", ATTN1, inp="p", out="a1"),
             scratch("norm", NORM, inp="a1", out="y")]
    save(helper.make_graph(nodes, name, [x], [y]), f"{name}.onnx", [("", 17), ("onyx.ws", 1)])


ws_chain("ws_chain", "S")                        # S symbolic: plans per geometry
ws_chain("ws_chain_s4", 4)                       # fixed S = 4, for onyx-run --plan
ws_chain("ws_noinfer", "S", op1="ScratchNoInfer")  # proj cannot infer: runs unplanned
ws_chain("ws_short", "S", short=True)            # attn_0 computes with more than it declared


# Host-input tests (tests/core/host_inputs_test.c) on the fake-device mock
# (tests/mock/fake_device_provider.c), whose onyx.fake ops run in "device" memory.
FAKE = [("", 17), ("onyx.fake", 1)]
xf = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
yf = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
nf = helper.make_tensor_value_info("n", TensorProto.INT64, [1])
# Scale reads input 1 on the host (host_inputs bit 1); ScaleOld's table predates the field.
for op, name in [("Scale", "fake_scale"), ("ScaleOld", "fake_scale_old")]:
    save(helper.make_graph([helper.make_node(op, ["x", "n"], ["y"], domain="onyx.fake")],
                           name, [xf, nf], [yf]), f"{name}.onnx", FAKE)
# Scale's input 1 produced on the device (Count: numel as int64): the core brings it back.
save(helper.make_graph([helper.make_node("Count", ["x"], ["c"], domain="onyx.fake"),
                        helper.make_node("Scale", ["x", "c"], ["y"], domain="onyx.fake")],
                       "fake_count_scale", [xf], [yf]), "fake_count_scale.onnx", FAKE)
# Split across cpu and the fake device: every transfer direction the executor makes.
save(helper.make_graph([helper.make_node("Twice", ["x"], ["t"], domain="onyx.fake"),
                        helper.make_node("Relu", ["t"], ["r"], name="relu"),
                        helper.make_node("Twice", ["r"], ["y"], domain="onyx.fake")],
                       "fake_split", [xf], [yf]), "fake_split.onnx", FAKE)
# A kernel that asks to write its (moved) input in place.
save(helper.make_graph([helper.make_node("Inplace", ["x"], ["y"], domain="onyx.fake")],
                       "fake_inplace", [xf], [yf]), "fake_inplace.onnx", FAKE)

# Device graphs (tests/core/graph_capture_test.c): a step whose host side is shape
# arithmetic (Shape on cpu, read by Scale as a host input) and whose device side
# writes a device buffer in place (Inplace on the writable input kv).
kvf = helper.make_tensor_value_info("kv", TensorProto.FLOAT, [2, 3])
kvo = helper.make_tensor_value_info("kv_out", TensorProto.FLOAT, [2, 3])
save(helper.make_graph([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                        helper.make_node("Twice", ["x"], ["t"], domain="onyx.fake"),
                        helper.make_node("Scale", ["t", "s"], ["y"], domain="onyx.fake"),
                        helper.make_node("Inplace", ["kv"], ["kv_out"], domain="onyx.fake")],
                       "fake_graph", [xf, kvf], [yf, kvo]), "fake_graph.onnx", FAKE)
# A kernel that a capture cannot record.
save(helper.make_graph([helper.make_node("Twice", ["x"], ["t"], domain="onyx.fake"),
                        helper.make_node("Legacy", ["t"], ["y"], domain="onyx.fake",
                                         name="legacy")],
                       "fake_legacy", [xf], [yf]), "fake_legacy.onnx", FAKE)
# Weights read by a device kernel: copied to the device when the session is created.
wf = helper.make_tensor("w", TensorProto.FLOAT, [64, 64], [0.25 * ((i % 7) - 3) for i in range(4096)])
save(helper.make_graph([helper.make_node("Twice", ["w"], ["y"], domain="onyx.fake")],
                       "fake_weights", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])],
                       initializer=[wf]), "fake_weights.onnx", FAKE)

# Two devices of one v3 provider (tests/core/two_devices_test.c, the fake device built
# as a v3 factory): Triple exists on fake device 1 only, so the chain crosses from
# device 0 to device 1 and back; the last Twice is pinned to device 1 by its `device`
# attribute, which device 0's Twice declines.
save(helper.make_graph([helper.make_node("Twice", ["x"], ["a"], domain="onyx.fake", name="twice_a"),
                        helper.make_node("Triple", ["a"], ["b"], domain="onyx.fake", name="triple"),
                        helper.make_node("Twice", ["b"], ["c"], domain="onyx.fake", name="twice_c"),
                        helper.make_node("Twice", ["c"], ["y"], domain="onyx.fake", name="twice_y",
                                         device=1)],
                       "fake_two_devices", [xf], [yf]), "fake_two_devices.onnx", FAKE)
# A kernel whose infer refuses the geometry and says why through its v3 sink.
xd = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
save(helper.make_graph([helper.make_node("Picky", ["x"], ["y"], domain="onyx.fake", name="picky")],
                       "fake_picky", [xd], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
     "fake_picky.onnx", FAKE)
# A node pinned to fake device 1: with device 0 alone its Twice declines, saying why.
save(helper.make_graph([helper.make_node("Twice", ["x"], ["y"], domain="onyx.fake", name="pinned",
                                         device=1)],
                       "fake_pinned", [xf], [yf]), "fake_pinned.onnx", FAKE)
# One initializer read on two devices (Twice on fake:0, Triple on fake:1): a copy on each.
save(helper.make_graph([helper.make_node("Twice", ["w"], ["y0"], domain="onyx.fake"),
                        helper.make_node("Triple", ["w"], ["y1"], domain="onyx.fake")],
                       "fake_shared_weights", [],
                       [helper.make_tensor_value_info("y0", TensorProto.FLOAT, [64, 64]),
                        helper.make_tensor_value_info("y1", TensorProto.FLOAT, [64, 64])],
                       initializer=[wf]), "fake_shared_weights.onnx", FAKE)
