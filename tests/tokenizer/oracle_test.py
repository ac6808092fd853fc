#!/usr/bin/env python3
"""Onyx's tokenizer must give what Hugging Face `tokenizers` gives, exactly: the ids of
encode (with and without the template's special tokens), the text of decode (with and
without special tokens), and the text of each step of a streamed decode (DecodeStream).

    oracle_test.py --driver BIN --work DIR --family FAMILY [--exported DIR]

A family is one trained vocabulary put behind several tokenizer.json pipelines:

  byte-level  a byte-level BPE trained here by `tokenizers` on the license texts, as
              Qwen2 (NFC, its Split regex, ByteLevel without regex), GPT-2 (ByteLevel with
              its regex, a prefix space), Llama-3 (its regex, ignore_merges, a BOS
              template) and two pipelines that use every other normalizer, split
              behaviour, decoder and added-token option Onyx reads;
  metaspace   a SentencePiece-style BPE (the metaspace, byte_fallback, <unk>) trained
              here, as Llama-2 (Prepend and Replace normalizers, a BOS template), as newer
              conversions (a Metaspace pre-tokenizer, prepend_scheme first), and with
              prepend_scheme always/never, the Metaspace decoder, unk without fallback;
  exported    the tokenizer.json of each folder under --exported (the test models).

Cases: the license texts (whole files, paragraphs, lines), random Unicode strings (CJK,
emoji and ZWJ sequences, combining marks, RTL scripts, odd whitespace, case-mapping
oddities, controls), whitespace runs, special tokens inside text, and random id lists
for decode. Also decode(encode(x)) == x must hold wherever it holds for the oracle.
Prints one line per pipeline and the first differences; exits 1 on any, 77 (skipped)
when `tokenizers` is not installed."""
import argparse
import json
import os
import random
import subprocess
import sys

try:
    import tokenizers
    from tokenizers import Tokenizer
    from tokenizers.decoders import DecodeStream
except ImportError:
    print("skipped: the Python package `tokenizers` is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

LICENSES = "/usr/share/common-licenses"
SPECIALS = ["<|endoftext|>", "<s>", "</s>"]
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
               r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def license_texts():
    names = sorted(f for f in os.listdir(LICENSES)
                   if not os.path.islink(os.path.join(LICENSES, f)))
    return [open(os.path.join(LICENSES, f), encoding="utf-8", errors="replace").read()
            for f in names]


# ------------------------------------------------------------------ training

def train(pre_tokenizer, specials, vocab_size=1200, **model_args):
    from tokenizers import models, trainers
    tok = Tokenizer(models.BPE(**model_args))
    tok.pre_tokenizer = pre_tokenizer
    extra = {}
    if model_args.get("byte_fallback"):
        extra["limit_alphabet"] = 120  # rarer characters then need the byte tokens
    else:
        from tokenizers import pre_tokenizers
        extra["initial_alphabet"] = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  **extra)
    tok.train_from_iterator(license_texts(), trainer)
    return json.loads(tok.to_str())


def byte_level_base(vocab_size=1200):
    from tokenizers import pre_tokenizers
    return train(pre_tokenizers.ByteLevel(add_prefix_space=False), SPECIALS, vocab_size)


def metaspace_base(vocab_size=1200):
    from tokenizers import pre_tokenizers
    bytes_ = ["<0x%02X>" % b for b in range(256)]
    j = train(pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True),
              ["<unk>", "<s>", "</s>"] + bytes_, vocab_size, unk_token="<unk>", byte_fallback=True)
    # SentencePiece conversions keep the byte tokens in the model's vocabulary only.
    j["added_tokens"] = [a for a in j["added_tokens"] if a["content"] not in bytes_]
    return j


def added(j, content, special=True, normalized=False, lstrip=False, rstrip=False,
          single_word=False):
    ids = [a["id"] for a in j["added_tokens"]] + list(j["model"]["vocab"].values())
    j["added_tokens"].append({"id": max(ids) + 1, "content": content, "single_word": single_word,
                              "lstrip": lstrip, "rstrip": rstrip, "normalized": normalized,
                              "special": special})


def bytelevel(prefix=False, regex=True):
    return {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": True,
            "use_regex": regex}


def split(pattern, behavior="Isolated", invert=False, literal=False):
    return {"type": "Split", "pattern": {"String" if literal else "Regex": pattern},
            "behavior": behavior, "invert": invert}


