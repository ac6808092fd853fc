#!/usr/bin/env python3
"""Writes a benchmark-sized decoder with random float32 weights in the ONNX Runtime GenAI
layout (the same graph as the tiny model: genai_graph.py), weights in an external file.
Run, not committed. Defaults are Qwen2.5-0.5B's shapes (about 2.5 GB of float32).

    python3 tools/decoder/make_random_decoder.py --out /tmp/qwen-shaped
    python3 tools/decoder/make_random_decoder.py --vocab 32000 --layers 4 --out /tmp/small
    python3 tools/decoder/ort_generate.py /tmp/small --prompt-ids 1,2,3 --max-new-tokens 8
"""
import argparse
import os
import sys
import time

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import genai_graph  # noqa: E402
from export_genai import write_config  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--hidden", type=int, default=896)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--heads", type=int, default=14)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--mlp", type=int, default=4864)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--max-length", type=int, default=4096, help="rotary cache rows")
    ap.add_argument("--rope-theta", type=float, default=1000000.0)
    ap.add_argument("--rms-eps", type=float, default=1e-6)
    ap.add_argument("--qkv-bias", action="store_true", help="Add biases after q/k/v (as Qwen2)")
    ap.add_argument("--norm", choices=["skip", "plain"], default="skip")
    ap.add_argument("--packed-qkv", action="store_true")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--std", type=float, default=0.02, help="std of the random matrices")
    ap.add_argument("--embed-data", action="store_true",
                    help="keep weights inside model.onnx (only under 2 GB)")
    args = ap.parse_args()

    cfg = genai_graph.default_config(
        vocab_size=args.vocab, hidden=args.hidden, num_layers=args.layers,
        num_heads=args.heads, num_kv_heads=args.kv_heads, head_dim=args.head_dim,
        mlp=args.mlp, max_length=args.max_length, rope_theta=args.rope_theta,
        rms_eps=args.rms_eps, tie_embeddings=False, qkv_bias=args.qkv_bias)
    n_params = sum(int(np.prod(s)) for _, s, _ in genai_graph.weight_shapes(cfg))
    print(f"{n_params / 1e6:.1f}M parameters, {n_params * 4 / 2**30:.2f} GiB float32", flush=True)
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)

    def get_weight(name, shape, kind):
        if kind == "norm":
            return np.ones(shape, np.float32)
        arr = rng.standard_normal(shape, dtype=np.float32)
        arr *= args.std if kind == "matrix" else args.std / 2
        return arr

    t0 = time.time()
    ext = None if args.embed_data else genai_graph.ExternalWriter(args.out, "weights.bin")
    model = genai_graph.build_model(cfg, get_weight, norm=args.norm,
                                    packed_qkv=args.packed_qkv, opset=args.opset, external=ext)
    if ext:
        ext.close()
    path = os.path.join(args.out, "model.onnx")
    onnx.save_model(model, path)
    write_config(args.out, cfg, {"model_type": "onyx-random-decoder", "vocab": "ids",
                                 "random_weights": {"seed": args.seed, "std": args.std}})
    print(f"wrote {path} in {time.time() - t0:.1f}s; ops: {' '.join(genai_graph.ops_used(model))}")


if __name__ == "__main__":
    main()
