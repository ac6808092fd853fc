#!/usr/bin/env python3
"""Exports the weights train_tiny.py saved (.npz) to an ONNX model in the ONNX Runtime
GenAI layout (graph built by hand in genai_graph.py), with genai_config.json (as the
GenAI model builder writes it) and model_info.json beside it, and checks ONNX Runtime's
prefill logits against a plain numpy forward pass.

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


def genai_config(cfg, eos_token_id=None, bos_token_id=None):
    """genai_config.json as ONNX Runtime GenAI's model builder writes it: what a runtime
    needs to drive the model without reading the graph. Only keys GenAI knows (it
    refuses others); the graph's own numbers go to model_info.json."""
    model = {
        "context_length": cfg["max_length"],
        "decoder": {
            "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
            "filename": "model.onnx",
            "head_size": cfg["head_dim"],
            "hidden_size": cfg["hidden"],
            "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                       "past_key_names": "past_key_values.%d.key",
                       "past_value_names": "past_key_values.%d.value"},
            "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                        "present_value_names": "present.%d.value"},
            "num_attention_heads": cfg["num_heads"],
            "num_hidden_layers": cfg["num_layers"],
            "num_key_value_heads": cfg["num_kv_heads"],
        },
        "type": "llama",  # the architecture family: RMSNorm, rotary GQA, SwiGLU
        "vocab_size": cfg["vocab_size"],
    }
    if bos_token_id is not None:
        model["bos_token_id"] = bos_token_id
    if eos_token_id is not None:
        model["eos_token_id"] = eos_token_id
    search = {
        "diversity_penalty": 0.0, "do_sample": False, "early_stopping": True,
        "length_penalty": 1.0, "max_length": cfg["max_length"], "min_length": 0,
        "no_repeat_ngram_size": 0, "num_beams": 1, "num_return_sequences": 1,
        "past_present_share_buffer": True, "repetition_penalty": 1.0, "temperature": 1.0,
        "top_k": 50, "top_p": 1.0,
    }
    return {"model": model, "search": search}


def model_info(cfg, extra=None):
    """model_info.json: the graph's numbers genai_config.json has no key for (rotary
    base, norm epsilon, MLP width, the KV layout) and where the weights came from."""
    info = {
        "model_type": "onyx-tiny-decoder",
        "vocab": "bytes" if cfg["vocab_size"] == 256 else "ids",
        "intermediate_size": cfg["mlp"],
        "rope_theta": cfg["rope_theta"],
        "rms_norm_eps": cfg["rms_eps"],
        "kv_layout": "BNSH",
        "dtype": "float32",
    }
    if extra:
        info.update(extra)
    return info


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=4 if os.path.basename(path) == "genai_config.json" else 2)
        f.write("\n")


def write_config(out_dir, cfg, extra=None):
    """genai_config.json and model_info.json beside the model."""
    write_json(os.path.join(out_dir, "genai_config.json"), genai_config(cfg))
    write_json(os.path.join(out_dir, "model_info.json"), model_info(cfg, extra))


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
