#!/usr/bin/env python3
"""Writes a copy of a decoder whose GroupQueryAttention nodes declare another KV
layout (Onyx's kv_layout attribute: 0 = BNSH head-major, 1 = BSNH seq-major).

    set_kv_layout.py IN_DIR_OR_MODEL OUT_DIR --layout bsnh

The binding shapes stay (B, Nkv, L, H); only the bytes' order changes, so the same
weights give the same tokens. ONNX Runtime does not know the attribute: the copy is
for Onyx."""
import argparse
import os
import shutil

import onnx
from onnx import helper


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("out_dir")
    ap.add_argument("--layout", choices=["bnsh", "bsnh"], required=True)
    args = ap.parse_args()
    src = os.path.join(args.model, "model.onnx") if os.path.isdir(args.model) else args.model
    model = onnx.load(src, load_external_data=True)
    value = 1 if args.layout == "bsnh" else 0
    count = 0
    for node in model.graph.node:
        if node.op_type != "GroupQueryAttention":
            continue
        kept = [a for a in node.attribute if a.name != "kv_layout"]
        del node.attribute[:]
        node.attribute.extend(kept + [helper.make_attribute("kv_layout", value)])
        count += 1
    os.makedirs(args.out_dir, exist_ok=True)
    onnx.save(model, os.path.join(args.out_dir, "model.onnx"))
    src_dir = os.path.dirname(os.path.abspath(src))
    for extra in os.listdir(src_dir):  # configs and the like travel along
        if extra.endswith((".json", ".txt", ".md")):
            shutil.copy(os.path.join(src_dir, extra), args.out_dir)
    print(f"wrote {args.out_dir}/model.onnx: kv_layout={value} on {count} GroupQueryAttention nodes")


if __name__ == "__main__":
    main()
