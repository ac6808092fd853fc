#!/usr/bin/env python3
"""Writes the exported test models in tests/models/exported/: tiny random-weight Qwen2- and
Llama-shaped checkpoints, exported by the real exporters as users run them.

    make_test_exports.py [--out DIR] [--int4] [--keep-checkpoints DIR] [--check]

Each folder is <exporter>-<precision>-<arch>, as the exporter wrote it (model.onnx,
model.onnx.data, genai_config.json, tokenizer.json, tokenizer_config.json):

    builder-fp32-qwen2   builder-fp32-llama    python -m onnxruntime_genai.models.builder
                                                 -i HF -o OUT -p fp32 -e cpu
    mobius-fp32-qwen2    mobius-fp32-llama     python -m mobius build --config HF
                                                 --runtime ort-genai OUT
    builder-int4-qwen2   builder-int4-llama    (--int4 only) the builder with -p int4 -e cpu:
                                                 MatMulNBits at accuracy_level 4 (int8
                                                 activations), GatherBlockQuantized
    builder-int4-qwen2-cuda  builder-int4-llama-cuda
                                               (--int4 only) -p int4 -e cuda: float16
                                                 activations, accuracy_level 0; they run on
                                                 the CPU too
    builder-fp16-qwen2-cuda  builder-fp16-llama-cuda
                                               the builder with -p fp16 -e cuda: float16
                                                 weights and activations, GroupQueryAttention
    mobius-f16-qwen2-cuda    mobius-f16-llama-cuda
    mobius-bf16-qwen2-cuda   mobius-bf16-llama-cuda
                                               mobius with --ep cuda --dtype f16 (bf16):
                                                 GroupQueryAttention and the contrib norms
                                                 (model-local functions as fallbacks)

Needs a Python with torch, transformers, tokenizers, safetensors, onnx, onnxruntime-genai
(the builder and the oracle) and mobius-onnx with onnxscript and onnx-ir; run it with that
Python (e.g. /tmp/exp/bin/python, see ../../../shared/EXPORTERS.md). CI never runs it: it
only reads the committed folders.

Reproducible: fixed torch seeds, a byte-level BPE tokenizer trained with `tokenizers` on
/usr/share/common-licenses (sorted regular files), and the exporters' versions written to
README.md beside the folders. The weights are drawn with initializer_range 0.2, not the
usual 0.02: with tiny random weights at 0.02 greedy decoding repeats one token, a weak
test; at 0.2 the greedy tokens vary from step to step. --check runs ONNX Runtime GenAI on
each folder and prints how many distinct tokens greedy decoding gives.
"""
import argparse
import importlib.metadata as md
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
LICENSES = "/usr/share/common-licenses"
VOCAB = 512
SPECIALS = ["<|endoftext|>", "<s>", "</s>"]  # ids 0 (pad), 1 (bos), 2 (eos)

# Tiny shapes: each export stays well under 1 MB with its external data. Qwen2 has the
# q/k/v biases and tied embeddings; Llama an untied head and a wider KV group (4:1).
ARCHS = {
    "qwen2": dict(cls="Qwen2", seed=11, hidden_size=64, intermediate_size=128,
                  num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                  tie_word_embeddings=True),
    "llama": dict(cls="Llama", seed=12, hidden_size=64, intermediate_size=160,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                  tie_word_embeddings=False),
}
PACKAGES = ["torch", "transformers", "tokenizers", "onnx", "onnxruntime", "onnxruntime-genai",
            "mobius-onnx", "onnxscript", "onnx-ir"]


def train_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    files = sorted(os.path.join(LICENSES, f) for f in os.listdir(LICENSES)
                   if not os.path.islink(os.path.join(LICENSES, f)))
    tok.train(files, trainer)
    return tok


def write_checkpoint(arch, spec, tok, out):
    import torch
    import transformers
    from transformers import PreTrainedTokenizerFast
    torch.manual_seed(spec["seed"])
    shape = {k: v for k, v in spec.items() if k not in ("cls", "seed")}
    cfg = getattr(transformers, spec["cls"] + "Config")(
        vocab_size=VOCAB, max_position_embeddings=512, initializer_range=0.2,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, **shape)
    model = getattr(transformers, spec["cls"] + "ForCausalLM")(cfg).eval()
    model.save_pretrained(out)
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=SPECIALS[1], eos_token=SPECIALS[2],
                            pad_token=SPECIALS[0]).save_pretrained(out)


def export_commands(hf, out, exporter, precision, ep="cpu"):
    if exporter == "builder":
        return [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", hf, "-o", out,
                "-p", precision, "-e", ep, "-c", out + ".cache"]
    cmd = [sys.executable, "-m", "mobius", "build", "--config", hf, "--runtime", "ort-genai"]
    if ep != "cpu":  # the fp32 exports keep mobius's portable default
        cmd += ["--ep", ep, "--dtype", precision]
    return cmd + [out]


