#!/usr/bin/env python3
"""ONNX Runtime parity and ONNX node-test conformance for a device provider.

  make_op_models.py parity --onyx-run BIN --config INI --out DIR [--seed N]
      Writes one ONNX test directory per (op case, dtype) under DIR — model.onnx plus
      test_data_set_0 with fresh random non-zero inputs and the expected outputs —
      and runs them with `onyx-run --conformance` under INI (which should be strict,
      so that every node must run on the provider under test). Expected outputs come
      from ONNX Runtime (CPU), or from the ONNX reference evaluator when ONNX Runtime
      lacks the op; float16/bfloat16 cases are computed in float32 from the rounded
      inputs and rounded once at the end, int32/int64/bool cases (those that list
      them) exactly in their own type. Every case must be claimed and pass.

  make_op_models.py conformance --onyx-run BIN --config INI --dir NODE_TESTS [--skip F]
      Runs the ONNX backend node tests under INI; tests whose nodes the strict config
      cannot place are counted as not claimed, the rest must pass.

Exit status 77 (a CTest skip) with a "skipped: ..." line when there is no CUDA device
or a Python module is missing.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

SKIP = 77


def skip(why):
    print(f"skipped: {why}")
    sys.exit(SKIP)


def run_onyx(onyx_run, config, args):
    cmd = [onyx_run, "--config", config, "-q", "--conformance"] + args
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout
    if "no CUDA device" in out and "declined" in out:
        print(out)
        skip("no CUDA device (the provider declined; see above)")
    failed_lines = [l for l in out.splitlines() if "FAIL" in l or "error" in l.lower()]
    print("\n".join(failed_lines[:200]))
    summary = [l for l in out.splitlines() if re.match(r"^(conformance:|\d+ passed)", l)]
    print("\n".join(summary), flush=True)
    m = re.search(r"(\d+) passed, (\d+) failed", out)
    u = re.search(r"conformance: (\d+) not claimed", out)
    passed, failed = (int(m.group(1)), int(m.group(2))) if m else (0, -1)
    unclaimed = int(u.group(1)) if u else 0
    return proc.returncode, passed, failed, unclaimed, out


# ---------------------------------------------------------------- parity cases

FLOAT_DTYPES = ("float32", "float16", "bfloat16")
INT_DTYPES = ("int32", "int64")
EXACT_DTYPES = INT_DTYPES + ("bool",)  # computed and compared exactly
# TensorProto.DataType values for Cast's `to` (build_cases runs without onnx imported).
TO_FLOAT, TO_INT32, TO_INT64, TO_BOOL, TO_FLOAT16 = 1, 6, 7, 9, 10


def build_cases(np):
    """(name, opset, nodes, inputs, initializers, outputs, dtypes).

    nodes: list of (op, domain, inputs, outputs, attrs)
    inputs: list of (name, shape, lo, hi) or (name, shape, lo, hi, "nonzero") —
            inputs of the case dtype; an integer dtype takes the uniform draw
            rounded to the nearest integer (bool: to 0 or 1, then non-zero is
            true); "nonzero" moves draws in (-0.5, 0.5) to +-1 so that even the
            rounded value is never 0 (divisors)
    initializers: list of (name, numpy array) — int, bool and float16 arrays stay
                  as they are, float32 arrays are converted to the case dtype
    outputs: list of (name, kind) — kind 'T' (case dtype), 'f32', 'f16', 'i32',
             'i64' or 'bool'
    dtypes: the case dtypes it runs in (keys of write_cases' table), by default
            the float ones
    """
    cases = []

    def add(name, opset, nodes, inputs, outputs, inits=(), dtypes=FLOAT_DTYPES):
        cases.append((name, opset, nodes, inputs, list(inits), outputs, tuple(dtypes)))

    def n(op, ins, outs, domain="", **attrs):
        return (op, domain, ins, outs, attrs)

    a4, b2 = [2, 3, 4, 5], [4, 1]
    for op in ["Add", "Sub", "Mul", "Div"]:
        add(f"{op.lower()}_bcast", 14, [n(op, ["a", "b"], ["y"])],
            [("a", a4, -2, 2), ("b", b2, 0.5, 2)], [("y", "T")])
        add(f"{op.lower()}_bcast_left", 14, [n(op, ["b", "a"], ["y"])],
            [("a", a4, 0.5, 2), ("b", b2, -2, 2)], [("y", "T")])
    add("pow_positive", 15, [n("Pow", ["a", "b"], ["y"])],
        [("a", [3, 4], 0.5, 2), ("b", [4], -2, 2)], [("y", "T")])
    add("pow_int_exponent", 15, [n("Pow", ["a", "e"], ["y"])],
        [("a", [3, 4], -2, 2)], [("y", "T")], [("e", np.array([2], dtype=np.int64))])
    for op, lo, hi in [("Neg", -3, 3), ("Sqrt", 0.01, 4), ("Sigmoid", -6, 6), ("Tanh", -3, 3),
                       ("Relu", -2, 2), ("Erf", -2, 2)]:
        add(op.lower(), 13, [n(op, ["x"], ["y"])], [("x", [2, 3, 33], lo, hi)], [("y", "T")])
    add("equal_where", 16,
        [n("Relu", ["a"], ["r"]), n("Equal", ["a", "r"], ["c"]), n("Where", ["c", "x", "z"], ["y"])],
        [("a", [4, 6], -2, 2), ("x", [4, 6], -2, 2), ("z", [6], -2, 2)], [("y", "T")])
    add("equal_bool_out", 13, [n("Relu", ["a"], ["r"]), n("Equal", ["r", "a"], ["y"])],
        [("a", [5, 7], -2, 2)], [("y", "bool")])

    mm = [("fold", [2, 3, 8, 16], [16, 12]), ("strided", [3, 8, 16], [3, 16, 12]),
          ("stride0", [8, 16], [2, 3, 16, 12]), ("loop", [2, 1, 4, 8], [1, 3, 8, 6]),
          ("vec_a", [16], [2, 16, 5]), ("vec_b", [4, 16], [16]),
          ("decode", [1, 512], [512, 256]), ("prefill", [128, 256], [256, 192])]
    for tag, sa, sb in mm:
        add(f"matmul_{tag}", 13, [n("MatMul", ["a", "b"], ["y"])],
            [("a", sa, -1, 1), ("b", sb, -1, 1)], [("y", "T")])
    rng = np.random.default_rng(5)
    add("gemm_transb_bias", 13,
        [n("Gemm", ["a", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)],
        [("a", [10, 24], -1, 1)], [("y", "T")],
        [("w", rng.uniform(-1, 1, (7, 24)).astype(np.float32)),
         ("c", rng.uniform(-1, 1, (7,)).astype(np.float32))])
    add("gemm_transa_colbias", 13, [n("Gemm", ["a", "w", "c"], ["y"], transA=1)],
        [("a", [24, 10], -1, 1)], [("y", "T")],
        [("w", rng.uniform(-1, 1, (24, 7)).astype(np.float32)),
         ("c", rng.uniform(-1, 1, (10, 1)).astype(np.float32))])

    for axis in [-1, 1, 0]:
        add(f"softmax_axis{axis}", 13, [n("Softmax", ["x"], ["y"], axis=axis)],
            [("x", [2, 5, 37], -4, 4)], [("y", "T")])
    add("softmax_opset11_axis1", 11, [n("Softmax", ["x"], ["y"], axis=1)],
        [("x", [2, 5, 7], -4, 4)], [("y", "T")])
    add("softmax_wide", 13, [n("Softmax", ["x"], ["y"])], [("x", [3, 3000], -8, 8)], [("y", "T")])

    w64 = lambda lo, hi: rng.uniform(lo, hi, (64,)).astype(np.float32)
    add("layernorm", 17,
        [n("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv"], axis=-1, epsilon=1e-5)],
        [("x", [2, 5, 64], -3, 3)], [("y", "T"), ("mean", "f32"), ("inv", "f32")],
        [("s", w64(0.5, 1.5)), ("b", w64(-0.5, 0.5))])
    add("layernorm_axis1", 17,
        [n("LayerNormalization", ["x", "s"], ["y"], axis=1)],
        [("x", [3, 4, 16], -3, 3)], [("y", "T")],
        [("s", rng.uniform(0.5, 1.5, (4, 16)).astype(np.float32))])
    add("rmsnorm", 23, [n("RMSNormalization", ["x", "s"], ["y"], epsilon=1e-6)],
        [("x", [2, 5, 64], -3, 3)], [("y", "T")], [("s", w64(0.5, 1.5))])
    add("simplified_layernorm", 17,
        [n("SimplifiedLayerNormalization", ["x", "s"], ["y", "inv"], epsilon=1e-6)],
        [("x", [2, 5, 64], -3, 3)], [("y", "T"), ("inv", "f32")], [("s", w64(0.5, 1.5))])
    add("skip_simplified_layernorm", 17,
        [n("SkipSimplifiedLayerNormalization", ["x", "k", "g", "bias"],
           ["y", "mean", "inv", "sum"], domain="com.microsoft", epsilon=1e-6)],
        [("x", [2, 5, 64], -3, 3), ("k", [2, 5, 64], -3, 3)],
        [("y", "T"), ("mean", "f32"), ("inv", "f32"), ("sum", "T")],
        [("g", w64(0.5, 1.5)), ("bias", w64(-0.5, 0.5))])
    add("skip_simplified_layernorm_bcast_skip", 17,
        [n("SkipSimplifiedLayerNormalization", ["x", "k", "g"], ["y", "", "", "sum"],
           domain="com.microsoft", epsilon=1e-6)],
        [("x", [2, 5, 64], -3, 3), ("k", [5, 64], -3, 3)], [("y", "T"), ("sum", "T")],
        [("g", w64(0.5, 1.5))])

    pos = np.array([[0, 1, 2, 3, 4], [7, 8, 9, 10, 31]], dtype=np.int64)
    table = lambda rows, half: rng.uniform(-1, 1, (rows, half)).astype(np.float32)
    for inter in [0, 1]:
        add(f"rotary_bnsh_interleaved{inter}", 23,
            [n("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], interleaved=inter)],
            [("x", [2, 3, 5, 16], -2, 2)], [("y", "T")],
            [("cos", table(32, 8)), ("sin", table(32, 8)), ("pos", pos)])
    add("rotary_3d_partial", 23,
        [n("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], num_heads=3,
           rotary_embedding_dim=8)],
        [("x", [2, 5, 48], -2, 2)], [("y", "T")],
        [("cos", table(32, 4)), ("sin", table(32, 4)), ("pos", pos)])
    add("ms_rotary_3d", 17,
        [n("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain="com.microsoft",
           num_heads=3, interleaved=0)],
        [("x", [2, 5, 48], -2, 2)], [("y", "T")],
        [("pos", pos), ("cos", table(32, 8)), ("sin", table(32, 8))])
    add("ms_rotary_offset", 17,
        [n("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain="com.microsoft",
           interleaved=1)],
        [("x", [1, 2, 4, 16], -2, 2)], [("y", "T")],
        [("pos", np.array([5], dtype=np.int64)), ("cos", table(16, 8)), ("sin", table(16, 8))])

    i64 = lambda *v: np.array(v, dtype=np.int64)
    add("gather_axis0", 13, [n("Gather", ["x", "i"], ["y"])], [("x", [10, 6], -1, 1)],
        [("y", "T")], [("i", np.array([[1, 9], [0, -1]], dtype=np.int64))])
    add("gather_axis1_int32", 13, [n("Gather", ["x", "i"], ["y"], axis=1)],
        [("x", [4, 10, 3], -1, 1)], [("y", "T")], [("i", np.array([5, 0, 2], dtype=np.int32))])
    add("reshape", 14, [n("Reshape", ["x", "s"], ["y"])], [("x", [2, 3, 4], -1, 1)],
        [("y", "T")], [("s", i64(0, -1))])
    add("transpose", 13, [n("Transpose", ["x"], ["y"], perm=[0, 2, 1, 3])],
        [("x", [2, 3, 4, 5], -1, 1)], [("y", "T")])
    add("transpose_default", 13, [n("Transpose", ["x"], ["y"])], [("x", [2, 3, 4], -1, 1)],
        [("y", "T")])
    add("concat_axis1", 13, [n("Concat", ["a", "b", "a"], ["y"], axis=1)],
        [("a", [2, 3, 4], -1, 1), ("b", [2, 5, 4], -1, 1)], [("y", "T")])
    add("concat_axis_last", 13, [n("Concat", ["a", "b"], ["y"], axis=-1)],
        [("a", [3, 2], -1, 1), ("b", [3, 5], -1, 1)], [("y", "T")])
    add("slice_steps", 13, [n("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
        [("x", [5, 6], -1, 1)], [("y", "T")],
        [("st", i64(1, -1)), ("en", i64(4, -10)), ("ax", i64(0, 1)), ("sp", i64(1, -2))])
    add("slice_end_max", 13, [n("Slice", ["x", "st", "en"], ["y"])], [("x", [4, 7], -1, 1)],
        [("y", "T")], [("st", i64(1, 2)), ("en", i64(2**62, 5))])
    add("unsqueeze", 13, [n("Unsqueeze", ["x", "ax"], ["y"])], [("x", [2, 3, 4], -1, 1)],
        [("y", "T")], [("ax", i64(0, 3))])
    add("squeeze", 13, [n("Squeeze", ["x", "ax"], ["y"])], [("x", [2, 1, 4], -1, 1)],
        [("y", "T")], [("ax", i64(1))])
    add("squeeze_all", 13, [n("Squeeze", ["x"], ["y"])], [("x", [1, 3, 1, 4], -1, 1)],
        [("y", "T")])
    add("identity", 13, [n("Identity", ["x"], ["y"])], [("x", [2, 3, 4], -1, 1)], [("y", "T")])
    add("expand", 13, [n("Expand", ["x", "s"], ["y"])], [("x", [3, 1], -1, 1)], [("y", "T")],
        [("s", i64(2, 3, 4))])
    add("chain", 17,
        [n("SkipSimplifiedLayerNormalization", ["x", "r", "g"], ["h", "", "", "res"],
           domain="com.microsoft", epsilon=1e-6),
         n("MatMul", ["h", "w1"], ["p"]), n("Softmax", ["p"], ["s"]),
         n("MatMul", ["s", "w2"], ["o"]), n("Add", ["o", "res"], ["y"])],
        [("x", [1, 7, 64], -1, 1), ("r", [1, 7, 64], -1, 1)], [("y", "T")],
        [("g", w64(0.5, 1.5)), ("w1", rng.uniform(-0.2, 0.2, (64, 64)).astype(np.float32)),
         ("w2", rng.uniform(-0.2, 0.2, (64, 64)).astype(np.float32))])

    # ReduceSum in every dtype it claims. Inputs lean positive so that no float sum
    # lands near zero, where float32 accumulation order would dominate the tolerance.
    # Sums of up to 32 elements run one thread per output, longer ones one block per
    # output: the cases cover both, with one and several reduced axes.
    all_t = FLOAT_DTYPES + INT_DTYPES

    def rsum(name, opset, shape, axes=None, lo=-4, hi=16, **attrs):
        ins, inits = ["x"], []
        if axes is not None and opset >= 13:
            ins.append("ax")
            inits.append(("ax", np.array(axes, dtype=np.int64)))
        elif axes is not None:
            attrs["axes"] = list(axes)
        add(f"reduce_sum_{name}", opset, [n("ReduceSum", ins, ["y"], **attrs)],
            [("x", shape, lo, hi)], [("y", "T")], inits, all_t)

    rsum("axis1_keepdims", 13, [3, 40, 5], [1])
    rsum("last_axis_long", 13, [4, 6, 300], [-1], keepdims=0)
    rsum("last_axis_short", 13, [512, 3], [1], keepdims=0)
    rsum("axis0_strided", 13, [64, 48], [0])
    rsum("two_axes_block", 13, [6, 20, 3, 30], [1, 3], keepdims=0)
    rsum("two_axes_thread", 13, [2, 3, 4, 5], [0, 2])
    rsum("negative_axes", 13, [3, 4, 5, 6], [-3, -1])
    rsum("adjacent_axes", 13, [2, 5, 7, 3], [1, 2], keepdims=0)
    rsum("size1_axes", 13, [4, 1, 9, 1], [1, 3])
    rsum("all_default", 13, [5, 7, 9])
    rsum("all_default_no_keepdims", 13, [4, 33], keepdims=0)
    rsum("empty_axes_all", 13, [3, 50], [])
    rsum("empty_axes_noop", 13, [3, 5, 2], [], noop_with_empty_axes=1)
    rsum("opset11_axes_attr", 11, [3, 4, 50], [0, 2], keepdims=0)
    rsum("opset11_all", 11, [6, 70])
    rsum("rank1", 13, [1000], [0], keepdims=0)
    # The decoder's attention-mask sum: an int64 (batch, T) mask of 0s and 1s summed
    # over T without keepdims (the total length of each row).
    for b, t in [(1, 77), (2, 300)]:
        add(f"reduce_sum_attention_mask_{b}x{t}", 13,
            [n("ReduceSum", ["mask", "ax"], ["y"], keepdims=0)], [("mask", [b, t], 0, 1)],
            [("y", "T")], [("ax", i64(1))], ("int64",))

    # Integer Add Sub Mul Div, exact in the case dtype, on the float path's broadcast
    # walk; Div truncates toward zero (negative operands on both sides). Divisors are
    # drawn non-zero: division by zero is undefined in ONNX Runtime.
    for op in ["Add", "Sub", "Mul", "Div"]:
        o = op.lower()
        add(f"{o}_int_bcast_3d", 14, [n(op, ["a", "b"], ["y"])],
            [("a", [3, 1, 4], -60, 60), ("b", [1, 5, 4], -9, 9, "nonzero")], [("y", "T")],
            dtypes=INT_DTYPES)
        add(f"{o}_int_bcast_left", 14, [n(op, ["b", "a"], ["y"])],
            [("a", [4, 1], -9, 9, "nonzero"), ("b", [2, 3, 4, 5], -60, 60)], [("y", "T")],
            dtypes=INT_DTYPES)
        add(f"{o}_int_scalar_init", 14, [n(op, ["a", "k"], ["y"])],
            [("a", [1, 7], -60, 60)], [("y", "T")], [("k", np.array(-3, dtype=np.float32))],
            INT_DTYPES)
        add(f"{o}_int_scalar_input", 14, [n(op, ["a", "k"], ["y"])],
            [("a", [1, 7], -60, 60), ("k", [], -9, 9, "nonzero")], [("y", "T")],
            dtypes=INT_DTYPES)
        add(f"{o}_int_long", 14, [n(op, ["a", "b"], ["y"])],
            [("a", [3, 700], -1000, 1000), ("b", [700], -40, 40, "nonzero")], [("y", "T")],
            dtypes=INT_DTYPES)
    # int64 beyond int32's range: exact where a float would round, then Cast to int32
    # keeps the low 32 bits (a C cast, as ONNX Runtime does).
    big = np.array([2**33 + 5, -(2**40) - 7, 2**53 + 1, 3, -(2**31) - 1, 2**31, 77],
                   dtype=np.int64)
    add("add_int64_big_cast_int32", 14,
        [n("Add", ["a", "k"], ["s"]), n("Mul", ["s", "m"], ["p"]),
         n("Cast", ["p"], ["y"], to=TO_INT32)],
        [("a", [2, 7], -60, 60)], [("y", "i32")],
        [("k", big), ("m", np.array([3], dtype=np.int64))], ("int64",))

    # The decoder's seqlens_k: Cast(Sub(ReduceSum(mask int64, axis 1), 1), int32), the
    # 1 as a scalar initializer or as an input.
    for b, t in [(1, 7), (3, 40)]:
        add(f"seqlens_k_chain_{b}x{t}", 13,
            [n("ReduceSum", ["mask", "ax"], ["s"], keepdims=0), n("Sub", ["s", "one"], ["d"]),
             n("Cast", ["d"], ["y"], to=TO_INT32)],
            [("mask", [b, t], 0, 1)], [("y", "i32"), ("d", "T")],
            [("ax", i64(1)), ("one", np.array(1, dtype=np.int64))], ("int64",))
    add("seqlens_k_chain_one_input", 13,
        [n("ReduceSum", ["mask", "ax"], ["s"], keepdims=1), n("Sub", ["s", "one"], ["d"]),
         n("Cast", ["d"], ["y"], to=TO_INT32)],
        [("mask", [2, 9], 0, 1), ("one", [], 0.6, 1.4)], [("y", "i32")], [("ax", i64(1))],
        ("int64",))
    add("sub_int64_row_minus_scalar_init", 14, [n("Sub", ["a", "one"], ["y"])],
        [("a", [1, 7], -30, 30)], [("y", "T")], [("one", np.array(1, dtype=np.int64))],
        ("int64",))

    # Equal on integers and bools, with enough repeats in a small range to see both.
    add("equal_int_bcast", 13, [n("Equal", ["a", "b"], ["y"])],
        [("a", [3, 1, 4], -2, 2), ("b", [1, 5, 4], -2, 2)], [("y", "bool")],
        dtypes=INT_DTYPES)
    add("equal_bool_bcast", 13, [n("Equal", ["a", "b"], ["y"])],
        [("a", [3, 1, 4], 0, 1), ("b", [5, 4], 0, 1)], [("y", "T")], dtypes=("bool",))
    add("equal_int_cast_float", 13,
        [n("Equal", ["a", "b"], ["c"]), n("Cast", ["c"], ["y"], to=TO_FLOAT)],
        [("a", [4, 6], -2, 2), ("b", [6], -2, 2)], [("c", "bool"), ("y", "f32")],
        dtypes=INT_DTYPES)

    # Cast from integers and bools to every kind of target, from floats to integers.
    targets = [("float32", TO_FLOAT, "f32"), ("float16", TO_FLOAT16, "f16"),
               ("int32", TO_INT32, "i32"), ("int64", TO_INT64, "i64"),
               ("bool", TO_BOOL, "bool")]
    for tname, to, kind in targets:
        lim = 2 if tname == "bool" else 1000  # to bool: zeros among the draws
        add(f"cast_int_to_{tname}", 13, [n("Cast", ["x"], ["y"], to=to)],
            [("x", [3, 5, 7], -lim, lim)], [("y", kind)], dtypes=INT_DTYPES)
        if tname != "bool":
            add(f"cast_bool_to_{tname}", 13, [n("Cast", ["x"], ["y"], to=to)],
                [("x", [4, 33], 0, 1)], [("y", kind)], dtypes=("bool",))
    for tname, to, kind in targets[2:]:
        add(f"cast_float_to_{tname}", 13,
            [n("Relu", ["x"], ["r"]), n("Cast", ["r"], ["y"], to=to)],
            [("x", [3, 5, 7], -300, 300)], [("y", kind)])
    add("castlike_int64_to_int32", 15, [n("CastLike", ["x", "like"], ["y"])],
        [("x", [2, 9], -1000, 1000)], [("y", "i32")],
        [("like", np.array([5], dtype=np.int32))], ("int64",))
    add("castlike_int_to_float16", 15, [n("CastLike", ["x", "like"], ["y"])],
        [("x", [2, 9], -1000, 1000)], [("y", "f16")],
        [("like", np.array([5], dtype=np.float16))], INT_DTYPES)
    add("castlike_int32_to_int64", 15, [n("CastLike", ["x", "like"], ["y"])],
        [("x", [2, 9], -1000, 1000)], [("y", "i64")],
        [("like", np.array([5], dtype=np.int64))], ("int32",))
    add("castlike_bool_to_int64", 15, [n("CastLike", ["x", "like"], ["y"])],
        [("x", [2, 9], 0, 1)], [("y", "i64")], [("like", np.array([5], dtype=np.int64))],
        ("bool",))
    return cases


def write_cases(out, seed):
    try:
        import numpy as np
        import onnx
        from onnx import helper, numpy_helper, TensorProto
        import ml_dtypes
    except ImportError as e:
        skip(f"python module missing for the parity cases ({e})")
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(seed)
    dtypes = {"float32": (TensorProto.FLOAT, np.float32),
              "float16": (TensorProto.FLOAT16, np.float16),
              "bfloat16": (TensorProto.BFLOAT16, ml_dtypes.bfloat16),
              "int32": (TensorProto.INT32, np.int32),
              "int64": (TensorProto.INT64, np.int64),
              "bool": (TensorProto.BOOL, np.bool_)}
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    written = 0
    for name, opset, nodes, inputs, inits, outputs, case_dtypes in build_cases(np):
        # The float32 model gives the reference; the dtype's model is what is tested.
        feeds32 = {}
        for iname, shape, lo, hi, *flags in inputs:
            v = rng.uniform(lo, hi, shape).astype(np.float32)
            v[np.abs(v) < 1e-2] = 1e-2 if lo >= 0 else 0.5  # fresh, non-zero
            if "nonzero" in flags:  # rounds to a non-zero integer too
                v[np.abs(v) < 0.5] = np.where(v[np.abs(v) < 0.5] < 0, -1.0, 1.0)
            feeds32[iname] = v
        for tag in case_dtypes:
            onnx_t, np_t = dtypes[tag]
            integer = tag in EXACT_DTYPES

            def model_for(elem, cast):
                g_inputs = [helper.make_tensor_value_info(i[0], elem, list(i[1])) for i in inputs]
                g_inits = []
                for iname, arr in inits:
                    a = cast(arr) if arr.dtype == np.float32 else arr
                    g_inits.append(numpy_helper.from_array(a, iname))
                kinds = {"T": elem, "f32": TensorProto.FLOAT, "f16": TensorProto.FLOAT16,
                         "i32": TensorProto.INT32, "i64": TensorProto.INT64,
                         "bool": TensorProto.BOOL}
                g_outputs = [helper.make_tensor_value_info(o, kinds[k], None) for o, k in outputs]
                g_nodes = [helper.make_node(op, ins, outs, domain=dom, **attrs)
                           for op, dom, ins, outs, attrs in nodes]
                graph = helper.make_graph(g_nodes, name, g_inputs, g_outputs, g_inits)
                imports = [helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
                m = helper.make_model(graph, opset_imports=imports)
                m.ir_version = 10
                return m
            if integer:
                # Integers are exact: the reference runs the case's own model.
                to_t = lambda a, np_t=np_t: np.asarray(np.rint(a)).astype(np_t)
                feeds = {k: to_t(v) for k, v in feeds32.items()}
                rounded = feeds
                ref_model = model_for(onnx_t, to_t)
            else:
                to_t = lambda a, np_t=np_t: a.astype(np_t)
                feeds = {k: to_t(v) for k, v in feeds32.items()}
                rounded = {k: v.astype(np.float32) for k, v in feeds.items()}
                ref_model = model_for(TensorProto.FLOAT,
                                      lambda a, np_t=np_t: a.astype(np_t).astype(np.float32))
            expected = None
            if ort is not None:
                try:
                    so = ort.SessionOptions()
                    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
                    sess = ort.InferenceSession(ref_model.SerializeToString(), so,
                                                providers=["CPUExecutionProvider"])
                    expected = sess.run([o for o, _ in outputs], rounded)
                except Exception as e:  # ONNX Runtime lacks the op or opset
                    print(f"{name}: ONNX Runtime cannot run it ({str(e).splitlines()[0][:120]}); "
                          "using the ONNX reference evaluator")
            if expected is None:
                try:
                    expected = ReferenceEvaluator(ref_model).run(None, rounded)
                except Exception as e:
                    print(f"{name}: no reference available ({e}); case dropped")
                    break
            case_dir = os.path.join(out, f"test_{name}_{tag}")
            data_dir = os.path.join(case_dir, "test_data_set_0")
            os.makedirs(data_dir)
            model = model_for(onnx_t, to_t)
            onnx.save(model, os.path.join(case_dir, "model.onnx"))
            for i, (iname, *_) in enumerate(inputs):
                t = numpy_helper.from_array(feeds[iname], iname)
                with open(os.path.join(data_dir, f"input_{i}.pb"), "wb") as f:
                    f.write(t.SerializeToString())
            for i, ((oname, kind), val) in enumerate(zip(outputs, expected)):
                val = np.asarray(val)
                if kind == "T":
                    val = val.astype(np_t) if integer else val.astype(np.float32).astype(np_t)
                t = numpy_helper.from_array(val, oname)
                with open(os.path.join(data_dir, f"output_{i}.pb"), "wb") as f:
                    f.write(t.SerializeToString())
            written += 1
    print(f"parity: wrote {written} test directories under {out} (seed {seed})", flush=True)
    return written


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["parity", "conformance"])
    ap.add_argument("--onyx-run", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--out")
    ap.add_argument("--dir")
    ap.add_argument("--skip")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--generate-only", action="store_true")
    a = ap.parse_args()
    if a.mode == "parity":
        seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "little")
        written = write_cases(a.out, seed)
        if a.generate_only:
            return 0
        rc, passed, failed, unclaimed, _ = run_onyx(a.onyx_run, a.config, [a.out])
        if unclaimed:
            print(f"parity: {unclaimed} cases were not claimed by the provider under test")
        ok = rc == 0 and failed == 0 and unclaimed == 0 and passed == written
        print(f"parity: {'PASS' if ok else 'FAIL'} ({passed} of {written} passed, seed {seed})")
        return 0 if ok else 1
    if not a.dir or not os.path.isdir(a.dir):
        skip(f"no ONNX node tests at {a.dir}")
    args = ([] if not a.skip else ["--skip", a.skip]) + [a.dir]
    rc, passed, failed, unclaimed, _ = run_onyx(a.onyx_run, a.config, args)
    print(f"conformance: {passed} passed, {failed} failed, {unclaimed} not claimed")
    return 0 if rc == 0 and failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
