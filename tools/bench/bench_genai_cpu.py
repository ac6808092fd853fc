#!/usr/bin/env python3
"""Onyx against ONNX Runtime GenAI on the CPU, on the model as its builder exports it.

Makes a random-weight checkpoint of Qwen2.5-0.5B's shapes (hidden 896, MLP 4864, 24
layers, 14 query heads, 2 KV heads, vocab 151936, tied embeddings), exports it with
`python -m onnxruntime_genai.models.builder -p fp32 -e cpu` (or -p int4 with --int4),
then in one run generates the same greedy tokens with ONNX Runtime GenAI and with
onyx-generate at the same thread count: ONNX Runtime GenAI through intra_op_num_threads
in the folder's genai_config.json, Onyx through the threads of a plugins.ini written
here. Prints prefill and decode tokens/s for both, the ratios, and whether the tokens
are identical. Several onyx-generate builds (comma-separated) run in the same rounds,
one row each: a before/after beside ONNX Runtime GenAI. Each run notes the load
average it started at (other work on the machine skews the figures; compare rows of
one invocation).

    bench_genai_cpu.py [--threads 2] [--prompt-len 128] [--new 64] [--runs 3] [--int4]
                       [--cache DIR] [--onyx-generate build/tools/onyx-generate] [--ort-only]

Needs a Python with torch, transformers and onnxruntime-genai (e.g. /tmp/exp/bin/python,
see ../shared/EXPORTERS.md); a Python with only onnxruntime-genai will do once the export
is cached. The checkpoint and the export are kept under --cache (default
$TMPDIR/onyx-bench-genai), so a second run starts at once; --fresh makes them again.
"""
import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SHAPE = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
             num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
             max_position_embeddings=4096, tie_word_embeddings=True)


def make_checkpoint(hf):
    """Random weights; initializer_range 0.05 so that greedy tokens vary a little."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(0)
    cfg = Qwen2Config(initializer_range=0.05, bos_token_id=151643, eos_token_id=151645, **SHAPE)
    Qwen2ForCausalLM(cfg).eval().save_pretrained(hf + ".tmp")
    os.replace(hf + ".tmp", hf)


def export(cache, precision, fresh):
    hf = os.path.join(cache, "hf-qwen2.5-0.5b-shaped")
    out = os.path.join(cache, f"builder-{precision}-qwen2.5-0.5b-shaped")
    if fresh:
        shutil.rmtree(hf, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    if os.path.exists(os.path.join(out, "genai_config.json")):
        return out
    if not os.path.exists(os.path.join(hf, "config.json")):
        print(f"writing the random checkpoint {hf}", flush=True)
        make_checkpoint(hf)
    print(f"exporting with the builder ({precision}, cpu) into {out}", flush=True)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", hf, "-o", tmp,
           "-p", precision, "-e", "cpu", "-c", os.path.join(cache, "builder-cache")]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"export failed: {' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    os.replace(tmp, out)
    return out


def set_threads(folder, threads):
    path = os.path.join(folder, "genai_config.json")
    with open(path) as f:
        conf = json.load(f)
    conf["model"]["decoder"].setdefault("session_options", {})["intra_op_num_threads"] = threads
    with open(path, "w") as f:
        json.dump(conf, f, indent=4)


def genai_generate(og, folder, prompt, n_new):
    """Greedy tokens from ONNX Runtime GenAI. append_tokens runs the prefill; the first
    generate_next_token only picks from its logits, each later one runs a decode step.
    The model is loaded afresh, so its prefill is a first run, as onyx-generate's is."""
    model = og.Model(folder)
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(prompt) + n_new)
    gen = og.Generator(model, params)
    t0 = time.perf_counter()
    gen.append_tokens(prompt)
    t_prefill = time.perf_counter() - t0
    ids = []
    t0 = time.perf_counter()
    while not gen.is_done():
        gen.generate_next_token()
        ids.append(int(gen.get_next_tokens()[0]))
    t_decode = time.perf_counter() - t0
    del gen, params, model
    return ids, len(prompt) / t_prefill, (len(ids) - 1) / t_decode if len(ids) > 1 else 0.0


