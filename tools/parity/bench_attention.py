#!/usr/bin/env python3
"""Time the CPU GroupQueryAttention kernel against ONNX Runtime's, side by side.

Both run in this process on the same random inputs and the same number of threads:
ONNX Runtime's CPU GroupQueryAttention through IOBinding (decode with the KV buffer
shared between past and present, as ONNX Runtime GenAI runs it), and the Onyx kernel
through tests/attention's harness library (present aliasing past, a persistent pool of
`--threads` threads). Reports the best of --reps runs and the ratio ORT / Onyx.

Default cases: decode B=1, Nq=32, Nkv=8, H=128, float32, past 512/2048/8192, and a
first prompt of 512 tokens.

    bench_attention.py --lib build/.../libonyx_attn_harness.so [--threads N] [--reps N]

Needs numpy, onnx and onnxruntime. This is a measurement, not a test.
"""
import argparse
import ctypes
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_attention_cases as mac  # noqa: E402
import run_attention_cases as rac  # noqa: E402

ort = mac.ort


def bench_ort(case, threads, reps, shared):
    model = mac.build_model(case)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = {n: a for n, a in case.inputs if a is not None}
    io = sess.io_binding()
    pk = ort.OrtValue.ortvalue_from_numpy(feeds["past_key"])
    pv = ort.OrtValue.ortvalue_from_numpy(feeds["past_value"])
    for n, a in feeds.items():
        if n not in ("past_key", "past_value"):
            io.bind_cpu_input(n, a)
    io.bind_ortvalue_input("past_key", pk)
    io.bind_ortvalue_input("past_value", pv)
    if shared:
        io.bind_ortvalue_output("present_key", pk)
        io.bind_ortvalue_output("present_value", pv)
    else:
        io.bind_output("present_key")
        io.bind_output("present_value")
    io.bind_output("output")
    sess.run_with_iobinding(io)
    best = 1e9
    for _ in range(reps):
        t0 = time.perf_counter()
        sess.run_with_iobinding(io)
        best = min(best, time.perf_counter() - t0)
    return best


def bench_onyx(lib, case, threads, reps):
    model = mac.build_model(case)
    node = model.graph.node[0]
    names, types, ints, floats, strs = [], [], [], [], []
    for a in node.attribute:
        names.append(a.name.encode())
        types.append(2)
        ints.append(a.i)
        floats.append(0.0)
        strs.append(b"")
    na = len(names)
    tens = (rac.Tensor * len(case.inputs))()
    keep = []
    for i, (_, arr) in enumerate(case.inputs):
        if arr is None:
            continue
        arr = np.ascontiguousarray(arr)
        keep.append(arr)
        tens[i].dtype = mac.helper.np_dtype_to_tensor_dtype(arr.dtype)
        tens[i].rank = arr.ndim
        for k, d in enumerate(arr.shape):
            tens[i].dims[k] = d
        tens[i].data = arr.ctypes.data if arr.size else None
    n_in = len(case.inputs)
    while n_in and case.inputs[n_in - 1][1] is None:
        n_in -= 1
    pres = (ctypes.c_uint8 * 3)(1, 1, 1)
    best = ctypes.c_double(0)
    err = ctypes.create_string_buffer(512)
    st = lib.attn_harness_bench(
        b"com.microsoft", b"GroupQueryAttention", 1, na, (ctypes.c_char_p * na)(*names),
        (ctypes.c_int32 * na)(*types), (ctypes.c_int64 * na)(*ints),
        (ctypes.c_float * na)(*floats), (ctypes.c_char_p * na)(*strs), n_in, tens, 3, pres,
        threads, 1, reps, ctypes.byref(best), err, len(err))
    if st != 0:
        raise RuntimeError(err.value.decode())
    return best.value


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args(argv)
    lib = rac.load_lib(args.lib)
    lib.attn_harness_bench.restype = ctypes.c_int
    lib.attn_harness_bench.argtypes = [
        ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int32),
        ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_float),
        ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t, ctypes.POINTER(rac.Tensor),
        ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint8), ctypes.c_uint32, ctypes.c_int,
        ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.c_char_p, ctypes.c_size_t]
    nq, nkv, h = 32, 8, 128
    rows = []
    for past in (512, 2048, 8192):
        case = mac.gqa(f"decode_{past}", 1, nq=nq, nkv=nkv, H=h, past=past, total=past)
        rows.append((f"decode B=1 past={past} f32", case, True, args.reps))
    case = mac.gqa("prefill_512", 1, S=512, nq=nq, nkv=nkv, H=h)
    rows.append(("prompt S=512 f32", case, False, max(3, args.reps // 4)))
    print(f"threads={args.threads}  (Nq={nq}, Nkv={nkv}, H={h})")
    for name, case, shared, reps in rows:
        # Onyx first: ONNX Runtime's pool keeps spinning for a while after its runs and
        # would take the cores from whatever runs next in this process.
        t_onyx = bench_onyx(lib, case, args.threads, reps)
        t_ort = bench_ort(case, args.threads, reps, shared)
        print(f"  {name:28s} ORT {t_ort * 1e3:8.3f} ms   Onyx {t_onyx * 1e3:8.3f} ms   "
              f"ORT/Onyx {t_ort / t_onyx:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
