#!/usr/bin/env python3
"""CPU GroupQueryAttention: Onyx against ONNX Runtime, side by side in one run.

For each shape it writes an ONNX test directory (model, fresh random inputs and
ONNX Runtime's outputs), times ONNX Runtime's CPU kernel, then runs
`onyx-run --bench` on the same directory — which also checks Onyx's outputs against
ONNX Runtime's — and prints both medians and the ratio. Both use the same number of
threads, and both share past and present in one buffer as a decoder loop does (ONNX
Runtime through IO binding, Onyx through writable inputs), so neither copies the KV.

    tools/bench/bench_cpu_gqa.py [--onyx-run build/tools/onyx-run] [--threads N]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

SHAPES = [  # (name, batch, q heads, kv heads, head size, past, new tokens)
    ("decode past 512", 1, 32, 8, 128, 512, 1),
    ("decode past 2048", 1, 32, 8, 128, 2048, 1),
    ("decode past 8192", 1, 32, 8, 128, 8192, 1),
    ("prefill S=512", 1, 32, 8, 128, 0, 512),
]


def gqa_model(nq, nkv, h):
    f32 = TensorProto.FLOAT
    inputs = [
        helper.make_tensor_value_info("query", f32, ["B", "S", nq * h]),
        helper.make_tensor_value_info("key", f32, ["B", "S", nkv * h]),
        helper.make_tensor_value_info("value", f32, ["B", "S", nkv * h]),
        helper.make_tensor_value_info("past_key", f32, ["B", nkv, "P", h]),
        helper.make_tensor_value_info("past_value", f32, ["B", nkv, "P", h]),
        helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["B"]),
        helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, []),
    ]
    outputs = [
        helper.make_tensor_value_info("output", f32, ["B", "S", nq * h]),
        helper.make_tensor_value_info("present_key", f32, ["B", nkv, "T", h]),
        helper.make_tensor_value_info("present_value", f32, ["B", nkv, "T", h]),
    ]
    node = helper.make_node("GroupQueryAttention", [i.name for i in inputs],
                            [o.name for o in outputs], domain="com.microsoft",
                            num_heads=nq, kv_num_heads=nkv)
    graph = helper.make_graph([node], "gqa_bench", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model


def write_case(root, model, feeds, outs):
    os.makedirs(os.path.join(root, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(root, "model.onnx"))
    for i, arr in enumerate(feeds):
        with open(os.path.join(root, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(arr).SerializeToString())
    for i, arr in enumerate(outs):
        with open(os.path.join(root, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(arr).SerializeToString())


def time_ort(sess, io, runs):
    for _ in range(3):
        sess.run_with_iobinding(io)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run_with_iobinding(io)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onyx-run", default="build/tools/onyx-run")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    rng = np.random.default_rng()
    print(f"ONNX Runtime {ort.__version__}, {args.threads} threads each")
    print(f"{'shape':<20} {'onnxruntime ms':>15} {'onyx ms':>10} {'speedup':>8}  check")
    with tempfile.TemporaryDirectory() as tmp:
        ini = os.path.join(tmp, "plugins.ini")
        cpu_so = os.path.abspath(os.path.join(os.path.dirname(args.onyx_run), "..",
                                              "providers", "cpu", "libonyx_cpu.so"))
        with open(ini, "w") as f:
            f.write(f"[onyx]\nthreads = {args.threads}\n[provider.cpu]\npath = {cpu_so}\n")
        for name, b, nq, nkv, h, past, s in SHAPES:
            model = gqa_model(nq, nkv, h)
            total = past + s
            rnd = lambda *shape: rng.standard_normal(shape, dtype=np.float32)
            # The KV buffers hold `total` tokens: the past, then room for the new ones.
            feeds = [rnd(b, s, nq * h), rnd(b, s, nkv * h), rnd(b, s, nkv * h),
                     rnd(b, nkv, total, h), rnd(b, nkv, total, h),
                     np.full((b,), total - 1, dtype=np.int32), np.array(total, dtype=np.int32)]
            so = ort.SessionOptions()
            so.intra_op_num_threads = args.threads
            sess = ort.InferenceSession(model.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"])
            names = [i.name for i in sess.get_inputs()]
            kv = {n: ort.OrtValue.ortvalue_from_numpy(a.copy()) for n, a in zip(names, feeds)
                  if n.startswith("past_")}
            io = sess.io_binding()
            for n, a in zip(names, feeds):
                if n in kv:
                    io.bind_ortvalue_input(n, kv[n])
                    io.bind_ortvalue_output(n.replace("past_", "present_"), kv[n])
                else:
                    io.bind_cpu_input(n, a)
            io.bind_output("output")
            sess.run_with_iobinding(io)
            outs = [io.get_outputs()[-1].numpy(), kv["past_key"].numpy(),
                    kv["past_value"].numpy()]
            ort_ms = time_ort(sess, io, args.runs)
            case = os.path.join(tmp, name.replace(" ", "_").replace("=", ""))
            write_case(case, model, feeds, outs)
            run = subprocess.run([args.onyx_run, "--config", ini, "-q", "--bench", str(args.runs),
                                  "--writable", "past_key,past_value", case],
                                 capture_output=True, text=True)
            m = re.search(r"bench: median ([0-9.]+) ms", run.stdout)
            ok = "ok" if run.returncode == 0 else "MISMATCH"
            if m is None:
                print(f"{name:<20} {ort_ms:>15.3f} {'-':>10} {'-':>8}  {ok}\n{run.stderr}")
                continue
            onyx_ms = float(m.group(1))
            print(f"{name:<20} {ort_ms:>15.3f} {onyx_ms:>10.3f} {ort_ms / onyx_ms:>7.2f}x  {ok}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