def template(before, after, ids):
    single = [{"SpecialToken": {"id": t, "type_id": 0}} for t in before]
    single += [{"Sequence": {"id": "A", "type_id": 0}}]
    single += [{"SpecialToken": {"id": t, "type_id": 0}} for t in after]
    pair = single + [{"Sequence": {"id": "B", "type_id": 1}}]
    specials = {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in before + after}
    return {"type": "TemplateProcessing", "single": single, "pair": pair,
            "special_tokens": specials}


def variant(base, **parts):
    j = json.loads(json.dumps(base))
    model = parts.pop("model", {})
    j["model"].update(model)
    for k, v in parts.items():
        if k != "added":
            j[k] = v
    for a in parts.get("added", []):
        added(j, **a)
    return j


def byte_level_pipelines(base):
    ids = {a["content"]: a["id"] for a in base["added_tokens"]}
    seq = lambda *p: {"type": "Sequence", "pretokenizers": list(p)}
    return {
        "qwen2": variant(base, normalizer={"type": "NFC"},
                         pre_tokenizer=seq(split(QWEN2_REGEX), bytelevel(regex=False)),
                         decoder=bytelevel(), post_processor=bytelevel(),
                         added=[{"content": "<|im_start|>"}, {"content": "<|im_end|>"}]),
        "gpt2": variant(base, normalizer=None, pre_tokenizer=bytelevel(prefix=True),
                        decoder=bytelevel(), post_processor=bytelevel(prefix=True)),
        "llama3": variant(base, normalizer=None, model={"ignore_merges": True},
                          pre_tokenizer=seq(split(LLAMA3_REGEX), bytelevel(regex=False)),
                          decoder=bytelevel(),
                          post_processor={"type": "Sequence", "processors": [
                              bytelevel(), template(["<s>"], [], ids)]}),
        "mixed": variant(
            base,
            normalizer={"type": "Sequence", "normalizers": [
                {"type": "NFKC"}, {"type": "Lowercase"},
                {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
            pre_tokenizer=seq({"type": "Digits", "individual_digits": True},
                              split("-", "MergedWithPrevious", literal=True),
                              split(r"[.!?]\s*", "MergedWithNext"),
                              bytelevel(prefix=True)),
            decoder=bytelevel(), post_processor=template(["<s>"], ["</s>"], ids),
            added=[{"content": "<mask>", "lstrip": True, "rstrip": True},
                   {"content": "hello world", "special": False, "normalized": True},
                   {"content": "[x]", "special": False, "single_word": True},
                   {"content": "Hello", "special": False, "normalized": True}]),
        "nfd-splits": variant(
            base, normalizer={"type": "NFD"},
            pre_tokenizer=seq(split(r"\w+", "Isolated", invert=True),
                              split(" ", "Contiguous", literal=True),
                              split("[aeiou]", "Removed"),
                              {"type": "Digits", "individual_digits": False},
                              bytelevel(regex=False)),
            decoder={"type": "Sequence", "decoders": [
                bytelevel(), {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "},
                {"type": "Strip", "content": " ", "start": 2, "stop": 0}]}),
    }


def metaspace_pipelines(base):
    ids = {a["content"]: a["id"] for a in base["added_tokens"]}
    rep = "\u2581"
    llama_decoder = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": rep}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    meta = lambda scheme, split_: {"type": "Metaspace", "replacement": rep,
                                   "prepend_scheme": scheme, "split": split_}
    bos = template(["<s>"], [], ids)
    return {
        "llama2": variant(base, normalizer={"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": rep},
            {"type": "Replace", "pattern": {"String": " "}, "content": rep}]},
            pre_tokenizer=None, decoder=llama_decoder, post_processor=bos,
            model={"fuse_unk": True}),
        "first": variant(base, normalizer=None, pre_tokenizer=meta("first", False),
                         decoder=llama_decoder, post_processor=bos),
        "always-unk": variant(base, normalizer=None, pre_tokenizer=meta("always", True),
                              decoder=meta("always", True), post_processor=None,
                              model={"byte_fallback": False, "fuse_unk": False,
                                     "ignore_merges": True}),
        "never-lower": variant(base, normalizer={"type": "Lowercase"},
                               pre_tokenizer=meta("never", True),
                               decoder={"type": "Sequence", "decoders": [
                                   meta("never", True), {"type": "ByteFallback"},
                                   {"type": "Fuse"}]},
                               post_processor=template([], ["</s>"], ids),
                               model={"fuse_unk": True}),
    }


# ------------------------------------------------------------------ cases

POOLS = [
    (30, [(0x20, 0x7E)]),                                   # ASCII
    (3, [(0xA0, 0xFF), (0x100, 0x17F)]),                    # Latin
    (2, [(0x391, 0x3A9), (0x3B1, 0x3C9), (0x410, 0x44F)]),  # Greek, Cyrillic
    (3, [(0x5D0, 0x5EA), (0x621, 0x64A), (0x660, 0x669)]),  # Hebrew, Arabic (RTL), digits
    (2, [(0x905, 0x939), (0x93E, 0x94D), (0xE01, 0xE30)]),  # Devanagari (+ marks), Thai
    (5, [(0x4E00, 0x9FFF)]),                                # CJK
    (2, [(0x3041, 0x3096), (0x30A1, 0x30FA), (0xAC00, 0xD7A3)]),
    (2, [(0x1100, 0x1112), (0x1161, 0x1175)]),              # Hangul jamo (NFC composes)
    (4, [(0x300, 0x36F)]),                                  # combining marks
    (4, [(0x1F600, 0x1F64F), (0x1F300, 0x1F5FF), (0x1F3FB, 0x1F3FF), (0x1F1E6, 0x1F1FF)]),
    (2, [(0xFF01, 0xFF5E), (0xFB00, 0xFB06), (0x2070, 0x2079), (0x2160, 0x2188)]),  # NFKC
    (1, [(0x01, 0x1F)]),                                    # controls
]
SINGLES = ["\u200d", "\ufe0f", "\u200e", "\u200f", "\u202b", "\u202e", "\t", "\n", "\r", "\x0b",
           "\x0c", "\x85", "\xa0", "\u1680", "\u2003", "\u2028", "\u2029", "\u202f", "\u3000",
           "\u180e", "\u200b", "\ufeff", "'", "\u2019", "\u0130", "\u017f", "\u212a", "\xdf",
           "\u03c2", "\u0131", "\x00", "'s", "'LL", " ", "  ", "\u2581"]


def random_text(rng, n):
    out = []
    weights = [w for w, _ in POOLS] + [6]
    for _ in range(n):
        k = rng.choices(range(len(weights)), weights)[0]
        if k == len(POOLS):
            out.append(rng.choice(SINGLES))
        else:
            lo, hi = rng.choice(POOLS[k][1])
            out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def whitespace_cases(rng):
    cases = [" " * n for n in range(1, 40)] + ["\n" * n for n in range(1, 8)]
    cases += ["a" + " " * n + "b" for n in range(1, 20)] + [" " * n + "x" for n in range(1, 12)]
    cases += ["x" + " " * n for n in range(1, 12)] + ["\t \n \r\n\u3000 \xa0", "\r\n\r\n"]
    for _ in range(120):
        cases.append("".join(rng.choice([" ", "\t", "\n", "\r", "w", "\u3000", "\xa0", "  "])
                             for _ in range(rng.randint(1, 30))))
    cases.append(" " * 3000 + "end")
    cases.append("\n".join(" " * 40 for _ in range(50)))
    return cases


def special_cases(rng, specials):
    words = ["hello", "world", " ", "  ", "Hello", "[x]", "\n", "x", "license", "-", "1", "."]
    cases = list(specials) + ["".join(specials), " ".join(specials)]
    cases += [f"{a}{s}{b}" for s in specials for a in ("", " ", "a", "a ") for b in ("", " ", "b")]
    cases += ["<s", "s>", "<<s>>", "</s", "<|endoftext", "<s><s>", "x<s>y", "hello world!",
              "Hello World", "say hello world", "[x] [x]y [x]", "  <mask>  mid  <mask>"]
    for _ in range(150):
        parts = [rng.choice(words + list(specials)) for _ in range(rng.randint(1, 10))]
        cases.append("".join(parts))
    return cases


def text_cases(rng, specials):
    texts = license_texts()
    cases = [(t, True) for t in texts]
    paragraphs = [p for t in texts for p in t.split("\n\n") if p.strip()]
    cases += [(p, False) for p in paragraphs]
    lines = [l for t in texts for l in t.split("\n")]
    cases += [(l, i < 400) for i, l in enumerate(lines)]
    cases += [(random_text(rng, rng.randint(1, 60)), True) for _ in range(1500)]
    cases += [(w, True) for w in whitespace_cases(rng)]
    cases += [(s, True) for s in special_cases(rng, specials)]
    cases += [("", True)]
    return cases


def decode_cases(rng, top):
    out = []
    for _ in range(300):
        n = rng.randint(0, 30)
        out.append([rng.randint(0, top + 5) for _ in range(n)])
    out += [[top + 100], [], [3, 3, 3], list(range(3, 40))]
    return out


# ------------------------------------------------------------------ comparing

def oracle(tok, case):
    if "decode" in case:
        return {"decoded": tok.decode(case["decode"], skip_special_tokens=False),
                "skipped": tok.decode(case["decode"], skip_special_tokens=True)}
    text = case["text"]
    ids = tok.encode(text).ids
    want = {"ids": ids, "plain": tok.encode(text, add_special_tokens=False).ids,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "skipped": tok.decode(ids, skip_special_tokens=True)}
    if case.get("stream"):
        ds = DecodeStream(skip_special_tokens=True)
        want["stream"] = [ds.step(tok, i) or "" for i in ids]
    return want


def run_pipeline(name, path, driver, work, rng_seed):
    tok = Tokenizer.from_file(path)
    rng = random.Random(rng_seed)
    specials = sorted({a.content for a in tok.get_added_tokens_decoder().values()})
    cases = [{"text": t, "stream": s} for t, s in text_cases(rng, specials)]
    cases += [{"decode": d} for d in decode_cases(rng, tok.get_vocab_size())]
    stem = os.path.join(work, name.replace("/", "-"))
    case_file, out_file = stem + ".cases.jsonl", stem + ".out.jsonl"
    with open(case_file, "w", encoding="utf-8") as f:
        for c in cases:
            f.write(json.dumps(c) + "\n")
    p = subprocess.run([driver, path, case_file, out_file], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"{name}: the driver exited {p.returncode}: {p.stderr.strip()[-2000:]}")
        return False
    got = [json.loads(l) for l in open(out_file, encoding="utf-8")]
    if len(got) != len(cases):
        print(f"{name}: {len(got)} answers for {len(cases)} cases")
        return False
    bad, shown, texts, same_ids, rt_oracle, rt_onyx = 0, 0, 0, 0, 0, 0
    panics = 0
    for c, g in zip(cases, got):
        try:
            want = oracle(tok, c)
        except BaseException as e:  # a Rust panic (PanicException is a BaseException)
            if isinstance(e, KeyboardInterrupt):
                raise
            panics += 1  # nothing to compare with; Onyx must only not crash (it did not)
            continue
        if "text" in c:
            texts += 1
            same_ids += g.get("ids") == want["ids"]
            rt_oracle += want["skipped"] == c["text"]
            rt_onyx += g.get("skipped") == c["text"]
        if g != want:
            bad += 1
            if shown < 6:
                shown += 1
                print(f"{name}: DIFFERENT on {json.dumps(c, ensure_ascii=True)[:160]}")
                for k in want:
                    if want[k] != g.get(k):
                        print(f"    {k}: tokenizers {json.dumps(want[k])[:240]}\n"
                              f"    {' ' * len(k)}  onyx       {json.dumps(g.get(k))[:240]}")
                if "error" in g:
                    print(f"    onyx error: {g['error']}")
    print(f"{name}: {len(cases)} cases, {bad} different; ids identical on {same_ids} of {texts} "
          f"texts; decode(encode(x)) == x on {rt_onyx} (tokenizers: {rt_oracle})" +
          (f"; tokenizers panicked on {panics} (not compared)" if panics else ""))
    return bad == 0 and rt_onyx >= rt_oracle


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--family", required=True, choices=["byte-level", "metaspace", "exported"])
    ap.add_argument("--exported")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    print(f"oracle: tokenizers {tokenizers.__version__}")
    if a.family == "exported":
        paths, seen = {}, set()
        for d in sorted(os.listdir(a.exported)):
            path = os.path.join(a.exported, d, "tokenizer.json")
            if not os.path.exists(path):
                continue
            with open(path, "rb") as f:
                text = f.read()
            if text not in seen:  # exports of one checkpoint share one file
                seen.add(text)
                paths[d] = path
    else:
        base = byte_level_base() if a.family == "byte-level" else metaspace_base()
        pipes = byte_level_pipelines(base) if a.family == "byte-level" else metaspace_pipelines(base)
        paths = {}
        for name, j in pipes.items():
            # Written as tokenizers itself serializes it: the file both sides read.
            text = Tokenizer.from_str(json.dumps(j)).to_str()
            paths[name] = os.path.join(a.work, f"{a.family}-{name}.json")
            with open(paths[name], "w", encoding="utf-8") as f:
                f.write(text)
    ok = True
    for i, (name, path) in enumerate(paths.items()):
        ok &= run_pipeline(f"{a.family}/{name}", path, a.driver, a.work, 1000 + i)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
