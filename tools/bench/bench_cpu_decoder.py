#!/usr/bin/env python3
"""Decode speed on the CPU: onyx-generate against ONNX Runtime, side by side in one run.

Writes a decoder with random weights (Qwen2.5-0.5B's shapes by default: hidden 896,
24 layers, 14 query heads, 2 KV heads, head 64, MLP 4864) unless --model is given, then
generates the same greedy tokens with both — ONNX Runtime with its KV shared in place
through IO binding, Onyx with its governed cache — using the same thread count, and
prints prefill time, decode tokens/s and the ratio. Tokens must agree.

    tools/bench/bench_cpu_decoder.py [--model DIR] [--threads N] [--prompt-len 32]
                                     [--new 64] [--vocab 151936]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
DECODER = os.path.join(HERE, "..", "decoder")


def ort_generate(model_dir, prompt, n_new, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    sess = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), so,
                                providers=["CPUExecutionProvider"])
    pasts = [i for i in sess.get_inputs() if i.name.startswith("past_key_values.")]
    _, nkv, _, h = pasts[0].shape
    cap = len(prompt) + n_new
    bufs = {p.name: ort.OrtValue.ortvalue_from_numpy(np.zeros((1, int(nkv), cap, int(h)),
                                                               np.float32)) for p in pasts}
    ids, cur, total = [], np.array([prompt], np.int64), len(prompt)
    t_prefill = t_decode = 0.0
    while len(ids) < n_new:
        io = sess.io_binding()
        io.bind_cpu_input("input_ids", cur)
        io.bind_cpu_input("attention_mask", np.ones((1, total), np.int64))
        io.bind_output("logits")
        for name, buf in bufs.items():
            io.bind_ortvalue_input(name, buf)
            io.bind_ortvalue_output(name.replace("past_key_values.", "present."), buf)
        t0 = time.perf_counter()
        sess.run_with_iobinding(io)
        logits = io.get_outputs()[0].numpy()
        dt = time.perf_counter() - t0
        if ids:
            t_decode += dt
        else:
            t_prefill += dt
        tok = int(np.argmax(logits[0, -1]))
        ids.append(tok)
        cur = np.array([[tok]], np.int64)
        total += 1
    return ids, t_prefill, (len(ids) - 1) / t_decode if t_decode else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model")
    ap.add_argument("--onyx-generate", default="build/tools/onyx-generate")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--work", default=None, help="where to write the random model")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="onyx-bench-")
    model = args.model
    if model is None:
        model = os.path.join(work, "qwen-shaped")
        if not os.path.exists(os.path.join(model, "model.onnx")):
            subprocess.run([sys.executable, os.path.join(DECODER, "make_random_decoder.py"),
                            "--out", model, "--vocab", str(args.vocab)], check=True)
    rng = np.random.default_rng(1)
    prompt = [int(t) for t in rng.integers(1, min(args.vocab, 30000), args.prompt_len)]
    print(f"model {model}, prompt {len(prompt)} tokens, {args.new} new, {args.threads} threads, "
          f"ONNX Runtime {ort.__version__}")
    ort_ids, ort_prefill, ort_tps = ort_generate(model, prompt, args.new, args.threads)
    ini = os.path.join(work, "plugins.ini")
    cpu_so = os.path.abspath(os.path.join(os.path.dirname(args.onyx_generate), "..",
                                          "providers", "cpu", "libonyx_cpu.so"))
    with open(ini, "w") as f:
        f.write(f"[onyx]\nthreads = {args.threads}\n[provider.cpu]\npath = {cpu_so}\n")
    out = subprocess.run([args.onyx_generate, model, "--config", ini, "--quiet",
                          "--prompt-ids", ",".join(map(str, prompt)),
                          "--max-new-tokens", str(args.new)], capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stdout, out.stderr)
        return 1
    onyx_ids = [int(t) for t in re.search(r"^ids:(.*)$", out.stdout, re.M).group(1).split()]
    m = re.search(r"prefill: \d+ tokens in ([0-9.]+) ms .*decode: \d+ tokens in [0-9.]+ ms "
                  r"\(([0-9.]+) tokens/s\)", out.stdout)
    onyx_prefill, onyx_tps = float(m.group(1)) / 1e3, float(m.group(2))
    print(f"{'':<14} {'prefill ms':>11} {'decode tok/s':>13}")
    print(f"{'onnxruntime':<14} {ort_prefill * 1e3:>11.1f} {ort_tps:>13.2f}")
    print(f"{'onyx':<14} {onyx_prefill * 1e3:>11.1f} {onyx_tps:>13.2f}")
    print(f"decode speedup {onyx_tps / ort_tps:.2f}x, prefill speedup "
          f"{ort_prefill / onyx_prefill:.2f}x; tokens {'identical' if onyx_ids == ort_ids else 'DIFFER'}")
    for line in out.stdout.splitlines():
        if line.startswith(("peak bytes", "kv cache")):
            print(line)
    return 0 if onyx_ids == ort_ids else 1


if __name__ == "__main__":
    sys.exit(main())
