#!/usr/bin/env python3
"""Greedy tokens from onyx-generate must equal ONNX Runtime's on the same decoder and
prompt — for the KV cache head-major and seq-major, growing in place and by copy.

    generate_parity.py --onyx-generate BIN --config plugins.ini --work DIR
                       [--model DIR] [--prompt TEXT | --prompt-ids 1,2,3] [--max-new N]

Without --model it writes a small random decoder into DIR first (a GenAI-layout
graph from tools/decoder). Exits 77 (skipped) when onnx/onnxruntime are missing."""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DECODER = os.path.join(HERE, "..", "..", "tools", "decoder")


def ids_line(text):
    for line in reversed(text.splitlines()):
        if line.startswith("ids:"):
            return line.split()[1:]
    return None


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"FAILED: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
        sys.exit(1)
    return p.stdout


def main():
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        print("skipped: onnx/onnxruntime not installed (scripts/setup.sh installs them)")
        return 77
    ap = argparse.ArgumentParser()
    ap.add_argument("--onyx-generate", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model")
    ap.add_argument("--prompt")
    ap.add_argument("--prompt-ids", default="3,14,15,92,65,35")
    ap.add_argument("--max-new", type=int, default=150)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model = args.model
    if model is None:
        model = os.path.join(args.work, "random-decoder")
        run([sys.executable, os.path.join(DECODER, "make_random_decoder.py"), "--out", model,
             "--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2",
             "--head-dim", "16", "--mlp", "128", "--vocab", "256", "--max-length", "512",
             "--seed", "7"])
    bsnh = os.path.join(args.work, "model-bsnh")
    run([sys.executable, os.path.join(DECODER, "set_kv_layout.py"), model, bsnh,
         "--layout", "bsnh"])
    prompt = ["--prompt", args.prompt] if args.prompt else ["--prompt-ids", args.prompt_ids]
    new = ["--max-new-tokens", str(args.max_new)]
    want = ids_line(run([sys.executable, os.path.join(DECODER, "ort_generate.py"), model]
                        + prompt + new))
    print(f"onnxruntime: {len(want)} tokens")
    failed = 0
    for name, path, growth in (("BNSH in place", model, "in-place"),
                               ("BNSH by copy", model, "copy"),
                               ("BSNH in place", bsnh, "in-place"),
                               ("BSNH by copy", bsnh, "copy")):
        out = run([args.onyx_generate, path, "--config", args.config, "--quiet",
                   "--kv-growth", growth] + prompt + new)
        got = ids_line(out)
        kv = [l for l in out.splitlines() if l.startswith("kv cache:")]
        same = got == want
        failed += not same
        print(f"{name:<14} {'identical' if same else 'DIFFERENT'}  {kv[0] if kv else ''}")
        if not same:
            first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
            print(f"  first difference at token {first}: onyx {got[first:first + 5] if first is not None else got}"
                  f" vs onnxruntime {want[first:first + 5] if first is not None else want}")
        if growth == "in-place" and "KV bytes moved 0" not in out:
            print("  in-place growth moved bytes")
            failed += 1
    print(f"{4 - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
