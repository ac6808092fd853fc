#!/usr/bin/env python3
"""Run ONNX backend-test directories through the CPU attention kernels, without the core.

Loads tests/attention's harness library (libonyx_attn_harness.so, ctypes), which
compiles the kernels of providers/cpu/attention together with a fake compute context,
and for every single-node case directory (model.onnx + test_data_set_*/) runs the
node's kernel on the stored inputs and compares every output with the stored one.
Prints the max abs error per case.

    run_attention_cases.py --lib LIB --node-tests DIR   ONNX node tests (test_attention_*,
                                                       test_rotary_embedding*; not _expanded)
    run_attention_cases.py --lib LIB --cases DIR        cases made by make_attention_cases.py
    run_attention_cases.py --lib LIB --generate DIR     make them into DIR first (needs
                                                       onnxruntime), then run them

GroupQueryAttention cases run twice when a KV buffer is passed: once with aliasing
refused (present allocated and copied, compared in full) and once with present
aliasing past (written in place; the output and the valid present rows compared).
Also runs each case with 4 threads to exercise the split-K route.

Tolerances: |got − want| <= atol + rtol·|want| with (rtol, atol) = (1e-3, 1e-5) for
float32, (1e-2, 2e-3) for float16 and (2e-2, 1e-2) for bfloat16. Exit status: 0 all
pass, 1 a failure, 77 a Python module is missing.
"""
import argparse
import ctypes
import glob
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
except ImportError as exc:
    print(f"run_attention_cases: missing module: {exc}", file=sys.stderr)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = {1: (1e-3, 1e-5), 10: (1e-2, 2e-3), 16: (2e-2, 1e-2)}
OPS = {("", "Attention"), ("", "RotaryEmbedding"), ("com.microsoft", "GroupQueryAttention"),
       ("com.microsoft", "RotaryEmbedding")}


class Tensor(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_uint32), ("device", ctypes.c_uint32),
                ("device_id", ctypes.c_int32), ("rank", ctypes.c_uint32),
                ("dims", ctypes.c_int64 * 8), ("data", ctypes.c_void_p)]


def load_lib(path):
    lib = ctypes.CDLL(path)
    lib.attn_harness_run.restype = ctypes.c_int
    lib.attn_harness_run.argtypes = [
        ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int32),
        ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_float),
        ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t, ctypes.POINTER(Tensor),
        ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint8), ctypes.c_uint32, ctypes.c_int,
        ctypes.POINTER(Tensor), ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_uint64),
        ctypes.c_char_p, ctypes.c_size_t]
    lib.attn_harness_free.argtypes = [ctypes.c_void_p]
    return lib


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


def raw_of(t):
    """(bytes as a uint8 numpy array, dims, onnx data type) of a TensorProto."""
    a = numpy_helper.to_array(t)
    if t.data_type == 16:  # bfloat16: keep the bit pattern
        b = np.ascontiguousarray(a).view(np.uint16) if a.dtype.itemsize == 2 else \
            (np.ascontiguousarray(a.astype(np.float32)).view(np.uint32) >> 16).astype(np.uint16)
        return b, list(t.dims), t.data_type
    return np.ascontiguousarray(a), list(t.dims), t.data_type


