#!/usr/bin/env python3
"""Models with model-local functions (FunctionProto), written with onnx.helper.

Without arguments, writes the fixtures of tests/loader/test_model_functions.c and
test_function_sessions.c into tests/loader/fixtures/functions/ (committed; run again
only to change them):

    python3 tests/loader/make_function_fixtures.py

With --parity OUT, writes ONNX test directories (model.onnx + test_data_set_0/) for the
models that run, with fresh random inputs and ONNX Runtime's outputs, for onyx-run to
compare (tests/loader/function_parity.sh):

    python3 tests/loader/make_function_fixtures.py --parity /tmp/cases
"""
import argparse
import os
import time

import numpy as np
import onnx
from onnx import AttributeProto as A
from onnx import TensorProto as T
from onnx import helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "functions")
LOCAL = "local"


def ref(name, attr_type, ref_attr_name):
    """A body node's attribute that takes the value of the function's `ref_attr_name`."""
    return helper.make_attribute_ref(name, attr_type, ref_attr_name=ref_attr_name)


def node(op, inputs, outputs, name, domain=None, refs=(), overload=None, **attrs):
    n = helper.make_node(op, inputs, outputs, name=name, domain=domain, overload=overload, **attrs)
    n.attribute.extend(refs)
    return n


def vi(name, shape, dtype=T.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def init(name, shape, rng):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def model(nodes, inputs, outputs, functions, opsets, inits=(), ir=9, check=True):
    graph = helper.make_graph(nodes, "functions", inputs, outputs, initializer=list(inits))
    m = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
        functions=functions,
    )
    m.ir_version = ir
    if check:
        onnx.checker.check_model(m)
    return m


# ----------------------------------------------------------------- runnable models


def twice(rng):
    """local::Affine called twice; a graph input already holds the name the first
    call's internal value would get, so inlining must pick another."""
    affine = helper.make_function(
        LOCAL,
        "Affine",
        ["x", "w", "b"],
        ["y", "t"],
        [
            node("Mul", ["x", "w"], ["p"], "mul"),
            node("Add", ["p", "b"], ["y"], "add"),
            node("Neg", ["p"], ["t"], "neg"),
        ],
        [helper.make_opsetid("", 18)],
        value_info=[vi("p", [2, 3])],
    )
    nodes = [
        node("Affine", ["x", "w0", "b0"], ["y0", ""], "c0", domain=LOCAL),
        node("Affine", ["y0", "w1", "b1"], ["y1", "t1"], "c1", domain=LOCAL),
        node("Add", ["y1", "c0/Affine/t"], ["z"], "tail"),
    ]
    inits = [init(n, [3], rng) for n in ("w0", "b0", "w1", "b1")]
    return model(
        nodes,
        [vi("x", [2, 3]), vi("c0/Affine/t", [2, 3])],
        [vi("z", [2, 3]), vi("t1", [2, 3])],
        [affine],
        [("", 18), (LOCAL, 1)],
        inits,
        ir=10,
    )


def attrs(rng):
    """local::Lin = Gemm with alpha from the call, beta from the function's default
    unless the call sets it, and transB omitted unless the call sets it."""
    gemm = node(
        "Gemm",
        ["a", "b", "c"],
        ["y"],
        "gemm",
        refs=[
            ref("alpha", A.FLOAT, "alpha"),
            ref("beta", A.FLOAT, "beta"),
            ref("transB", A.INT, "tb"),
        ],
    )
    lin = helper.make_function(
        LOCAL,
        "Lin",
        ["a", "b", "c"],
        ["y"],
        [gemm],
        [helper.make_opsetid("", 13)],
        attributes=["alpha", "tb"],
        attribute_protos=[helper.make_attribute("beta", 0.25)],
    )
    nodes = [
        node("Lin", ["a", "b0", "c0"], ["y0"], "c0", domain=LOCAL, alpha=2.0),
        node("Lin", ["y0", "b1", "c1"], ["y1"], "c1", domain=LOCAL, alpha=0.5, beta=3.0, tb=1),
    ]
    shapes = {"b0": [3, 4], "c0": [4], "b1": [5, 4], "c1": [5]}
    inits = [init(name, shape, rng) for name, shape in shapes.items()]
    return model(nodes, [vi("a", [2, 3])], [vi("y1", [2, 5])], [lin], [("", 18), (LOCAL, 1)], inits)