def export(work, arch, out, exporter, precision, ep="cpu"):
    """Runs in `work` with the checkpoint named relatively: mobius writes the path it was
    given into the graph's name, and the folders must not depend on where they were made."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = export_commands("hf-" + arch, out, exporter, precision, ep)
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    shutil.rmtree(out + ".cache", ignore_errors=True)
    if p.returncode != 0:
        sys.exit(f"export failed: {' '.join(cmd)}\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}")


def check(folder):
    """Greedy tokens from ONNX Runtime GenAI: a short look that the data is not weak."""
    import onnxruntime_genai as og
    config = og.Config(folder)
    config.clear_providers()  # the -e cuda exports run on the CPU here
    model = og.Model(config)
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=7 + 32)
    gen = og.Generator(model, params)
    gen.append_tokens([5, 77, 301, 12, 480, 9, 150])
    out = []
    while not gen.is_done():
        gen.generate_next_token()
        out.append(int(gen.get_next_tokens()[0]))
    return out


def folder_bytes(folder):
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))


def write_readme(out, names):
    vers = []
    for p in PACKAGES:
        try:
            vers.append(f"{p} {md.version(p)}")
        except md.PackageNotFoundError:
            vers.append(f"{p} (not installed)")
    lines = [
        "# Models as the exporters write them",
        "",
        "Written by `tools/exporters/make_test_exports.py` (do not edit by hand; run it again).",
        "Tiny random-weight checkpoints (transformers, fixed seeds, initializer_range 0.2), a",
        "byte-level BPE tokenizer trained on /usr/share/common-licenses, each exported as-is:",
        "",
        "- `builder-*`: `python -m onnxruntime_genai.models.builder -i HF -o OUT -p PRECISION -e cpu`",
        "  (`*-cuda`: `-e cuda`, float16 activations)",
        "- `mobius-*`: `python -m mobius build --config HF --runtime ort-genai OUT`",
        "  (`*-cuda`: with `--ep cuda --dtype f16|bf16`)",
        "",
        "Folders: " + ", ".join(f"`{n}`" for n in names) + ".",
        "",
        "Exporter and library versions: " + ", ".join(vers) + ".",
        "",
        "tests/decoder/exported_parity.py checks onyx-generate against ONNX Runtime GenAI on",
        "each folder; tests/decoder/exported_bad_config.py breaks copies of their",
        "genai_config.json. Add `--int4` for the builder's int4 exports as well.",
        "",
    ]
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "models", "exported"))
    ap.add_argument("--int4", action="store_true", help="also the builder's -p int4 exports")
    ap.add_argument("--keep-checkpoints", help="write the HF checkpoints here (default: a temp dir)")
    ap.add_argument("--check", action="store_true", help="print ONNX Runtime GenAI's greedy tokens")
    args = ap.parse_args()
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    work = os.path.abspath(args.keep_checkpoints) if args.keep_checkpoints else tempfile.mkdtemp(prefix="onyx-hf-")
    tok = train_tokenizer()
    jobs = [("builder", "fp32", "cpu"), ("mobius", "fp32", "cpu"), ("builder", "fp16", "cuda"),
            ("mobius", "f16", "cuda"), ("mobius", "bf16", "cuda")]
    if args.int4:
        jobs += [("builder", "int4", "cpu"), ("builder", "int4", "cuda")]
    names = []
    for arch, spec in ARCHS.items():
        hf = os.path.join(work, "hf-" + arch)
        write_checkpoint(arch, spec, tok, hf)
        for exporter, precision, ep in jobs:
            name = f"{exporter}-{precision}-{arch}" + ("" if ep == "cpu" else "-" + ep)
            folder = os.path.join(args.out, name)
            export(work, arch, folder, exporter, precision, ep)
            names.append(name)
            line = f"{name:<24} {folder_bytes(folder) / 1024:7.0f} KiB"
            if args.check:
                try:
                    toks = check(folder)
                    line += f"  {len(toks)} tokens, {len(set(toks))} distinct: {toks[:10]}"
                except Exception as e:  # ONNX Runtime's CPU kernels lack some bf16 ops
                    line += f"  ONNX Runtime GenAI cannot run it: {str(e).splitlines()[0][:120]}"
            print(line)
    # Every folder there, not only this run's: a run without --int4 keeps the int4 ones.
    names = [n for n in os.listdir(args.out)
             if os.path.exists(os.path.join(args.out, n, "genai_config.json"))]
    write_readme(args.out, sorted(names))
    if not args.keep_checkpoints:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
