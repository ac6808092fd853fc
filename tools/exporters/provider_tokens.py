#!/usr/bin/env python3
"""Greedy tokens of an export folder on two providers' configs (the CPU and CUDA strict),
and where they part, the per-step logit differences that explain it.

    provider_tokens.py --onyx-generate BIN --onyx-run BIN --ref CPU.ini --test CUDA.ini
                       --work DIR [--new-tokens 32] [--graphs on|off] FOLDER...

For each folder: onyx-generate with each config on the same prompts (random ids from
fixed seeds). Identical ids pass. Where they part at step k, the model is run once per
step 0..k over prompt + the reference's tokens so far (an empty past, the last
position's logits as its only output) by onyx-run with each config against ONNX
Runtime's logits (CPU, float16 exports; bfloat16 has no ONNX Runtime CPU kernels, and
then onyx-run's reference config's logits stand alone): printed is the largest
|logit - ONNX Runtime's| per step for each config, and the reference's margin between
its token and the other's at step k. Exits 1 when any folder differs without a margin
within twice the logit difference, or fails to run.
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys

import numpy as np

PROMPTS = ((9, 102), (200, 105))


def prompt_ids(length, seed, vocab):
    rng = random.Random(seed)
    return [rng.randrange(3, vocab) for _ in range(length)]


def decoder(folder):
    with open(os.path.join(folder, "genai_config.json")) as f:
        return json.load(f)["model"]


def generate(binary, folder, ini, ids, new_tokens, graphs):
    cmd = [binary, folder, "--config", ini, "--prompt-ids", ",".join(map(str, ids)),
           "--max-new-tokens", str(new_tokens), "--eos", "none", "--graphs", graphs, "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("ids:"):
            return [int(t) for t in line.split()[1:]], p.stdout + p.stderr
    return None, p.stdout + p.stderr


def last_logits_case(folder, dest):
    """The folder's model with the last position's logits as its only output."""
    import onnx
    from onnx import TensorProto, helper
    name = decoder(folder)["decoder"]["filename"]
    model = onnx.load(os.path.join(folder, name), load_external_data=False)
    g = model.graph
    elem = next(o for o in g.output if o.name == "logits").type.tensor_type.elem_type
    g.node.append(helper.make_node("Constant", [], ["onyx_last"],
                                   value=helper.make_tensor("i", TensorProto.INT64, [], [-1])))
    g.node.append(helper.make_node("Gather", ["logits", "onyx_last"], ["last_logits"], axis=1))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("last_logits", elem, None))
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    onnx.save(model, os.path.join(dest, "model.onnx"))
    for f in os.listdir(folder):
        if f.endswith(".data"):
            shutil.copy(os.path.join(folder, f), os.path.join(dest, f))
    return model


def feeds(model, folder, ids):
    from onnx import TensorProto
    dec = decoder(folder)["decoder"]
    kv, head = dec["num_key_value_heads"], dec["head_size"]
    out = {}
    for i in model.graph.input:
        et = i.type.tensor_type.elem_type
        if i.name == "input_ids":
            out[i.name] = np.array([ids], np.int64)
        elif i.name == "attention_mask":
            out[i.name] = np.ones((1, len(ids)), np.int64)
        elif i.name == "position_ids":
            out[i.name] = np.arange(len(ids), dtype=np.int64)[None]
        else:  # an empty past, in the model's type (bfloat16 as its raw 16 bits)
            dt = {TensorProto.FLOAT16: np.float16, TensorProto.BFLOAT16: np.uint16}.get(et, np.float32)
            out[i.name] = (np.zeros((1, kv, 0, head), dt), et)
    return out


def tensor(name, value):
    from onnx import helper, numpy_helper
    if isinstance(value, tuple):
        arr, et = value
        t = helper.make_tensor(name, et, arr.shape, vals=b"", raw=True)
        return t
    return numpy_helper.from_array(value, name)


def step_deltas(folder, prompt, ref_tokens, steps, onyx_run, inis, work):
    """Per step and config, the largest |logit - ONNX Runtime's| (or, without ONNX Runtime,
    the reference config's own logits against zeros: None), and the ORT logits."""
    case = os.path.join(work, "logits_case")
    model = last_logits_case(folder, case)
    sess = None
    try:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(os.path.join(case, "model.onnx"), so,
                                    providers=["CPUExecutionProvider"])
    except Exception:
        sess = None
    if sess is None:
        return None, None
    from onnx import numpy_helper
    ort_logits = []
    for step in range(steps + 1):
        f = feeds(model, folder, list(prompt) + list(ref_tokens[:step]))
        ort_in = {k: (v[0] if isinstance(v, tuple) else v) for k, v in f.items()}
        out = sess.run(None, ort_in)[0]
        ort_logits.append(out[0].astype(np.float64))
        d = os.path.join(case, f"test_data_set_{step}")
        os.makedirs(d)
        for k, i in enumerate(model.graph.input):
            with open(os.path.join(d, f"input_{k}.pb"), "wb") as fh:
                fh.write(tensor(i.name, f[i.name]).SerializeToString())
        with open(os.path.join(d, "output_0.pb"), "wb") as fh:
            fh.write(numpy_helper.from_array(out, "last_logits").SerializeToString())
    deltas = []
    for ini in inis:
        p = subprocess.run([onyx_run, "--config", ini, case], capture_output=True, text=True)
        d = {}
        for line in (p.stdout + p.stderr).splitlines():
            m = re.search(r"test_data_set_(\d+) output 0 'last_logits': \w+ worst abs ([0-9.e+-]+)", line)
            if m:
                d[int(m.group(1))] = float(m.group(2))
        deltas.append(d)
    return deltas, ort_logits