def nested(rng):
    """local::Outer calls local::Mid calls local::Inner; the Softmax axis is forwarded
    through two levels of attribute references."""
    inner = helper.make_function(
        LOCAL,
        "Inner",
        ["x"],
        ["y"],
        [node("Softmax", ["x"], ["y"], "softmax", refs=[ref("axis", A.INT, "axis")])],
        [helper.make_opsetid("", 18)],
        attributes=["axis"],
    )
    mid = helper.make_function(
        LOCAL,
        "Mid",
        ["x"],
        ["y"],
        [
            node("Inner", ["x"], ["s"], "inner", domain=LOCAL, refs=[ref("axis", A.INT, "axis")]),
            node("Add", ["s", "x"], ["y"], "add"),
        ],
        [helper.make_opsetid("", 18), helper.make_opsetid(LOCAL, 1)],
        attributes=["axis"],
    )
    outer = helper.make_function(
        LOCAL,
        "Outer",
        ["x"],
        ["y"],
        [
            node("Mid", ["x"], ["m"], "mid", domain=LOCAL, refs=[ref("axis", A.INT, "ax")]),
            node("Mul", ["m", "m"], ["y"], "square"),
        ],
        [helper.make_opsetid("", 18), helper.make_opsetid(LOCAL, 1)],
        attributes=["ax"],
    )
    nodes = [node("Outer", ["x"], ["y"], "c0", domain=LOCAL, ax=0)]
    functions = [inner, mid, outer]
    return model(nodes, [vi("x", [3, 4])], [vi("y", [3, 4])], functions, [("", 18), (LOCAL, 1)])


