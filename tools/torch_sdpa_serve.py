# The anchor kept running for tools/bench_attention_rounds.c: PyTorch's cuDNN
# scaled_dot_product_attention (GQA, bf16) timed as tools/torch_sdpa_gqa.py times it (its
# bench(): 10 warm-up calls, the median of 50 calls between CUDA events), one shape a
# request. Reads lines "prefill B Hq Hkv S D" (causal, S queries and keys) or
# "decode B Hq Hkv Skv D" (one query against Skv keys) and answers "ms=<median>" or
# "error <why>"; "quit" or the end of input stops it. A shape's random inputs are made
# on its first request and kept for its later rounds.
import os
import sys
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from torch_sdpa_gqa import bench  # noqa: E402


def shape_inputs(cache, kind, b, hq, hkv, s, d):
    key = (kind, b, hq, hkv, s, d)
    if key not in cache:
        dt = torch.bfloat16
        sq = s if kind == "prefill" else 1
        cache[key] = (torch.randn(b, hq, sq, d, device="cuda", dtype=dt),
                      torch.randn(b, hkv, s, d, device="cuda", dtype=dt),
                      torch.randn(b, hkv, s, d, device="cuda", dtype=dt))
    return cache[key]


def answer(cache, words):
    kind = words[0]
    if kind not in ("prefill", "decode") or len(words) != 6:
        return "error expected 'prefill|decode B Hq Hkv S D', got " + " ".join(words)[:80]
    b, hq, hkv, s, d = (int(w) for w in words[1:])
    q, k, v = shape_inputs(cache, kind, b, hq, hkv, s, d)
    causal = kind == "prefill"
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        ms = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                          enable_gqa=True))
    return f"ms={ms:.5f}"


def main():
    cache = {}
    print("ready", torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        try:
            print(answer(cache, words), flush=True)
        except Exception as e:  # the bench goes on without this shape's anchor
            print("error", str(e).replace("\n", " ")[:120], flush=True)


if __name__ == "__main__":
    main()
