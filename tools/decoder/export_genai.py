#!/usr/bin/env python3
"""Exports the weights train_tiny.py saved (.npz) to an ONNX model in the ONNX Runtime
GenAI layout (graph built by hand in genai_graph.py), with config.json beside it, and
checks ONNX Runtime's prefill logits against a plain numpy forward pass.

    python3 tools/decoder/export_genai.py --weights /tmp/tiny.npz --out models/tiny-decoder
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import genai_graph  # noqa: E402


def write_config(out_dir, cfg, extra=None):
    """config.json: what a runtime needs to drive the model without reading the graph."""
    conf = {
        "model_type": "onyx-tiny-decoder",
        "filename": "model.onnx",
        "vocab": "bytes" if cfg["vocab_size"] == 256 else "ids",
        "vocab_size": cfg["vocab_size"],
        "hidden_size": cfg["hidden"],
        "num_layers": cfg["num_layers"],
        "num_attention_heads": cfg["num_heads"],
        "num_kv_heads": cfg["num_kv_heads"],
        "head_dim": cfg["head_dim"],
        "intermediate_size": cfg["mlp"],
        "max_length": cfg["max_length"],
        "rope_theta": cfg["rope_theta"],
        "rms_norm_eps": cfg["rms_eps"],
        "bos_token_id": None,
        "eos_token_id": None,
        "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                   "past_key": "past_key_values.%d.key",
                   "past_value": "past_key_values.%d.value"},
        "outputs": {"logits": "logits", "present_key": "present.%d.key",
                    "present_value": "present.%d.value"},
        "kv_layout": "BNSH",
        "dtype": "float32",
    }
    if extra:
        conf.update(extra)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(conf, f, indent=2)
        f.write("\n")


def check_with_ort(model_path, cfg, weights, ids):
    import onnxruntime as ort
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    empty = np.zeros((ids.shape[0], cfg["num_kv_heads"], 0, cfg["head_dim"]), np.float32)
    for i in range(cfg["num_layers"]):
        feeds[f"past_key_values.{i}.key"] = empty
        feeds[f"past_key_values.{i}.value"] = empty
    logits = sess.run(["logits"], feeds)[0]
    ref = genai_graph.reference_logits(cfg, weights, ids)
    return float(np.abs(logits - ref).max()), float(np.abs(ref).max())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", required=True, help=".npz from train_tiny.py")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--norm", choices=["skip", "plain"], default="skip",
                    help="skip: com.microsoft SkipSimplifiedLayerNormalization as GenAI "
                         "exports; plain: Add + SimplifiedLayerNormalization")
    ap.add_argument("--packed-qkv", action="store_true", help="one QKV MatMul, packed GQA input")
    ap.add_argument("--opset", type=int, default=17)
    args = ap.parse_args()

    npz = np.load(args.weights)
    meta = json.loads(bytes(npz["__meta__"]).decode())
    cfg = genai_graph.default_config(**meta["config"])
    weights = {k: npz[k] for k in npz.files if k != "__meta__"}

    os.makedirs(args.out, exist_ok=True)
    model = genai_graph.build_model(
        cfg, lambda name, shape, kind: weights[name], norm=args.norm,
        packed_qkv=args.packed_qkv, opset=args.opset)
    # No onnx.checker: SimplifiedLayerNormalization sits in the ai.onnx domain the way
    # ONNX Runtime registers it (as GenAI exports use it), which ONNX itself does not
    # define; ONNX Runtime loading and running the model below is the check.
    path = os.path.join(args.out, "model.onnx")
    onnx.save(model, path)
    write_config(args.out, cfg, {"training": meta.get("training")})

    prompt = np.frombuffer(b"The GNU General Public License is", dtype=np.uint8)
    err, scale = check_with_ort(path, cfg, weights, prompt.astype(np.int64)[None])
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    print("ops:", " ".join(genai_graph.ops_used(model)))
    print(f"ORT vs numpy reference, prefill logits: max |diff| {err:.2e} (max |logit| {scale:.1f})")
    if err > 1e-3 * max(1.0, scale):
        sys.exit("mismatch between ONNX Runtime and the reference forward pass")


if __name__ == "__main__":
    main()
