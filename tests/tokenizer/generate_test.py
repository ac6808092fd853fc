#!/usr/bin/env python3
"""onyx-generate DIR --prompt TEXT, from text to text, against the references:

  - the prompt's ids (the "prompt ids:" line) are Hugging Face `tokenizers`' encode(TEXT);
  - the generated ids (the "ids:" line) are ONNX Runtime GenAI's greedy ids fed those
    prompt ids (it stops at the same eos);
  - the streamed text is TEXT followed by what `tokenizers`' DecodeStream gives for the
    generated ids after the prompt's (special tokens skipped), byte for byte — random
    weights make plenty of incomplete and invalid UTF-8 for it to hold back.

Folders: the fp32 exported test models (byte-level BPE), and copies of two of them whose
tokenizer.json is replaced by a SentencePiece-style BPE trained here (oracle_test.py's
Llama-2 pipeline: Prepend/Replace normalizers, byte_fallback, a BOS template; and its
Metaspace pre-tokenizer with prepend_scheme first); and --bundled folders (the trained
models/license-qwen2), whose continuations of the ASCII prompts must also read as
English (no U+FFFD; letters, spaces, punctuation). Prints how ONNX Runtime GenAI's own
tokenizer (og.Tokenizer) compares on each, for information (docs/tokenizer.md).

    generate_test.py --onyx-generate BIN --config INI --work DIR --exported DIR [--bundled DIR...]

Exits 77 (skipped) without `tokenizers` or onnxruntime_genai."""
import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import onnxruntime_genai as og
    from tokenizers import Tokenizer
    from tokenizers.decoders import DecodeStream
    import oracle_test as ot
except ImportError as e:
    print(f"skipped: {e} (scripts/setup.sh installs tokenizers and onnxruntime-genai)")
    sys.exit(77)

PROMPTS = ["The GNU General Public License is",
           "h\u00e9llo w\u00f6rld \u2014 \u4f60\u597d \U0001f917 na\u00efve caf\u00e9",
           "Line one\n\n  indented\tline", "<s>special</s> tokens"]
NEW = 24
# The fp32 exports, which ONNX Runtime GenAI runs on the CPU here.
FOLDERS = ["builder-fp32-qwen2", "builder-fp32-llama", "mobius-fp32-qwen2", "mobius-fp32-llama"]


def spm_folder(src, work, pipeline):
    """A copy of `src` with a trained SentencePiece-style tokenizer (512 ids, the model's)."""
    out = os.path.join(work, os.path.basename(src) + "-spm-" + pipeline)
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(src, out)
    j = ot.metaspace_pipelines(ot.metaspace_base(512))[pipeline]
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(Tokenizer.from_str(json.dumps(j)).to_str())
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                   "add_bos_token": True, "tokenizer_class": "LlamaTokenizer"}, f)
    return out


def greedy(model, ids):
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(ids) + NEW)
    gen = og.Generator(model, params)
    gen.append_tokens(ids)
    out = []
    while not gen.is_done():
        gen.generate_next_token()
        out.append(int(gen.get_next_tokens()[0]))
    return out


def streamed(hf, prompt, gen):
    """DecodeStream's text for `gen` after `prompt`. Where it gives up (a run of byte
    tokens that no longer decodes to what it already gave out), onyx-generate says so
    on stderr and prints the remaining ids in brackets instead."""
    ds = DecodeStream(skip_special_tokens=True)
    for i in prompt:
        ds.step(hf, i)
    out = []
    for k, i in enumerate(gen):
        try:
            out.append(ds.step(hf, i) or "")
        except Exception:  # tokenizers' DecodeStreamError (InvalidPrefix)
            return "".join(out) + "[" + " ".join(map(str, gen[k:])) + "]"
    return "".join(out)


def parse(stdout):
    head, sep, tail = stdout.partition("\nprompt ids:")
    if not sep:
        return None, None, None
    lines = ("prompt ids:" + tail).splitlines()
    prompt = [int(t) for t in lines[0].split()[2:]]
    gen = [int(t) for t in lines[1].split()[1:]] if lines[1].startswith("ids:") else None
    return head + "\n", prompt, gen


def reads_as_english(text):
    """A trained model's continuation: no U+FFFD, and letters, spaces and punctuation."""
    plain = sum(c.isascii() and (c.isalpha() or c in " \n,.;:-'()\"") for c in text)
    return "\ufffd" not in text and plain >= 0.9 * len(text)


def check(folder, args, readable=False):
    name = os.path.basename(folder)
    hf = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    model = og.Model(folder)
    og_tok = og.Tokenizer(model)
    ok = True
    og_same = 0
    for p in PROMPTS:
        want_prompt = hf.encode(p).ids
        og_same += [int(i) for i in og_tok.encode(p)] == want_prompt
        cmd = [args.onyx_generate, folder, "--config", args.config, "--prompt", p,
               "--max-new-tokens", str(NEW)]
        r = subprocess.run(cmd, capture_output=True, cwd=args.work)
        out = r.stdout.decode("utf-8", errors="surrogateescape")
        text, prompt, gen = parse(out)
        if r.returncode != 0 or gen is None:
            print(f"{name}: {p!r}: onyx-generate exited {r.returncode}: "
                  f"{r.stderr.decode(errors='replace')[-800:]}")
            ok = False
            continue
        want_gen = greedy(model, prompt)
        want_text = p + streamed(hf, prompt, gen) + "\n"
        problems = []
        if prompt != want_prompt:
            problems.append(f"prompt ids {prompt[:12]}..., tokenizers {want_prompt[:12]}...")
        if gen != want_gen:
            problems.append(f"generated ids {gen[:10]}..., onnxruntime-genai {want_gen[:10]}...")
        if text != want_text:
            problems.append(f"text {text!r}, tokenizers' DecodeStream {want_text!r}")
        if readable and p.isascii() and not reads_as_english(text[len(p):]):
            problems.append(f"unreadable text {text!r}")
        for q in problems:
            print(f"{name}: {p!r}: DIFFERENT {q}")
        ok &= not problems
    print(f"{name}: {len(PROMPTS)} prompts: prompt ids, generated ids and streamed text "
          f"{'identical' if ok else 'NOT identical'} to tokenizers and onnxruntime-genai; "
          f"(onnxruntime-genai's own tokenizer gives tokenizers' prompt ids on {og_same} of "
          f"{len(PROMPTS)})")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onyx-generate", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--exported", required=True)
    ap.add_argument("--bundled", nargs="*", default=[],
                    help="trained folders (models/license-qwen2): their text must also read")
    a = ap.parse_args()
    a.onyx_generate, a.config = os.path.abspath(a.onyx_generate), os.path.abspath(a.config)
    os.makedirs(a.work, exist_ok=True)
    a.exported = os.path.abspath(a.exported)
    folders = [os.path.join(a.exported, d) for d in FOLDERS
               if os.path.exists(os.path.join(a.exported, d, "tokenizer.json"))]
    folders.append(spm_folder(os.path.join(a.exported, "builder-fp32-llama"), a.work, "llama2"))
    folders.append(spm_folder(os.path.join(a.exported, "mobius-fp32-qwen2"), a.work, "first"))
    ok = True
    for f in folders:
        ok &= check(f, a)
    for f in a.bundled:
        ok &= check(os.path.abspath(f), a, readable=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
