#!/usr/bin/env python3
"""Writes the seeds of the tokenizer loader's fuzz corpus (tests/tokenizer/fuzz_corpus):
every pipeline of oracle_test.py on tiny trained vocabularies, with and without a
tokenizer_config.json after a NUL, and a few broken files. The committed corpus is
these seeds merged with what libFuzzer found from them (see docs/tokenizer.md).

    make_fuzz_seeds.py OUT_DIR      (needs `tokenizers`)"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_test as ot  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

CONFIG = {"bos_token": "<s>", "eos_token": {"content": "</s>", "__type": "AddedToken"},
          "pad_token": "<|endoftext|>", "add_bos_token": True,
          "model_max_length": 1000000000000000019884624838656}
BROKEN = [
    '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 0}, "merges": ["a b"]}}',
    '{"model": {"type": "BPE", "vocab": {"a": 4194303}, "merges": []}}',
    '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "a"]]}}',
    '{"model": {"type": "BPE", "vocab": {"<unk>": 0, "a": 1}, "unk_token": "<unk>", '
    '"fuse_unk": true, "merges": []}, "pre_tokenizer": {"type": "Split", "pattern": '
    '{"Regex": "(?i:a+)|\\\\s+(?!\\\\S)|\\\\w|\\\\h"}, "behavior": "Contiguous", "invert": true}}',
    '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "added_tokens": [{"id": 5, '
    '"content": " a ", "lstrip": true, "rstrip": true, "single_word": true, "normalized": true, '
    '"special": true}], "normalizer": {"type": "Lowercase"}}',
]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    n = 0
    for family, base, pipes in (("bl", ot.byte_level_base(300), ot.byte_level_pipelines),
                                ("ms", ot.metaspace_base(330), ot.metaspace_pipelines)):
        for name, j in pipes(base).items():
            text = Tokenizer.from_str(json.dumps(j)).to_str()
            for with_config in (False, True):
                data = text.encode() + (b"\0" + json.dumps(CONFIG).encode() if with_config else b"")
                with open(os.path.join(out, f"seed-{family}-{name}{'-cfg' if with_config else ''}"),
                          "wb") as f:
                    f.write(data)
                n += 1
    for i, text in enumerate(BROKEN):
        with open(os.path.join(out, f"seed-broken-{i}"), "wb") as f:
            f.write(text.encode())
        n += 1
    print(f"{n} seeds in {out}")


if __name__ == "__main__":
    main()
