#!/usr/bin/env python3
"""A model folder whose genai_config.json is missing, malformed or contradicts the model
must be refused with a message that names the thing: the file, the JSON key, and both
values (what the file says, what the model has). Nothing may crash or leak.

    exported_bad_config.py --onyx-generate BIN --config INI --exports DIR --work DIR
                           [--case NAME ...]

Each case copies one folder of tests/models/exported into WORK, breaks its
genai_config.json one way, and runs onyx-generate on it. The message checks are
substrings (a tuple: any one of them) and whole numbers; case names are listed by
--list. Exits 1 if any case is accepted, crashes, reports a sanitizer error, or gives a
message missing an expected part."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

CONFIG = "genai_config.json"


def set_key(path, value):
    """Returns an edit that sets model.<path> (dotted) to value."""
    def edit(conf):
        node = conf["model"]
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
        return conf
    return edit


def truncate(text):
    return text[: len(text) // 2]


# name: (source folder, edit: None = remove the file, truncate = cut it in half, or a
# function of the parsed JSON; the parts the message must hold)
CASES = {
    "missing": ("builder-fp32-qwen2", None, [CONFIG]),
    "malformed": ("builder-fp32-qwen2", truncate, [CONFIG]),
    "wrong_type": ("builder-fp32-qwen2", set_key("decoder.num_key_value_heads", "two"),
                   [CONFIG, "num_key_value_heads"]),
    "kv_heads": ("builder-fp32-qwen2", set_key("decoder.num_key_value_heads", 4),
                 ["num_key_value_heads", 4, 2]),
    "layers": ("builder-fp32-qwen2", set_key("decoder.num_hidden_layers", 4),
               ["num_hidden_layers", 4, 3]),
    "past_names": ("builder-fp32-qwen2", set_key("decoder.inputs.past_key_names", "past.%d.key"),
                   ["past_key_names", ("past.0.key", "past.%d.key")]),
    "filename": ("builder-fp32-qwen2", set_key("decoder.filename", "absent.onnx"),
                 ["absent.onnx"]),
    "head_size": ("mobius-fp32-llama", set_key("decoder.head_size", 32), ["head_size", 32, 16]),
    "kv_heads_mobius": ("mobius-fp32-llama", set_key("decoder.num_key_value_heads", 2),
                        ["num_key_value_heads", 2, 1]),
}
SANITIZER = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error:")


def make_case(name, exports, work):
    source, edit, _ = CASES[name]
    # Not the case's name: the folder's path must not put a key name into the message.
    folder = os.path.join(work, f"case{list(CASES).index(name)}")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(os.path.join(exports, source), folder)
    path = os.path.join(folder, CONFIG)
    if edit is None:
        os.remove(path)
        return folder
    with open(path) as f:
        text = f.read()
    text = truncate(text) if edit is truncate else json.dumps(edit(json.loads(text)), indent=4)
    with open(path, "w") as f:
        f.write(text)
    return folder


def missing_parts(message, parts):
    lost = []
    for part in parts:
        if isinstance(part, int):
            if not re.search(rf"(?<![\w.]){part}(?![\w.])", message):
                lost.append(str(part))
        elif isinstance(part, tuple):
            if not any(p in message for p in part):
                lost.append(" or ".join(part))
        elif part not in message:
            lost.append(part)
    return lost


def run_case(name, args):
    folder = make_case(name, args.exports, args.work)
    cmd = [args.onyx_generate, folder, "--config", args.config, "--prompt-ids", "5,77,301",
           "--max-new-tokens", "4", "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=args.work)
    message = (p.stderr + p.stdout).strip()
    first = message.splitlines()[0] if message else "(no message)"
    if any(s in message for s in SANITIZER):
        return f"sanitizer report:\n{message[-3000:]}"
    if p.returncode == 0:
        return f"accepted (exit 0): {first}"
    if p.returncode < 0 or p.returncode >= 128:
        return f"crashed (exit {p.returncode}): {first}"
    lost = missing_parts(message, CASES[name][2])
    if lost:
        return f"refused, but the message lacks {', '.join(lost)}: {message}"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onyx-generate")
    ap.add_argument("--config")
    ap.add_argument("--exports")
    ap.add_argument("--work")
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        print("\n".join(CASES))
        return 0
    if not (args.onyx_generate and args.config and args.exports and args.work):
        ap.error("--onyx-generate, --config, --exports and --work are required")
    for k in ("onyx_generate", "config", "exports", "work"):
        setattr(args, k, os.path.abspath(getattr(args, k)))
    os.makedirs(args.work, exist_ok=True)
    failed = 0
    for name in args.case or CASES:
        why = run_case(name, args)
        print(f"{name} ({CASES[name][0]}): {'FAIL: ' + why if why else 'refused clearly'}")
        failed += why is not None
    print(f"{'FAIL' if failed else 'ok'}: {failed} case(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
