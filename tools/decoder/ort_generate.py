#!/usr/bin/env python3
"""Reference greedy generation with ONNX Runtime (CPU) on a decoder in the GenAI layout,
in the loop structure onyx-generate uses:

  prefill   input_ids = the prompt (1, S), attention_mask = ones (1, S),
            past_key_values.* of shape (1, Nkv, 0, H)
  decode    input_ids = the last chosen token (1, 1), attention_mask = ones (1, T)
            growing by one each step, past_key_values.* = the previous step's present.*
  choice    argmax of logits[0, -1] (the lowest id on ties, as numpy.argmax)

--shared-buffer instead binds one (1, Nkv, max_length, H) buffer per past/present pair
as both the past input and the present output (ONNX Runtime's GQA then appends in place:
past_present_share_buffer); the tokens must be the same.

Prints the continuation (for byte-vocabulary models), then the prompt ids and, on the
last line, `ids: ...` — the generated token ids only, without the prompt.

    python3 tools/decoder/ort_generate.py models/tiny-decoder --prompt "The GNU General Public License is"
    python3 tools/decoder/ort_generate.py DIR --prompt-ids 3,14,15 --max-new-tokens 16
"""
import argparse
import json
import os
import sys

import numpy as np
import onnxruntime as ort


def load(path):
    model_path = os.path.join(path, "model.onnx") if os.path.isdir(path) else path
    conf_path = os.path.join(os.path.dirname(model_path), "config.json")
    conf = json.load(open(conf_path)) if os.path.exists(conf_path) else {}
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    pasts = [i for i in sess.get_inputs() if i.name.startswith("past_key_values.")]
    layers = len(pasts) // 2
    _, nkv, _, h = pasts[0].shape
    return sess, conf, layers, int(nkv), int(h)


def greedy_plain(sess, layers, nkv, h, prompt, n_new, eos):
    out, cur = [], np.array([prompt], dtype=np.int64)
    total = len(prompt)
    past = {}
    for i in range(layers):
        for kv in ("key", "value"):
            past[f"past_key_values.{i}.{kv}"] = np.zeros((1, nkv, 0, h), np.float32)
    names = ["logits"] + [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    while len(out) < n_new:
        feeds = {"input_ids": cur, "attention_mask": np.ones((1, total), np.int64), **past}
        res = sess.run(names, feeds)
        tok = int(np.argmax(res[0][0, -1]))
        out.append(tok)
        if tok == eos:
            break
        for j, name in enumerate(names[1:]):
            past[name.replace("present.", "past_key_values.")] = res[1 + j]
        cur = np.array([[tok]], dtype=np.int64)
        total += 1
    return out


def greedy_shared(sess, layers, nkv, h, prompt, n_new, eos, capacity):
    if len(prompt) + n_new > capacity:
        sys.exit(f"prompt + new tokens exceed the buffer capacity {capacity}")
    bufs = {}
    for i in range(layers):
        for kv in ("key", "value"):
            bufs[(i, kv)] = ort.OrtValue.ortvalue_from_numpy(np.zeros((1, nkv, capacity, h), np.float32))
    out, cur, total = [], np.array([prompt], dtype=np.int64), len(prompt)
    while len(out) < n_new:
        io = sess.io_binding()
        io.bind_cpu_input("input_ids", cur)
        io.bind_cpu_input("attention_mask", np.ones((1, total), np.int64))
        io.bind_output("logits")  # first: get_outputs() lists outputs in binding order
        for (i, kv), buf in bufs.items():
            io.bind_ortvalue_input(f"past_key_values.{i}.{kv}", buf)
            io.bind_ortvalue_output(f"present.{i}.{kv}", buf)
        sess.run_with_iobinding(io)
        logits = io.get_outputs()[0].numpy()
        tok = int(np.argmax(logits[0, -1]))
        out.append(tok)
        if tok == eos:
            break
        cur = np.array([[tok]], dtype=np.int64)
        total += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="model directory (model.onnx + config.json) or .onnx file")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt", help="text; its UTF-8 bytes are the ids (byte vocabulary)")
    g.add_argument("--prompt-ids", help="comma-separated token ids")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--eos", type=int, default=None, help="stop after this id")
    ap.add_argument("--shared-buffer", action="store_true",
                    help="past and present bound to one max-length buffer (IO binding)")
    ap.add_argument("--max-length", type=int, default=None,
                    help="shared-buffer capacity (default: config.json max_length)")
    ap.add_argument("--verify", action="store_true",
                    help="also run one prefill over prompt + generated tokens and check that "
                         "its argmax at every position reproduces the generated ids")
    args = ap.parse_args()

    sess, conf, layers, nkv, h = load(args.model)
    prompt = (list(args.prompt.encode()) if args.prompt is not None
              else [int(t) for t in args.prompt_ids.split(",") if t.strip()])
    if not prompt:
        sys.exit("empty prompt")
    eos = args.eos if args.eos is not None else conf.get("eos_token_id")
    if args.shared_buffer:
        cap = args.max_length or conf.get("max_length") or len(prompt) + args.max_new_tokens
        ids = greedy_shared(sess, layers, nkv, h, prompt, args.max_new_tokens, eos, cap)
    else:
        ids = greedy_plain(sess, layers, nkv, h, prompt, args.max_new_tokens, eos)

    if args.verify and len(ids) > 1:
        seq = prompt + ids[:-1]
        feeds = {"input_ids": np.array([seq], np.int64),
                 "attention_mask": np.ones((1, len(seq)), np.int64)}
        for i in range(layers):
            for kv in ("key", "value"):
                feeds[f"past_key_values.{i}.{kv}"] = np.zeros((1, nkv, 0, h), np.float32)
        logits = sess.run(["logits"], feeds)[0][0, len(prompt) - 1:]
        again = [int(t) for t in np.argmax(logits, axis=-1)]
        if again != ids:
            first = next(j for j, (a, b) in enumerate(zip(again, ids)) if a != b)
            sys.exit(f"verify: one-shot prefill disagrees with the cached loop at token {first}")
        print(f"verify: one-shot prefill reproduces all {len(ids)} tokens", file=sys.stderr)

    if conf.get("vocab") == "bytes":
        text = bytes(prompt).decode("utf-8", "replace") + bytes(ids).decode("utf-8", "replace")
        print(text)
    print("prompt_ids:", " ".join(map(str, prompt)))
    print("ids:", " ".join(map(str, ids)))


if __name__ == "__main__":
    main()