def onyx_generate(binary, folder, prompt, n_new, threads, work):
    ini = os.path.join(work, "plugins.ini")
    cpu_so = os.path.abspath(os.path.join(os.path.dirname(binary), "..", "providers", "cpu",
                                          "libonyx_cpu.so"))
    with open(ini, "w") as f:
        f.write(f"[onyx]\nthreads = {threads}\n[provider.cpu]\npath = {cpu_so}\n")
    cmd = [binary, folder, "--config", ini, "--quiet", "--prompt-ids",
           ",".join(map(str, prompt)), "--max-new-tokens", str(n_new)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    ids = re.search(r"^ids:(.*)$", p.stdout, re.M)
    m = re.search(r"prefill: \d+ tokens in [0-9.]+ ms \(([0-9.]+) tokens/s\); decode: \d+ "
                  r"tokens in [0-9.]+ ms \(([0-9.]+) tokens/s\)", p.stdout)
    if p.returncode != 0 or not ids or not m:
        tail = "\n  ".join((p.stderr.strip() or p.stdout.strip()).splitlines()[-8:])
        return None, f"onyx-generate exited {p.returncode}:\n  {tail}"
    return ([int(t) for t in ids.group(1).split()], float(m.group(1)), float(m.group(2))), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--int4", action="store_true", help="the builder's -p int4 export")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "onyx-bench-genai"))
    ap.add_argument("--fresh", action="store_true", help="make the checkpoint and export again")
    ap.add_argument("--onyx-generate", default=os.path.join(REPO, "build", "tools", "onyx-generate"),
                    help="one onyx-generate, or several separated by commas (builds to compare)")
    ap.add_argument("--ort-only", action="store_true", help="ONNX Runtime GenAI alone")
    ap.add_argument("--runs", type=int, default=3, help="interleaved runs of each; the best counts")
    args = ap.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    folder = export(args.cache, "int4" if args.int4 else "fp32", args.fresh)
    set_threads(folder, args.threads)
    rng = random.Random(1)
    prompt = [rng.randrange(1, 30000) for _ in range(args.prompt_len)]
    import onnxruntime_genai as og
    print(f"model {folder}\nprompt {len(prompt)} tokens, {args.new} new, {args.threads} threads, "
          f"{args.runs} runs, onnxruntime-genai {og.__version__}, load average "
          f"{os.getloadavg()[0]:.2f} (other work on the machine skews the figures)", flush=True)
    builds = [] if args.ort_only else args.onyx_generate.split(",")
    names = ["onyx"] if len(builds) == 1 else [f"onyx[{j}]" for j in range(len(builds))]
    for name, b in zip(names, builds):
        if len(builds) > 1:
            print(f"{name} = {b}")
    runs = {"onnxruntime-genai": [], **{name: [] for name in names}}
    loads = []
    with tempfile.TemporaryDirectory(prefix="onyx-bench-") as work:
        for _ in range(args.runs):
            loads.append(os.getloadavg()[0])
            runs["onnxruntime-genai"].append(genai_generate(og, folder, prompt, args.new))
            for name, b in zip(names, builds):
                res, why = onyx_generate(os.path.abspath(b), folder, prompt, args.new,
                                         args.threads, work)
                if res is None:
                    print(why)
                    return 1
                runs[name].append(res)
    print(f"{'':<18} {'prefill tok/s':>14} {'decode tok/s':>13}   (best of the runs; median; "
          "each run)")
    best = {}
    for name, rs in runs.items():
        if not rs:
            continue
        best[name] = (rs[0][0], max(r[1] for r in rs), max(r[2] for r in rs))
        med = f"{statistics.median(r[1] for r in rs):.1f}/{statistics.median(r[2] for r in rs):.2f}"
        each = ", ".join(f"{r[1]:.1f}/{r[2]:.2f}" for r in rs)
        print(f"{name:<18} {best[name][1]:>14.1f} {best[name][2]:>13.2f}   ({med}; {each})")
    print(f"load average at the start of each run: {', '.join(f'{v:.2f}' for v in loads)}; "
          f"now {os.getloadavg()[0]:.2f}")
    g_ids = best["onnxruntime-genai"][0]
    if args.ort_only:
        print(f"tokens: {len(g_ids)}, {len(set(g_ids))} distinct")
        return 0
    g = best["onnxruntime-genai"]
    all_same = True
    for name in names:
        o = best[name]
        same = all(r[0] == g_ids for r in runs[name])
        all_same = all_same and same
        print(f"{name} / onnxruntime-genai: prefill {o[1] / g[1]:.2f}x, decode {o[2] / g[2]:.2f}x; "
              f"tokens {'identical' if same else 'DIFFER'} ({len(g_ids)} tokens, "
              f"{len(set(g_ids))} distinct)")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
