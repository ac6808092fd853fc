#!/usr/bin/env python3
"""Makes models/license-qwen2 the way users' models are made: a byte-level BPE tokenizer
trained by Hugging Face `tokenizers`, a small Qwen2-shaped transformers checkpoint trained
with PyTorch on the CPU (minutes), and ONNX Runtime GenAI's model builder exporting it.

    make_license_model.py [--out models/license-qwen2] [--steps 1200] [--keep-checkpoint DIR]

1. Tokenizer: Qwen2's pipeline (NFC; its Split regex; ByteLevel without regex; the
   ByteLevel decoder), 1024 ids trained on /usr/share/common-licenses (sorted regular
   files), <|endoftext|> as id 0: the end of each text, the eos and the pad token.
2. Checkpoint: Qwen2ForCausalLM, 4 layers, hidden 128, MLP 384, 4 query heads on 2 KV
   heads, tied embeddings, 1024 positions (about 1M parameters). Trained on the license
   texts as one stream of windows of 128 ids, AdamW, cosine schedule; fixed seeds, one
   thread, fixed data order, so a rerun with the same versions should give the same
   weights (the committed folder was made once; it is not compared bit for bit).
3. Export: python -m onnxruntime_genai.models.builder -i CHECKPOINT -o OUT -p fp32 -e cpu
   (model.onnx, model.onnx.data, genai_config.json, tokenizer.json, tokenizer_config.json).

Then it prints ONNX Runtime GenAI's greedy continuation of a prompt and writes README.md
into the folder with the loss, the sample and the library versions. Needs a Python with
torch, transformers, tokenizers and onnxruntime-genai (e.g. /tmp/exp/bin/python).
"""
import argparse
import importlib.metadata as md
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
LICENSES = "/usr/share/common-licenses"
VOCAB = 1024
EOT = "<|endoftext|>"
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
               r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SHAPE = dict(hidden_size=128, intermediate_size=384, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2)
SEQ, BATCH, LR = 128, 16, 3e-3
PROMPT = "The GNU General Public License is"
PACKAGES = ["torch", "transformers", "tokenizers", "onnx", "onnxruntime", "onnxruntime-genai"]


def texts():
    names = sorted(f for f in os.listdir(LICENSES) if not os.path.islink(os.path.join(LICENSES, f)))
    return [open(os.path.join(LICENSES, f), encoding="utf-8").read() for f in names]


def train_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[EOT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts(), trainer)
    return tok


def batches(ids, steps, seed):
    import numpy as np
    import torch
    rng = np.random.default_rng(seed)
    data = torch.tensor(ids, dtype=torch.long)
    for _ in range(steps):
        starts = rng.integers(0, len(ids) - SEQ - 1, BATCH)
        yield torch.stack([data[s:s + SEQ + 1] for s in starts])


def train(tok, out, steps):
    import torch
    import transformers
    from transformers import PreTrainedTokenizerFast
    torch.manual_seed(0)
    torch.set_num_threads(1)
    eot = tok.token_to_id(EOT)
    ids = []
    for t in texts():
        ids += tok.encode(t).ids + [eot]
    cfg = transformers.Qwen2Config(vocab_size=VOCAB, max_position_embeddings=1024,
                                   tie_word_embeddings=True, bos_token_id=eot, eos_token_id=eot,
                                   pad_token_id=eot, rope_theta=10000.0, **SHAPE)
    model = transformers.Qwen2ForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 100) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    model.train()
    t0, losses = time.time(), []
    for step, b in enumerate(batches(ids, steps, 1)):
        loss = model(input_ids=b[:, :-1], labels=b[:, :-1].clone()).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 0 or step == steps - 1:
            print(f"step {step:5d}  loss {sum(losses[-50:]) / len(losses[-50:]):.3f}  "
                  f"{time.time() - t0:6.0f} s", flush=True)
    model.eval()
    model.save_pretrained(out)
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOT, pad_token=EOT,
                            unk_token=None).save_pretrained(out)
    params = sum(p.numel() for p in model.parameters())
    return {"tokens": len(ids), "params": params, "loss": sum(losses[-100:]) / 100,
            "seconds": time.time() - t0}


def greedy(folder, prompt, new):
    import onnxruntime_genai as og
    model = og.Model(folder)
    tok = og.Tokenizer(model)
    from tokenizers import Tokenizer
    hf = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    ids = hf.encode(prompt).ids
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(ids) + new)
    gen = og.Generator(model, params)
    gen.append_tokens(ids)
    out = []
    while not gen.is_done():
        gen.generate_next_token()
        out.append(int(gen.get_next_tokens()[0]))
    del tok
    return ids, out, hf.decode(ids + out)


def readme(out, stats, sample):
    vers = []
    for p in PACKAGES:
        try:
            vers.append(f"{p} {md.version(p)}")
        except md.PackageNotFoundError:
            vers.append(f"{p} (not installed)")
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    text = f"""# license-qwen2

A Qwen2-shaped decoder ({stats['params'] / 1e6:.2f}M parameters, {size / 1e6:.1f} MB with its
tokenizer) trained on the license texts in /usr/share/common-licenses, made the way users'
models are: a byte-level BPE tokenizer trained by Hugging Face `tokenizers`, a
transformers checkpoint trained with PyTorch on the CPU, exported by ONNX Runtime GenAI's
model builder (fp32). Written by `tools/exporters/make_license_model.py` (do not edit by
hand; run it again).

```sh
build/tools/onyx-generate models/license-qwen2 --prompt "{PROMPT}" --max-new-tokens 120
```

ONNX Runtime GenAI, greedy, the prompt encoded by `tokenizers`:

```
{sample}
```

| | |
| --- | --- |
| tokenizer | byte-level BPE, {VOCAB} ids, Qwen2's pipeline (NFC, its Split regex, ByteLevel); `{EOT.replace('|', chr(92) + '|')}` (id 0) ends each text and is eos and pad |
| model | Qwen2ForCausalLM: {SHAPE['num_hidden_layers']} layers, hidden {SHAPE['hidden_size']}, MLP {SHAPE['intermediate_size']}, {SHAPE['num_attention_heads']} query heads on {SHAPE['num_key_value_heads']} KV heads, tied embeddings, 1024 positions |
| training | {stats['tokens']} tokens, windows of {SEQ}, batch {BATCH}, AdamW lr {LR} cosine, {stats['steps']} steps, {stats['seconds']:.0f} s on one CPU thread; final loss {stats['loss']:.2f} |
| export | `python -m onnxruntime_genai.models.builder -i CHECKPOINT -o models/license-qwen2 -p fp32 -e cpu` |

Versions: {", ".join(vers)}.
"""
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "models", "license-qwen2"))
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--keep-checkpoint")
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    work = a.keep_checkpoint or tempfile.mkdtemp(prefix="onyx-license-")
    ckpt = os.path.join(work, "hf-license-qwen2")
    tok = train_tokenizer()
    stats = train(tok, ckpt, a.steps)
    stats["steps"] = a.steps
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", ckpt, "-o", out,
           "-p", "fp32", "-e", "cpu", "-c", os.path.join(work, "cache")]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"export failed: {' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    ids, gen, text = greedy(out, PROMPT, 120)
    print(text)
    readme(out, stats, text)
    if not a.keep_checkpoint:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