def as_float64(arr, dtype):
    if dtype == 16:
        return (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return arr.astype(np.float64)


def np_dtype(onnx_type):
    return {1: np.float32, 10: np.float16, 16: np.uint16, 6: np.int32, 7: np.int64,
            9: np.bool_}[onnx_type]


def run_kernel(lib, node, opset, inputs, n_outputs, present_mask, threads, alias):
    """inputs: list of (array, onnx type) or None. Returns (status, err, outs, alias_of, ws)."""
    names, types, ints, floats, strs = [], [], [], [], []
    for a in node.attribute:
        names.append(a.name.encode())
        if a.type == onnx.AttributeProto.INT:
            types.append(2), ints.append(a.i), floats.append(0.0), strs.append(b"")
        elif a.type == onnx.AttributeProto.FLOAT:
            types.append(1), ints.append(0), floats.append(a.f), strs.append(b"")
        elif a.type == onnx.AttributeProto.STRING:
            types.append(3), ints.append(0), floats.append(0.0), strs.append(a.s)
        else:
            return -1, f"attribute {a.name} of type {a.type} not handled by the harness", None, None, 0
    na = len(names)
    c_names = (ctypes.c_char_p * max(na, 1))(*names)
    c_types = (ctypes.c_int32 * max(na, 1))(*types)
    c_ints = (ctypes.c_int64 * max(na, 1))(*ints)
    c_floats = (ctypes.c_float * max(na, 1))(*floats)
    c_strs = (ctypes.c_char_p * max(na, 1))(*strs)
    tens = (Tensor * max(len(inputs), 1))()
    keep = []
    for i, item in enumerate(inputs):
        if item is None:
            continue
        arr, dims, dt = item
        arr = np.ascontiguousarray(arr)
        keep.append(arr)
        tens[i].dtype = dt
        tens[i].rank = len(dims)
        for k, d in enumerate(dims):
            tens[i].dims[k] = d
        tens[i].data = arr.ctypes.data if arr.size else None
    outs = (Tensor * n_outputs)()
    alias_of = (ctypes.c_int32 * n_outputs)()
    ws = ctypes.c_uint64(0)
    err = ctypes.create_string_buffer(1024)
    pres = (ctypes.c_uint8 * n_outputs)(*[1 if p else 0 for p in present_mask])
    st = lib.attn_harness_run(node.domain.encode(), node.op_type.encode(), opset, na, c_names,
                              c_types, c_ints, c_floats, c_strs, len(inputs), tens, n_outputs,
                              pres, threads, 1 if alias else 0, outs, alias_of,
                              ctypes.byref(ws), err, len(err))
    results = []
    if st == 0:
        for o in range(n_outputs):
            t = outs[o]
            if not present_mask[o] or t.dtype == 0:
                results.append(None)
                continue
            dims = [t.dims[k] for k in range(t.rank)]
            n = int(np.prod(dims)) if dims else 1
            dt = np_dtype(t.dtype)
            buf = (ctypes.c_char * (n * np.dtype(dt).itemsize)).from_address(t.data) if n else b""
            arr = np.frombuffer(bytes(buf), dtype=dt).reshape(dims).copy()
            results.append((arr, t.dtype))
            if alias_of[o] < 0 and t.data:
                lib.attn_harness_free(t.data)
    return st, err.value.decode(errors="replace"), results, list(alias_of), ws.value, keep


def compare(got, want_arr, want_type, rows=None):
    rtol, atol = TOL.get(want_type, (1e-3, 1e-5))
    g = as_float64(got, want_type)
    w = as_float64(want_arr, want_type)
    if g.shape != w.shape:
        return False, float("inf"), f"shape {g.shape} != {w.shape}"
    if rows is not None:
        g, w = rows(g), rows(w)
    same_inf = np.isinf(w) & (g == w)
    with np.errstate(invalid="ignore"):
        diff = np.where(same_inf, 0.0, np.abs(g - w))
    diff = np.where(np.isnan(diff), np.inf, diff)
    bad = diff > atol + rtol * np.where(np.isinf(w), 0.0, np.abs(w))
    return not bad.any(), float(diff.max()) if diff.size else 0.0, ""


def run_case(lib, case_dir, threads_list=(1, 4)):
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    node = model.graph.node[0]
    if len(model.graph.node) != 1 or (node.domain, node.op_type) not in OPS:
        return None
    opset = next(o.version for o in model.opset_import if o.domain == node.domain)
    graph_inputs = [i.name for i in model.graph.input]
    graph_outputs = [o.name for o in model.graph.output]
    lines, ok_all = [], True
    for ds in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
        vals = {}
        for i, name in enumerate(graph_inputs):
            p = os.path.join(ds, f"input_{i}.pb")
            if os.path.exists(p):
                vals[name] = raw_of(read_pb(p))
        want = {}
        for i, name in enumerate(graph_outputs):
            p = os.path.join(ds, f"output_{i}.pb")
            if os.path.exists(p):
                want[name] = raw_of(read_pb(p))
        inputs = [vals.get(n) if n else None for n in node.input]
        present = [bool(o) for o in node.output]
        gqa = node.op_type == "GroupQueryAttention"
        routes = [(t, False) for t in threads_list]
        # The in-place route exists when the past buffer holds the total length.
        shared = (gqa and len(inputs) > 6 and inputs[3] is not None and inputs[6] is not None
                  and int(inputs[6][0].reshape(-1)[0]) <= inputs[3][1][2])
        if shared:
            routes.append((1, True))
        worst = 0.0
        ws_max = 0
        for threads, alias in routes:
            # Fresh input copies: the in-place route writes into past.
            ins = [None if x is None else (x[0].copy(), x[1], x[2]) for x in inputs]
            st, err, outs, alias_of, ws, _keep = run_kernel(lib, node, opset, ins, len(present),
                                                           present, threads, alias)
            ws_max = max(ws_max, ws)
            tag = f"threads={threads}{' alias' if alias else ''}"
            if st != 0:
                lines.append(f"    {tag}: status {st}: {err}")
                ok_all = False
                continue
            for o, name in enumerate(node.output):
                if not name or name not in want:
                    continue
                if outs[o] is None:
                    lines.append(f"    {tag}: output {name} not produced")
                    ok_all = False
                    continue
                rows = None
                if alias and o in (1, 2):
                    if alias_of[o] != 2 + o:
                        lines.append(f"    {tag}: {name} was not aliased (alias_of {alias_of[o]})")
                        ok_all = False
                    # Compare only rows [0, total_b) of each batch row.
                    seqlens = vals[node.input[5]][0]
                    sm = seqlens.reshape(-1)

                    def rows(a, sm=sm):
                        return np.concatenate([a[b, :, : int(sm[b]) + 1].reshape(-1)
                                               for b in range(a.shape[0])])
                ok, err_abs, why = compare(outs[o][0], want[name][0], want[name][2], rows)
                worst = max(worst, err_abs)
                if not ok:
                    ok_all = False
                    lines.append(f"    {tag}: {name} max abs err {err_abs:.3g} {why}")
        lines.insert(0, f"  {'ok  ' if ok_all else 'FAIL'} {os.path.basename(case_dir)}"
                        f"  max abs err {worst:.3g}"
                        + (f"  (split-K workspace {ws_max} B with 4 threads)" if ws_max else ""))
    return ok_all, lines


def run_dir(lib, root, node_tests):
    dirs = sorted(d for d in glob.glob(os.path.join(root, "*")) if os.path.isdir(d))
    if node_tests:
        dirs = [d for d in dirs if (os.path.basename(d).startswith("test_attention")
                                    or os.path.basename(d).startswith("test_rotary_embedding"))
                and not os.path.basename(d).endswith("expanded")]
    passed = failed = 0
    for d in dirs:
        r = run_case(lib, d)
        if r is None:
            continue
        ok, lines = r
        print("\n".join(lines))
        passed += ok
        failed += not ok
    print(f"run_attention_cases: {passed} passed, {failed} failed in {root}")
    return failed == 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, help="path of libonyx_attn_harness.so")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--node-tests", help="the ONNX node test folder")
    g.add_argument("--cases", help="a folder of generated cases")
    g.add_argument("--generate", help="generate cases into this folder, then run them")
    args = ap.parse_args(argv)
    lib = load_lib(args.lib)
    if args.node_tests:
        if not os.path.isdir(args.node_tests):
            print(f"no node tests at {args.node_tests}", file=sys.stderr)
            return 77
        return 0 if run_dir(lib, args.node_tests, True) else 1
    root = args.cases or args.generate
    if args.generate:
        r = subprocess.run([sys.executable, os.path.join(HERE, "make_attention_cases.py"), root])
        if r.returncode == 77:
            return 77
        if r.returncode != 0:
            return 1
    return 0 if run_dir(lib, root, False) else 1


if __name__ == "__main__":
    sys.exit(main())
