#!/usr/bin/env python3
"""Reference greedy generation with ONNX Runtime (CPU) on a decoder in the GenAI layout,
driven by its genai_config.json (names, eos, context length), in the loop structure
onyx-generate uses:

  prefill   input_ids = the prompt (1, S), attention_mask = ones (1, S), position_ids
            0..S-1 when the model has them, past_key_values.* of shape (1, Nkv, 0, H)
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
    """The session and what genai_config.json says: the names, eos, context length."""
    model_dir = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    conf_path = os.path.join(model_dir, "genai_config.json")
    conf = json.load(open(conf_path)) if os.path.exists(conf_path) else {}
    model_conf = conf.get("model", {})
    dec = model_conf.get("decoder", {})
    model_path = (os.path.join(path, dec.get("filename", "model.onnx")) if os.path.isdir(path)
                  else path)
    names = {"input_ids": "input_ids", "attention_mask": "attention_mask",
             "position_ids": "position_ids", "past_key_names": "past_key_values.%d.key",
             "past_value_names": "past_key_values.%d.value", "logits": "logits",
             "present_key_names": "present.%d.key", "present_value_names": "present.%d.value"}
    names.update(dec.get("inputs", {}))
    names.update(dec.get("outputs", {}))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    inputs = {i.name: i for i in sess.get_inputs()}
    layers = dec.get("num_hidden_layers") or sum(
        1 for n in inputs if n.startswith(names["past_key_names"].split("%d")[0])
        and n.endswith(names["past_key_names"].split("%d")[1]))
    shape = inputs[names["past_key_names"] % 0].shape
    nkv = shape[1] if isinstance(shape[1], int) else dec["num_key_value_heads"]
    h = shape[3] if isinstance(shape[3], int) else dec["head_size"]
    return sess, conf, names, int(layers), int(nkv), int(h)


def feeds_for(sess, names, ids, total, past_len):
    """input_ids, attention_mask and (when the model has it) position_ids of a step."""
    have = {i.name for i in sess.get_inputs()}
    feeds = {names["input_ids"]: np.array([ids], dtype=np.int64)}
    if names["attention_mask"] in have:
        feeds[names["attention_mask"]] = np.ones((1, total), np.int64)
    if names["position_ids"] in have:
        feeds[names["position_ids"]] = np.arange(past_len, past_len + len(ids),
                                                 dtype=np.int64)[None]
    return feeds


def greedy_plain(sess, names, layers, nkv, h, prompt, n_new, eos):
    out, cur, total = [], list(prompt), len(prompt)
    past = {}
    for i in range(layers):
        for kind in ("key", "value"):
            past[names[f"past_{kind}_names"] % i] = np.zeros((1, nkv, 0, h), np.float32)
    outs = [names["logits"]] + [names[f"present_{kind}_names"] % i
                                for i in range(layers) for kind in ("key", "value")]
    while len(out) < n_new:
        feeds = {**feeds_for(sess, names, cur, total, total - len(cur)), **past}
        res = sess.run(outs, feeds)
        tok = int(np.argmax(res[0][0, -1]))
        out.append(tok)
        if tok in eos:
            break
        for j, (i, kind) in enumerate((i, k) for i in range(layers) for k in ("key", "value")):
            past[names[f"past_{kind}_names"] % i] = res[1 + j]
        cur = [tok]
        total += 1
    return out


def greedy_shared(sess, names, layers, nkv, h, prompt, n_new, eos, capacity):
    if len(prompt) + n_new > capacity:
        sys.exit(f"prompt + new tokens exceed the buffer capacity {capacity}")
    bufs = {}
    for i in range(layers):
        for kind in ("key", "value"):
            bufs[(i, kind)] = ort.OrtValue.ortvalue_from_numpy(
                np.zeros((1, nkv, capacity, h), np.float32))
    out, cur, total = [], list(prompt), len(prompt)
    while len(out) < n_new:
        io = sess.io_binding()
        for name, value in feeds_for(sess, names, cur, total, total - len(cur)).items():
            io.bind_cpu_input(name, value)
        io.bind_output(names["logits"])  # first: get_outputs() lists outputs in binding order
        for (i, kind), buf in bufs.items():
            io.bind_ortvalue_input(names[f"past_{kind}_names"] % i, buf)
            io.bind_ortvalue_output(names[f"present_{kind}_names"] % i, buf)
        sess.run_with_iobinding(io)
        logits = io.get_outputs()[0].numpy()
        tok = int(np.argmax(logits[0, -1]))
        out.append(tok)
        if tok in eos:
            break
        cur = [tok]
        total += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="model folder (genai_config.json beside the model) or .onnx file")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt", help="text; its UTF-8 bytes are the ids (byte vocabulary)")
    g.add_argument("--prompt-ids", help="comma-separated token ids")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--eos", type=int, default=None, help="stop after this id")
    ap.add_argument("--shared-buffer", action="store_true",
                    help="past and present bound to one max-length buffer (IO binding)")
    ap.add_argument("--max-length", type=int, default=None,
                    help="shared-buffer capacity (default: model.context_length)")
    ap.add_argument("--verify", action="store_true",
                    help="also run one prefill over prompt + generated tokens and check that "
                         "its argmax at every position reproduces the generated ids")
    args = ap.parse_args()

    sess, conf, names, layers, nkv, h = load(args.model)
    model_conf = conf.get("model", {})
    prompt = (list(args.prompt.encode()) if args.prompt is not None
              else [int(t) for t in args.prompt_ids.split(",") if t.strip()])
    if not prompt:
        sys.exit("empty prompt")
    if args.eos is not None:
        eos = {args.eos}
    else:
        conf_eos = model_conf.get("eos_token_id", [])
        eos = set(conf_eos if isinstance(conf_eos, list) else [conf_eos])
    if args.shared_buffer:
        cap = (args.max_length or model_conf.get("context_length")
               or len(prompt) + args.max_new_tokens)
        ids = greedy_shared(sess, names, layers, nkv, h, prompt, args.max_new_tokens, eos, cap)
    else:
        ids = greedy_plain(sess, names, layers, nkv, h, prompt, args.max_new_tokens, eos)

    if args.verify and len(ids) > 1:
        seq = prompt + ids[:-1]
        feeds = feeds_for(sess, names, seq, len(seq), 0)
        for i in range(layers):
            for kind in ("key", "value"):
                feeds[names[f"past_{kind}_names"] % i] = np.zeros((1, nkv, 0, h), np.float32)
        logits = sess.run([names["logits"]], feeds)[0][0, len(prompt) - 1:]
        again = [int(t) for t in np.argmax(logits, axis=-1)]
        if again != ids:
            first = next(j for j, (a, b) in enumerate(zip(again, ids)) if a != b)
            sys.exit(f"verify: one-shot prefill disagrees with the cached loop at token {first}")
        print(f"verify: one-shot prefill reproduces all {len(ids)} tokens", file=sys.stderr)

    if model_conf.get("vocab_size") == 256:  # a byte vocabulary: ids are the text's bytes
        text = bytes(prompt).decode("utf-8", "replace") + bytes(ids).decode("utf-8", "replace")
        print(text)
    print("prompt_ids:", " ".join(map(str, prompt)))
    print("ids:", " ".join(map(str, ids)))


if __name__ == "__main__":
    main()
