#!/usr/bin/env python3
"""Encode throughput: Onyx's tokenizer (libonyx_tokenizer.so, through ctypes) against
Hugging Face `tokenizers` (Rust) on the same tokenizer.json files and the same text,
side by side in one run, one thread each, the ratio printed.

Tokenizers: BPEs trained here by `tokenizers` on the license texts (a larger vocabulary
than the test models'), behind Qwen2's pipeline (NFC, its Split regex, ByteLevel), GPT-2's
(ByteLevel with its regex) and Llama-2's (Prepend/Replace normalizers, byte_fallback),
plus any tokenizer.json given with --tokenizer. Text: the license texts, one encode call
per file, and random multilingual text, one call per 2 KB chunk. Each side runs `--reps`
times over the whole text with a warm cache (the first pass fills it) and the best time
counts; the first, cold pass is printed too. Ids are checked equal before timing.

    tools/bench/bench_tokenizer.py [--lib build/tokenizer/libonyx_tokenizer.so] [--reps 5]
                                   [--vocab 16000] [--tokenizer path/tokenizer.json ...]
"""
import argparse
import ctypes
import json
import os
import random
import sys
import tempfile
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one thread, as Onyx's
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "tokenizer"))
import oracle_test as ot  # noqa: E402  (the license texts, the pipelines, random text)


class Onyx:
    def __init__(self, lib_path, tokenizer_path):
        lib = ctypes.CDLL(lib_path)
        vp = ctypes.c_void_p
        lib.onyx_tokenizer_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(vp), ctypes.POINTER(vp)]
        lib.onyx_tokenizer_encode.argtypes = [vp, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_bool,
                                              ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)),
                                              ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(vp)]
        lib.onyx_tokenizer_free.argtypes = [vp]
        lib.onyx_tokenizer_destroy.argtypes = [vp]
        lib.onyx_error_message.argtypes = [vp]
        lib.onyx_error_message.restype = ctypes.c_char_p
        self.lib, self.t = lib, vp()
        err = vp()
        if lib.onyx_tokenizer_load(tokenizer_path.encode(), ctypes.byref(self.t), ctypes.byref(err)):
            sys.exit(f"onyx cannot load {tokenizer_path}: {lib.onyx_error_message(err).decode()}")
        self.ids = ctypes.POINTER(ctypes.c_int64)()
        self.n = ctypes.c_size_t()

    def encode(self, data):
        if self.lib.onyx_tokenizer_encode(self.t, data, len(data), True, ctypes.byref(self.ids),
                                          ctypes.byref(self.n), None):
            sys.exit("onyx encode failed")
        n = self.n.value
        self.lib.onyx_tokenizer_free(self.ids)
        return n

    def encode_ids(self, data):
        self.lib.onyx_tokenizer_encode(self.t, data, len(data), True, ctypes.byref(self.ids),
                                       ctypes.byref(self.n), None)
        out = self.ids[:self.n.value]
        self.lib.onyx_tokenizer_free(self.ids)
        return out

    def close(self):
        self.lib.onyx_tokenizer_destroy(self.t)


def texts():
    docs = ot.license_texts()
    rng = random.Random(7)
    mixed = "".join(ot.random_text(rng, 200) + " " for _ in range(400))
    chunks = [mixed[i:i + 2048] for i in range(0, len(mixed), 2048)]
    return {"license texts": docs, "random multilingual": chunks}


def best_time(fn, items, reps):
    first = None
    best = float("inf")
    for r in range(reps + 1):
        t0 = time.perf_counter()
        for x in items:
            fn(x)
        dt = time.perf_counter() - t0
        if r == 0:
            first = dt
        else:
            best = min(best, dt)
    return first, best


def bench(name, path, lib, reps, corpora):
    hf = Tokenizer.from_file(path)
    onyx = Onyx(lib, path)
    for label, docs in corpora.items():
        data = [d.encode("utf-8") for d in docs]
        mb = sum(len(d) for d in data) / 1e6
        for d, b in zip(docs, data):
            if hf.encode(d).ids != onyx.encode_ids(b):
                sys.exit(f"{name}: ids differ from tokenizers on {label}; not timing")
        hf = Tokenizer.from_file(path)  # fresh caches for the cold pass
        onyx.close()
        onyx = Onyx(lib, path)
        hf_cold, hf_best = best_time(hf.encode, docs, reps)
        ox_cold, ox_best = best_time(onyx.encode, data, reps)
        tokens = sum(len(hf.encode(d).ids) for d in docs)
        print(f"{name:8s} {label:20s} {mb:6.2f} MB {tokens:8d} tokens | tokenizers "
              f"{mb / hf_best:6.2f} MB/s (cold {mb / hf_cold:6.2f}) | onyx {mb / ox_best:6.2f} MB/s "
              f"(cold {mb / ox_cold:6.2f}) | ratio {hf_best / ox_best:5.2f}x (cold "
              f"{hf_cold / ox_cold:4.2f}x)")
    onyx.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/tokenizer/libonyx_tokenizer.so")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--vocab", type=int, default=16000)
    ap.add_argument("--tokenizer", nargs="*", default=[])
    a = ap.parse_args()
    import tokenizers
    print(f"tokenizers {tokenizers.__version__}, one thread each; ratio = onyx speed / "
          f"tokenizers speed (best of {a.reps} warm passes)")
    work = tempfile.mkdtemp(prefix="bench_tok_")
    bl = ot.byte_level_pipelines(ot.byte_level_base(a.vocab))
    ms = ot.metaspace_pipelines(ot.metaspace_base(a.vocab))
    files = {"qwen2": bl["qwen2"], "gpt2": bl["gpt2"], "llama2": ms["llama2"]}
    paths = {}
    for name, j in files.items():
        paths[name] = os.path.join(work, name + ".json")
        with open(paths[name], "w", encoding="utf-8") as f:
            f.write(Tokenizer.from_str(json.dumps(j)).to_str())
    for p in a.tokenizer:
        paths[os.path.basename(os.path.dirname(os.path.abspath(p))) or p] = p
    corpora = texts()
    for name, p in paths.items():
        bench(name, p, a.lib, a.reps, corpora)


if __name__ == "__main__":
    main()
