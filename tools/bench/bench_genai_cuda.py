#!/usr/bin/env python3
"""Batch-1 decode of a Qwen2.5-0.5B-shaped export on the GPU: Onyx (CUDA, strict, decode
steps replayed as CUDA graphs) beside Hugging Face transformers in float16 on the same
weights, and the fraction of the floor, in one run (also with the provider's GEMV kernel
off, option.gemv = false, and without programmatic dependent launch, option.pdl = false).

    bench_genai_cuda.py --onyx-generate BIN --cpu-so SO --cuda-so SO --builder DIR
                        --work DIR [--new-tokens 256] [--prompt-len 32] [--layers 24]
                        [--cpu-tokens 8] [--precision fp16|bf16|int4]

--builder is the folder onnxruntime_genai/models/ copied out of the onnxruntime-genai
wheel (pure Python: it runs as `python3 builder.py` where the native module is missing).
Steps: a random-weight checkpoint with Qwen2.5-0.5B's shapes (transformers, seed 0,
float16, tied embeddings) and a small tokenizer beside it; the builder's
`-p fp16 -e cuda` export; onyx-generate on it with CUDA first and strict (host shape
arithmetic aside, every node on the GPU), graphs on and off; onyx-generate on the CPU
for the first --cpu-tokens tokens (they must be CUDA's); transformers' greedy generate
on the same weights (dynamic and static cache).

The floor: a decode step reads every weight once (the embedding table aside: one row),
so no step is faster than weight bytes / copy bandwidth, the bandwidth measured here by
a device-to-device copy (bytes read + written). Printed: tok/s, step time, and
(weight bytes / step time) / copy bandwidth. No thresholds: ratios to read.
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
# Qwen2.5-0.5B's shapes (its config.json), random weights.
QWEN05 = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
              num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
              rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
              bos_token_id=1, eos_token_id=2, pad_token_id=0)


def log(msg):
    print(msg, flush=True)


def make_checkpoint(out, layers):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(0)
    cfg = Qwen2Config(**dict(QWEN05, num_hidden_layers=layers))
    with torch.device("cuda"):
        model = Qwen2ForCausalLM(cfg)
    model = model.half().eval()
    model.save_pretrained(out)
    # A tokenizer beside the weights (the builder copies it; ids here are random anyway).
    tok = os.path.join(REPO, "tests", "models", "exported", "builder-fp32-qwen2")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok, f), os.path.join(out, f))
    return model


def export(builder, hf, out, precision):
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, os.path.join(builder, "builder.py"), "-i", hf, "-o", out,
           "-p", precision, "-e", "cuda", "-c", out + ".cache"]
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    shutil.rmtree(out + ".cache", ignore_errors=True)
    if p.returncode != 0:
        sys.exit(f"export failed: {' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return time.time() - t


def weight_bytes(folder):
    """Bytes a decode step reads: every initializer but the embedding Gather's table
    (of which one row is read)."""
    import onnx
    m = onnx.load(os.path.join(folder, "model.onnx"), load_external_data=False)
    size = {1: 4, 10: 2, 16: 2, 6: 4, 7: 8, 11: 8, 2: 1, 3: 1, 9: 1}
    gathered = {n.input[0] for n in m.graph.node if n.op_type == "Gather"}
    # A Transpose folded at load feeds the Gather: its source is read by the lm_head.
    total = embed = 0
    for t in m.graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        b = n * size.get(t.data_type, 4)
        total += b
        if t.name in gathered:
            embed += b
    return total - embed, total


def copy_bandwidth():
    import torch
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    reps = 20
    for _ in range(reps):
        b.copy_(a)
    e1.record()
    torch.cuda.synchronize()
    return 2.0 * n * reps / (e0.elapsed_time(e1) / 1e3)


def transformers_decode(model, ids, new_tokens, cache):
    """Decode tok/s of greedy generate: (time for N tokens - time for 1) / (N - 1)."""
    import torch
    x = torch.tensor([ids], device="cuda")
    kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
    if cache:
        kw["cache_implementation"] = cache

    def timed(n):
        torch.cuda.synchronize()
        t = time.time()
        out = model.generate(x, max_new_tokens=n, min_new_tokens=n, **kw)
        torch.cuda.synchronize()
        return time.time() - t, out[0, len(ids):].tolist()

    timed(4)  # warm-up (and, static cache, compilation of nothing: eager)
    t1, _ = timed(1)
    tn, toks = timed(new_tokens)
    return (new_tokens - 1) / (tn - t1), toks


def onyx_generate(binary, folder, ini, ids, new_tokens, graphs, extra=()):
    cmd = [binary, folder, "--config", ini, "--prompt-ids", ",".join(map(str, ids)),
           "--max-new-tokens", str(new_tokens), "--eos", "none", "--graphs", graphs, "--quiet",
           *extra]
    p = subprocess.run(cmd, capture_output=True, text=True)
    text = p.stdout + p.stderr
    r = {"ok": p.returncode == 0, "text": text}
    m = re.search(r"prefill: (\d+) tokens in ([0-9.]+) ms.*decode: (\d+) tokens in ([0-9.]+) ms", text)
    if m:
        r["prefill_ms"] = float(m.group(2))
        r["decode_tokens"] = int(m.group(3))
        r["decode_ms"] = float(m.group(4))
    for line in text.splitlines():
        if line.startswith("ids:"):
            r["ids"] = [int(t) for t in line.split()[1:]]
        if line.startswith("device graphs"):
            r["graphs"] = line.strip()
        if "cuBLASLt start-up" in line:
            r["startup"] = line.strip()
    return r


def profile_by_op(binary, folder, ini, ids, new_tokens):
    """Decode time per step by op type from onyx-generate --profile (node by node, graphs
    off): each node's (total - first) / (calls - 1), the first call being the prefill."""
    cmd = [binary, folder, "--config", ini, "--prompt-ids", ",".join(map(str, ids)),
           "--max-new-tokens", str(new_tokens), "--eos", "none", "--graphs", "off", "--quiet",
           "--profile"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    by_op, count = {}, {}
    for line in p.stdout.splitlines():
        m = re.match(r"\s+#\d+\s+(\S+)\s+(\S+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)", line)
        if m and int(m.group(3)) > 1:
            op, calls, total, first = m.group(1), int(m.group(3)), float(m.group(4)), float(m.group(5))
            by_op[op] = by_op.get(op, 0.0) + (total - first) / (calls - 1)
            count[op] = count.get(op, 0) + 1
    rest = re.search(r"(\d+) more nodes: ([0-9.]+) ms", p.stdout)
    return by_op, count, (rest.group(0) if rest else "")


def write_ini(path, cuda_so, cpu_so, strict, cuda_options=""):
    with open(path, "w") as f:
        if strict:
            f.write("[onyx]\nstrict = true\n")
        if cuda_so:
            f.write(f"[provider.cuda]\npath = {cuda_so}\n{cuda_options}")
        f.write(f"[provider.cpu]\npath = {cpu_so}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--onyx-generate", required=True)
    ap.add_argument("--cpu-so", required=True)
    ap.add_argument("--cuda-so", required=True)
    ap.add_argument("--builder", required=True, help="onnxruntime_genai/models/ from the wheel")
    ap.add_argument("--work", required=True)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--cpu-tokens", type=int, default=8, help="0: no CPU run")
    ap.add_argument("--precision", default="fp16", choices=["fp16", "bf16", "int4"])
    ap.add_argument("--nofuse", default="norm_matmul",
                    help="the passes the 'nofuse' run switches off (comma-separated)")
    ap.add_argument("--skip", default="", help="comma-separated runs to leave out (for a "
                    "short device lease): off (graphs off), nofuse (the --nofuse passes off), profile, "
                    "static (transformers' static cache), cpu")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    if "cpu" in skip:
        args.cpu_tokens = 0
    os.makedirs(args.work, exist_ok=True)
    hf, out = os.path.join(args.work, "hf-qwen05"), os.path.join(args.work, f"qwen05-{args.precision}")
    t = time.time()
    model = make_checkpoint(hf, args.layers)
    log(f"checkpoint: Qwen2.5-0.5B shapes, {args.layers} layers, random float16 ({time.time() - t:.1f} s)")
    log(f"export: builder -p {args.precision} -e cuda in {export(args.builder, hf, out, args.precision):.1f} s")
    step_bytes, all_bytes = weight_bytes(out)
    bw = copy_bandwidth()
    floor_s = step_bytes / bw
    log(f"weights: {all_bytes / 1e9:.3f} GB in the export, {step_bytes / 1e9:.3f} GB read a decode step; "
        f"device copy {bw / 1e12:.2f} TB/s: floor {floor_s * 1e6:.0f} us a step = {1 / floor_s:.0f} tok/s")

    rng = random.Random(1)
    ids = [rng.randrange(3, QWEN05["vocab_size"]) for _ in range(args.prompt_len)]
    strict_ini, cpu_ini = os.path.join(args.work, "cuda_strict.ini"), os.path.join(args.work, "cpu.ini")
    write_ini(strict_ini, os.path.abspath(args.cuda_so), os.path.abspath(args.cpu_so), True)
    write_ini(cpu_ini, None, os.path.abspath(args.cpu_so), False)
    lt_ini = os.path.join(args.work, "cuda_strict_cublaslt.ini")
    write_ini(lt_ini, os.path.abspath(args.cuda_so), os.path.abspath(args.cpu_so), True,
              "option.gemv = false\n")
    nopdl_ini = os.path.join(args.work, "cuda_strict_nopdl.ini")
    write_ini(nopdl_ini, os.path.abspath(args.cuda_so), os.path.abspath(args.cpu_so), True,
              "option.pdl = false\n")

    rows = []
    runs = {}
    # nofuse: the --nofuse passes off (norm_matmul: each RMS norm its own kernel again).
    nofuse = [f"--no-optimize={args.nofuse}"]
    for key, ini, graphs, name, extra in (("on", strict_ini, "on", "graphs on", []),
                                          ("nofuse", strict_ini, "on", f"graphs on, {args.nofuse} off",
                                           nofuse),
                                          ("lt", lt_ini, "on", "graphs on, cuBLASLt GEMV", []),
                                          ("nopdl", nopdl_ini, "on", "graphs on, no PDL", []),
                                          ("off", strict_ini, "off", "graphs off", [])):
        if key in skip:
            continue
        r = onyx_generate(args.onyx_generate, out, ini, ids, args.new_tokens, graphs, extra)
        runs[key] = r
        if not r["ok"] or "decode_ms" not in r:
            log(f"onyx-generate (cuda strict, {name}) FAILED:\n" + r["text"][-3000:])
            continue
        step = r["decode_ms"] / 1e3 / r["decode_tokens"]
        rows.append((f"Onyx CUDA strict, {name}", 1 / step, step,
                     f"prefill {args.prompt_len} tokens {r['prefill_ms']:.1f} ms"))
        log(f"  {name}: {r.get('graphs', '')}")
        if key == "on" and "startup" in r:
            log(f"  at open: {r['startup']}")
    by_op, count, rest = ({}, {}, "") if "profile" in skip else profile_by_op(
        args.onyx_generate, out, strict_ini, ids, 16)
    if by_op:
        log("  per decode step, node by node (--profile, graphs off; each node synchronised):")
        for op, ms in sorted(by_op.items(), key=lambda kv: -kv[1]):
            log(f"    {op:<34} {count[op]:4d} nodes {ms * 1e3:9.1f} us")
        if rest:
            log(f"    (not listed: {rest})")
    try:
        # Few tokens: eager transformers is slow, and the static cache slower still here.
        for cache, n in ((None, 64), ("static", 16)):
            if (cache or "dynamic") in skip:
                continue
            tps, toks = transformers_decode(model, ids, min(args.new_tokens, n), cache)
            same = 0
            ref = runs.get("on", {}).get("ids", [])
            while same < min(len(ref), len(toks)) and ref[same] == toks[same]:
                same += 1
            rows.append((f"transformers fp16, {cache or 'dynamic'} cache", tps, 1 / tps,
                         f"first {same} tokens as Onyx's"))
    except Exception as e:  # report and go on: Onyx's figures stand alone
        log(f"transformers failed: {e}")
    del model

    log("")
    log(f"{'decode, batch 1':<38} {'tok/s':>9} {'step us':>9} {'x floor':>8}  note")
    for name, tps, step, note in rows:
        log(f"{name:<38} {tps:9.1f} {step * 1e6:9.0f} {floor_s / step:8.2f}  {note}")
    a, b = runs.get("on", {}).get("ids"), runs.get("off", {}).get("ids")
    if a and b:
        log(f"tokens: graphs on and off {'identical' if a == b else 'DIFFER'} ({len(a)} ids)")
    d = runs.get("nopdl", {}).get("ids")
    if a and d:
        log(f"tokens: PDL on and off {'identical' if a == d else 'DIFFER'} ({len(a)} ids)")
    f = runs.get("nofuse", {}).get("ids")
    if a and f:
        same = next((i for i, (u, v) in enumerate(zip(a, f)) if u != v), min(len(a), len(f)))
        log(f"tokens: {args.nofuse} on and off {'identical' if a == f else f'part at token {same}'}"
            f" ({len(a)} ids; the fused kernel sums the squares in its own order)")
    c = runs.get("lt", {}).get("ids")
    if a and c:
        same = next((i for i, (u, v) in enumerate(zip(a, c)) if u != v), min(len(a), len(c)))
        log(f"tokens: GEMV kernel and cuBLASLt {'identical' if a == c else f'part at token {same}'}"
            f" ({len(a)} ids; both accumulate in float32, in different orders)")
    if args.cpu_tokens and a:
        c = onyx_generate(args.onyx_generate, out, cpu_ini, ids, args.cpu_tokens, "off")
        got = c.get("ids")
        if got is None:
            log("CPU run FAILED:\n" + c["text"][-2000:])
        else:
            log(f"tokens: CPU's first {len(got)} {'identical to' if got == a[:len(got)] else 'DIFFER from'}"
                f" CUDA's (cpu {got}, cuda {a[:len(got)]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