def own_opset(rng):
    """The function imports ai.onnx 13 (the model 18) and com.microsoft, which the
    model does not import: its body nodes bind to the function's imports."""
    soft = helper.make_function(
        LOCAL,
        "SoftGelu",
        ["x"],
        ["y"],
        [
            node("Softmax", ["x"], ["s"], "softmax", axis=-1),
            node("FastGelu", ["s"], ["y"], "gelu", domain="com.microsoft"),
        ],
        [helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
    )
    nodes = [node("SoftGelu", ["x"], ["y"], "c0", domain=LOCAL)]
    opsets = [("", 18), (LOCAL, 1)]
    return model(nodes, [vi("x", [2, 5])], [vi("y", [2, 5])], [soft], opsets, check=False)


def overload(rng):
    """Two bodies of local::Scale told apart by overload (IR 10)."""
    double = helper.make_function(
        LOCAL, "Scale", ["x"], ["y"], [node("Add", ["x", "x"], ["y"], "add")],
        [helper.make_opsetid("", 18)], overload="double")
    square = helper.make_function(
        LOCAL, "Scale", ["x"], ["y"], [node("Mul", ["x", "x"], ["y"], "mul")],
        [helper.make_opsetid("", 18)], overload="square")
    nodes = [
        node("Scale", ["x"], ["d"], "c0", domain=LOCAL, overload="double"),
        node("Scale", ["d"], ["y"], "c1", domain=LOCAL, overload="square"),
    ]
    opsets = [("", 18), (LOCAL, 1)]
    return model(nodes, [vi("x", [4])], [vi("y", [4])], [double, square], opsets, ir=10)


def skip_function(domain, name):
    """The body mobius ships for com.microsoft::SkipSimplifiedLayerNormalization: the
    residual sum at output 3, placeholders for the training-only outputs 1 and 2."""
    return helper.make_function(
        domain,
        name,
        ["input", "skip", "weight"],
        ["norm_out", "mean", "inv_std_var", "add_out"],
        [
            node("Add", ["input", "skip"], ["add_out"], "add"),
            node("RMSNormalization", ["add_out", "weight"], ["norm_out"], "rms",
                 refs=[ref("epsilon", A.FLOAT, "epsilon")]),
            node("Constant", [], ["mean"], "mean", value_floats=[0.0]),
            node("Constant", [], ["inv_std_var"], "inv_std", value_floats=[0.0]),
        ],
        [helper.make_opsetid("", 23)],
        attribute_protos=[helper.make_attribute("epsilon", 1e-5)],
    )


def skip_model(domain, name, rng):
    nodes = [
        node(name, ["input", "skip", "weight"], ["out", "", "", "sum"], "sk0", domain=domain,
             epsilon=1e-6),
        node("Add", ["out", "sum"], ["z"], "tail"),
    ]
    opsets = [("", 23), (domain, 1)]
    return model(nodes, [vi("input", [2, 3, 8]), vi("skip", [2, 3, 8])], [vi("z", [2, 3, 8])],
                 [skip_function(domain, name)], opsets, [init("weight", [8], rng)], ir=10)


def skip_claimed(rng):
    """The CPU provider claims com.microsoft::SkipSimplifiedLayerNormalization: kept."""
    return skip_model("com.microsoft", "SkipSimplifiedLayerNormalization", rng)


def skip_inlined(rng):
    """The same body under a name no provider claims: inlined."""
    return skip_model(LOCAL, "SkipRms", rng)


RUNNABLE = [twice, attrs, nested, own_opset, overload, skip_claimed, skip_inlined]

# ----------------------------------------------------------------- models for errors


def missing_attr(rng):
    """local::ToType casts to its attribute `dtype`, which has no default and which
    the call does not set: the Cast loses `to`, which it requires."""
    cast = node("Cast", ["x"], ["y"], "cast", refs=[ref("to", A.INT, "dtype")])
    fn = helper.make_function(LOCAL, "ToType", ["x"], ["y"], [cast], [helper.make_opsetid("", 18)],
                              attributes=["dtype"])
    nodes = [node("ToType", ["x"], ["y"], "c0", domain=LOCAL)]
    return model(nodes, [vi("x", [2])], [vi("y", [2])], [fn], [("", 18), (LOCAL, 1)], check=False)


def recursion(rng):
    """local::Ping calls local::Pong, which calls local::Ping."""
    imports = [helper.make_opsetid("", 18), helper.make_opsetid(LOCAL, 1)]
    ping = helper.make_function(LOCAL, "Ping", ["x"], ["y"],
                                [node("Pong", ["x"], ["y"], "pong", domain=LOCAL)], imports)
    pong = helper.make_function(LOCAL, "Pong", ["x"], ["y"],
                                [node("Relu", ["x"], ["r"], "relu"),
                                 node("Ping", ["r"], ["y"], "ping", domain=LOCAL)], imports)
    nodes = [node("Ping", ["x"], ["y"], "c0", domain=LOCAL)]
    opsets = [("", 18), (LOCAL, 1)]
    return model(nodes, [vi("x", [2])], [vi("y", [2])], [ping, pong], opsets, check=False)


def subgraph_body(domain, name):
    """A body with an If: Onyx cannot represent its subgraphs."""
    identity = helper.make_node("Identity", ["x"], ["o"])
    branch = helper.make_graph([identity], "branch", [], [vi("o", [2])])
    return helper.make_function(
        domain, name, ["c", "x"], ["y"],
        [node("If", ["c"], ["y"], "if", then_branch=branch, else_branch=branch)],
        [helper.make_opsetid("", 18)])


def unusable(rng):
    """A function Onyx cannot inline, defined but not called: the model still runs."""
    nodes = [node("Relu", ["x"], ["y"], "relu")]
    return model(nodes, [vi("x", [2])], [vi("y", [2])], [subgraph_body(LOCAL, "Branchy")],
                 [("", 18), (LOCAL, 1)], check=False)


def unusable_called(rng):
    """The same function called: inlining must refuse, saying why."""
    nodes = [node("Branchy", ["c", "x"], ["y"], "c0", domain=LOCAL)]
    return model(nodes, [vi("c", [], T.BOOL), vi("x", [2])], [vi("y", [2])],
                 [subgraph_body(LOCAL, "Branchy")], [("", 18), (LOCAL, 1)], check=False)


def simple_function(name="F", nodes=None, inputs=("x",), outputs=("y",), attributes=None,
                    opsets=(("", 18),), overload=None):
    nodes = nodes if nodes is not None else [node("Relu", ["x"], ["y"], "relu")]
    return helper.make_function(LOCAL, name, list(inputs), list(outputs), nodes,
                                [helper.make_opsetid(d, v) for d, v in opsets],
                                attributes=attributes, overload=overload)


def calling(functions, call=None, ir=9):
    call = call if call is not None else node("F", ["x"], ["y"], "c0", domain=LOCAL)
    return model([call], [vi("x", [2])], [vi("y", [2])], functions, [("", 18), (LOCAL, 1)],
                 ir=ir, check=False)


def bad_undefined(rng):
    return calling([simple_function(nodes=[node("Add", ["x", "ghost"], ["y"], "add")])])


def bad_duplicate(rng):
    return calling([simple_function(), simple_function()])


def bad_ref(rng):
    body = [node("Softmax", ["x"], ["y"], "softmax", refs=[ref("axis", A.INT, "nope")])]
    return calling([simple_function(nodes=body, attributes=["axis"])])


def bad_output(rng):
    return calling([simple_function(outputs=("y", "never"))])


def bad_overload(rng):
    call = node("F", ["x"], ["y"], "c0", domain=LOCAL, overload="zzz")
    return calling([simple_function()], call, ir=10)


def bad_opset(rng):
    body = [node("Mystery", ["x"], ["y"], "mystery", domain="other")]
    return calling([simple_function(nodes=body)])


def bad_attr_type(rng):
    body = [node("Softmax", ["x"], ["y"], "softmax", refs=[ref("axis", A.INT, "axis")])]
    call = node("F", ["x"], ["y"], "c0", domain=LOCAL, axis=1.5)
    return calling([simple_function(nodes=body, attributes=["axis"])], call)


def bad_arity(rng):
    call = node("F", ["x", "x"], ["y"], "c0", domain=LOCAL)
    return calling([simple_function()], call)


ERRORS = [missing_attr, recursion, unusable, unusable_called, bad_undefined, bad_duplicate,
          bad_ref, bad_output, bad_overload, bad_opset, bad_attr_type, bad_arity]


def write_fixtures():
    os.makedirs(OUT, exist_ok=True)
    for make in RUNNABLE + ERRORS:
        rng = np.random.default_rng(7)
        onnx.save_model(make(rng), os.path.join(OUT, make.__name__ + ".onnx"))


def write_parity(out, seed):
    """One ONNX test directory per runnable model: fresh random inputs and weights,
    ONNX Runtime's outputs."""
    import onnxruntime as ort

    rng = np.random.default_rng(seed)
    for make in RUNNABLE:
        m = make(rng)
        inits = {t.name for t in m.graph.initializer}
        feeds = {}
        for i in m.graph.input:
            if i.name in inits:
                continue
            shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        results = session.run(None, feeds)
        case = os.path.join(out, make.__name__)
        data = os.path.join(case, "test_data_set_0")
        os.makedirs(data, exist_ok=True)
        onnx.save_model(m, os.path.join(case, "model.onnx"))
        for k, (name, value) in enumerate(feeds.items()):
            tensor = numpy_helper.from_array(value, name)
            with open(os.path.join(data, "input_%d.pb" % k), "wb") as f:
                f.write(tensor.SerializeToString())
        for k, (o, value) in enumerate(zip(m.graph.output, results)):
            tensor = numpy_helper.from_array(value, o.name)
            with open(os.path.join(data, "output_%d.pb" % k), "wb") as f:
                f.write(tensor.SerializeToString())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parity", metavar="OUT", help="write ONNX test directories here")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: the clock)")
    args = parser.parse_args()
    if args.parity:
        seed = args.seed if args.seed is not None else time.time_ns() % (2**32)
        print("seed %d" % seed)
        write_parity(args.parity, seed)
    else:
        write_fixtures()


if __name__ == "__main__":
    main()
