#!/usr/bin/env python3
"""onyx-generate must give ONNX Runtime GenAI's greedy tokens, exactly, on a model folder
as an exporter wrote it (tests/models/exported/<exporter>-<precision>-<arch>).

    exported_parity.py --onyx-generate BIN --work DIR EXPORT_DIR [EXPORT_DIR ...]

For each folder and each prompt (random ids from fixed seeds: one token, a few, and a
long one that spans many positions), ONNX Runtime GenAI (the onnxruntime_genai package
in this Python) decodes greedily; onyx-generate then runs the untouched folder from DIR,
a working folder that is not the repository root and holds no plugins.ini, with no
--config and no ONYX_CONFIG, so it must find its plugins.ini on its own. Prints one line
per folder and prompt saying what differed or why onyx-generate failed. Exits 77
(skipped) when onnxruntime_genai is not installed (scripts/setup.sh installs it)."""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys

import int8_logits

# (length, seed, fewest tokens the oracle must give). Seeds chosen so that the first three
# run long without meeting eos (fewer would make a weak test; the fp32 exports run the full
# NEW_TOKENS, the int4 Qwen2 export for cuda meets eos after 20 on the first); on the last
# the fp32 Qwen2 models meet eos after 4 tokens, so onyx-generate must stop where the
# oracle does (eos_token_id from genai_config.json).
PROMPTS = ((1, 101, 16), (9, 102, 16), (200, 105, 16), (200, 103, 0))
NEW_TOKENS = 32


def prompt_ids(length, seed, vocab):
    rng = random.Random(seed)
    return [rng.randrange(3, vocab) for _ in range(length)]  # 0-2 are pad, bos, eos


def oracle(og, model, ids):
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(ids) + NEW_TOKENS)
    gen = og.Generator(model, params)
    gen.append_tokens(ids)
    out = []
    while not gen.is_done():
        gen.generate_next_token()
        out.append(int(gen.get_next_tokens()[0]))
    return out


def ids_line(text):
    for line in reversed(text.splitlines()):
        if line.startswith("ids:"):
            return [int(t) for t in line.split()[1:]]
    return None


def onyx(binary, folder, ids, work):
    env = {k: v for k, v in os.environ.items() if k != "ONYX_CONFIG"}
    cmd = [binary, folder, "--prompt-ids", ",".join(map(str, ids)),
           "--max-new-tokens", str(NEW_TOKENS), "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=env)
    got = ids_line(p.stdout) if p.returncode == 0 else None
    why = None
    if got is None:
        tail = "\n    ".join((p.stderr.strip() or p.stdout.strip()).splitlines()[-6:])
        why = f"onyx-generate exited {p.returncode}:\n    {tail}"
    return got, why


def compare(want, got):
    if got == want:
        return None
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    return (f"DIFFERENT from token {first} of {len(want)}: onyx {got[first:first + 6]}, "
            f"onnxruntime-genai {want[first:first + 6]}")


def check_folder(og, binary, folder, work, onyx_run=None, label=None):
    """Each prompt's tokens. An export with int8 activations (accuracy_level 4) may part
    from the oracle where int8 rounding flips a token: that passes when int8_logits shows
    the oracle's margin within the logit difference, and when the same export at
    accuracy_level 0 gives the oracle's tokens exactly."""
    name = label or os.path.basename(os.path.normpath(folder))
    int8 = onyx_run is not None and int8_logits.uses_int8(folder)
    # float16 activations round each product's output: ONNX Runtime's CPU kernels and
    # Onyx's sum in other orders, so a near tie may flip the same way (explained alike).
    half = onyx_run is not None and not int8 and int8_logits.uses_float16(folder)
    try:
        # On the CPU, whatever providers the export names (-e cuda writes cuda options).
        config = og.Config(folder)
        config.clear_providers()
        model = og.Model(config)
    except Exception as e:  # the data itself is broken: say so, do not blame onyx
        print(f"{name}: onnxruntime-genai cannot load it: {e}")
        return 1
    vocab = _vocab(folder)
    failed = 0
    for length, seed, fewest in PROMPTS:
        ids = prompt_ids(length, seed, vocab)
        want = oracle(og, model, ids)
        label = f"{name}, prompt of {length} ids (seed {seed})"
        if len(want) < fewest or len(set(want)) < fewest // 3:
            print(f"{label}: weak test data: onnxruntime-genai gives {want}; "
                  "regenerate with tools/exporters/make_test_exports.py")
            failed += 1
            continue
        got, why = onyx(binary, folder, ids, work)
        differ = why is None and compare(want, got)
        why = why or differ
        if differ and (int8 or half):
            explained, text = int8_logits.explain(folder, ids, want, got, onyx_run, work)
            why = f"{differ}\n    {'int8' if int8 else 'float16'} activations: {text}"
            print(f"{label}: {why}")
            failed += not explained
            continue
        print(f"{label}: {why or f'identical, {len(want)} tokens'}")
        failed += why is not None
    if int8:
        acc0 = int8_logits.copy_with_accuracy(folder, os.path.join(work, name + "-accuracy0"), 0)
        failed += check_folder(og, binary, acc0, work, None, name + " at accuracy_level 0")
    return failed


def _vocab(folder):
    with open(os.path.join(folder, "genai_config.json")) as f:
        return int(json.load(f)["model"]["vocab_size"])


def main():
    try:
        import onnxruntime_genai as og
    except ImportError:
        print("skipped: onnxruntime_genai not installed (scripts/setup.sh installs it)")
        return 77
    ap = argparse.ArgumentParser()
    ap.add_argument("--onyx-generate", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--onyx-run", help="explains tokens that int8 activations flip (needed "
                    "for exports at accuracy_level 4, else they must match exactly)")
    ap.add_argument("folders", nargs="+")
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    binary = os.path.abspath(args.onyx_generate)
    onyx_run = os.path.abspath(args.onyx_run) if args.onyx_run else None
    failed = sum(check_folder(og, binary, os.path.abspath(f), args.work, onyx_run)
                 for f in args.folders)
    print(f"{'FAIL' if failed else 'ok'}: {failed} prompt(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
