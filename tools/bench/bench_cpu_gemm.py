#!/usr/bin/env python3
"""CPU float32 MatMul: Onyx against ONNX Runtime on a decoder's shapes, side by side.

For each weight shape (K×N, Qwen2.5-0.5B's by default) it writes an ONNX test
directory: a one-node MatMul whose B is a constant initializer (a decoder's weight,
which both runtimes may prepack at session creation) and one data set per row count
M, with fresh random A and ONNX Runtime's Y. It times ONNX Runtime's kernel, then
runs `onyx-run --bench` on the same directory (which also checks Onyx's Y against
ONNX Runtime's), and prints both medians, GFLOP/s and the ratio. Both use the same
number of threads. Several onyx-run builds (comma-separated) are timed in the same
run, one column each: a before/after beside ONNX Runtime. With --rounds R the pair is timed R times, alternating, and the
medians of the R medians are printed (the VM's speed drifts between minutes). On a
machine shared with other jobs, --wait-idle holds each timing until the CPUs have
been nearly idle for half a second (at most a minute).

    tools/bench/bench_cpu_gemm.py [--onyx-run build/tools/onyx-run] [--threads N]
                                  [--m 1,16,32,128,512] [--shapes qo,kv,...] [--rounds R]
                                  [--wait-idle]
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

SHAPES = {  # name: (K, N) of the weight
    "qo": (896, 896),
    "kv": (896, 128),
    "gate_up": (896, 4864),
    "down": (4864, 896),
    "lm_head": (896, 151936),
}


def matmul_model(b):
    k, n = b.shape
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["Y"])], "gemm_bench",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["M", k])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["M", n])],
        [numpy_helper.from_array(b, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def cpu_times():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[3] + v[4]  # all, idle + iowait


def wait_idle(limit=0.15, timeout=60.0):
    """Returns once the CPUs were busy less than `limit` over half a second."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        t0, i0 = cpu_times()
        time.sleep(0.5)
        t1, i1 = cpu_times()
        if 1.0 - (i1 - i0) / max(1, t1 - t0) < limit:
            return


def write_pb(path, arr):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(arr).SerializeToString())


def time_ort(sess, a, runs):
    io = sess.io_binding()
    io.bind_cpu_input("A", a)
    io.bind_output("Y")
    for _ in range(2):
        sess.run_with_iobinding(io)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run_with_iobinding(io)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def runs_for(m, k, n, budget_ms=400.0):
    """Enough runs for a steady median without spending minutes on the big ones."""
    est_ms = 2.0 * m * k * n / 100e9 * 1e3 + 0.02
    return int(max(5, min(200, budget_ms / est_ms)))


def write_ini(path, onyx_run, threads):
    cpu_so = os.path.abspath(os.path.join(os.path.dirname(onyx_run), "..", "providers", "cpu",
                                          "libonyx_cpu.so"))
    with open(path, "w") as f:
        f.write(f"[onyx]\nthreads = {threads}\n[provider.cpu]\npath = {cpu_so}\n")


def time_onyx(onyx_run, ini, case_dir, runs):
    """Median ms of onyx-run --bench, and whether its outputs matched ONNX Runtime's."""
    run = subprocess.run([onyx_run, "--config", ini, "-q", "--bench", str(runs), case_dir],
                         capture_output=True, text=True)
    found = re.search(r"bench: median ([0-9.]+) ms", run.stdout)
    if found is None:
        raise RuntimeError(f"{onyx_run} on {case_dir} failed\n{run.stdout}{run.stderr}")
    return float(found.group(1)), run.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onyx-run", default="build/tools/onyx-run",
                    help="one onyx-run, or several separated by commas (builds to compare; "
                         "each uses the CPU provider of its own build tree)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--m", default="1,16,32,128,512", help="row counts (tokens)")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="weights: " + ",".join(SHAPES))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--wait-idle", action="store_true", help="time only when the CPUs are idle")
    ap.add_argument("--work", help="keep the test directories here")
    args = ap.parse_args()
    ms = [int(v) for v in args.m.split(",")]
    builds = args.onyx_run.split(",")
    rng = np.random.default_rng()
    print(f"ONNX Runtime {ort.__version__}, {args.threads} threads each, {args.rounds} round(s)")
    for j, b in enumerate(builds):
        print(f"onyx[{j}] = {b}")
    head = f"{'shape':<10} {'M':>4} {'K':>5} {'N':>6} {'ort ms':>9} {'ort GF/s':>9}"
    for j in range(len(builds)):
        head += f" {f'onyx[{j}] ms':>12} {'GF/s':>7} {'ratio':>6}"
    print(head + "  check")
    tmp_ctx = tempfile.TemporaryDirectory() if args.work is None else None
    tmp = args.work or tmp_ctx.name
    os.makedirs(tmp, exist_ok=True)
    inis = []
    for j, b in enumerate(builds):
        inis.append(os.path.join(tmp, f"plugins{j}.ini"))
        write_ini(inis[-1], b, args.threads)
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.log_severity_level = 3
    for name in args.shapes.split(","):
        k, n = SHAPES[name]
        b = (rng.standard_normal((k, n), dtype=np.float32) / np.sqrt(k)).astype(np.float32)
        model = matmul_model(b)
        case = os.path.join(tmp, name)
        os.makedirs(case, exist_ok=True)
        onnx.save(model, os.path.join(case, "model.onnx"))
        sess = ort.InferenceSession(os.path.join(case, "model.onnx"), so,
                                    providers=["CPUExecutionProvider"])
        feeds = []
        for m in ms:
            # One test directory per M (the model shared through a link), so that each
            # gets its own run count.
            a = rng.standard_normal((m, k), dtype=np.float32)
            d = os.path.join(case, f"m{m}")
            os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
            if not os.path.lexists(os.path.join(d, "model.onnx")):
                os.symlink(os.path.join("..", "model.onnx"), os.path.join(d, "model.onnx"))
            write_pb(os.path.join(d, "test_data_set_0", "input_0.pb"), a)
            write_pb(os.path.join(d, "test_data_set_0", "output_0.pb"), sess.run(None, {"A": a})[0])
            feeds.append(a)
        ort_ms = [[] for _ in ms]
        onyx_ms = [[[] for _ in ms] for _ in builds]
        ok = True
        for _ in range(args.rounds):
            for i, m in enumerate(ms):
                runs = runs_for(m, k, n)
                if args.wait_idle:
                    wait_idle()
                ort_ms[i].append(time_ort(sess, feeds[i], runs))
                for j, build in enumerate(builds):
                    if args.wait_idle:
                        wait_idle()
                    t, same = time_onyx(build, inis[j], os.path.join(case, f"m{m}"), runs)
                    onyx_ms[j][i].append(t)
                    ok = ok and same
        del sess
        for i, m in enumerate(ms):
            flop = 2.0 * m * k * n
            t_ort = statistics.median(ort_ms[i])
            line = f"{name:<10} {m:>4} {k:>5} {n:>6} {t_ort:>9.3f} {flop / t_ort / 1e6:>9.1f}"
            for j in range(len(builds)):
                t = statistics.median(onyx_ms[j][i])
                line += f" {t:>12.3f} {flop / t / 1e6:>7.1f} {t_ort / t:>5.2f}x"
            print(line + f"  {'ok' if ok else 'MISMATCH'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