def check_folder(args, folder):
    name = os.path.basename(os.path.normpath(folder))
    vocab = int(decoder(folder)["vocab_size"])
    failed = 0
    for length, seed in PROMPTS:
        ids = prompt_ids(length, seed, vocab)
        label = f"{name}, prompt of {length} ids"
        want, wtext = generate(args.onyx_generate, folder, args.ref, ids, args.new_tokens, "off")
        got, gtext = generate(args.onyx_generate, folder, args.test, ids, args.new_tokens, args.graphs)
        if want is None or got is None:
            bad = wtext if want is None else gtext
            print(f"{label}: onyx-generate FAILED ({'reference' if want is None else 'test'}):\n    "
                  + "\n    ".join(bad.strip().splitlines()[-6:]))
            failed += 1
            continue
        graphs = next((l for l in gtext.splitlines() if l.startswith("device graphs")), "")
        if got == want:
            print(f"{label}: identical, {len(want)} tokens; {graphs}")
            continue
        k = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        print(f"{label}: DIFFERENT from token {k}: test {got[k:k + 6]}, reference {want[k:k + 6]}")
        deltas, ort_logits = step_deltas(folder, ids, want, k, args.onyx_run,
                                         [args.ref, args.test], args.work)
        if deltas is None:
            print("    no ONNX Runtime reference for this type: the per-step logits are not shown")
            failed += 1
            continue
        margin = ort_logits[k][want[k]] - ort_logits[k][got[k]]
        line = "; ".join(f"{s}: ref {deltas[0].get(s, float('nan')):.3g}, test "
                         f"{deltas[1].get(s, float('nan')):.3g}" for s in range(k + 1))
        worst = max(deltas[0].get(k, 0.0), deltas[1].get(k, 0.0))
        explained = margin <= 2.0 * worst
        print(f"    largest |logit - ONNX Runtime's| per step: {line}\n    at step {k} ONNX "
              f"Runtime prefers {want[k]} over {got[k]} by {margin:.3g}: "
              f"{'within' if explained else 'NOT within'} twice the logit difference {worst:.3g}")
        failed += not explained
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--onyx-generate", required=True)
    ap.add_argument("--onyx-run", required=True)
    ap.add_argument("--ref", required=True, help="plugins.ini of the reference (the CPU)")
    ap.add_argument("--test", required=True, help="plugins.ini under test (CUDA strict)")
    ap.add_argument("--work", required=True)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--graphs", default="on", choices=["on", "off"])
    ap.add_argument("folders", nargs="+")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failed = sum(check_folder(args, os.path.abspath(f)) for f in args.folders)
    print(f"{'FAIL' if failed else 'ok'}: {failed} prompt(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
