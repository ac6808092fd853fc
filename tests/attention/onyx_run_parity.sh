#!/bin/sh
# GQA / Attention / RotaryEmbedding parity with ONNX Runtime through the real core:
# generate the cases (ONNX test directories holding ONNX Runtime's outputs), then run
# every one with onyx-run and the CPU provider. Exit 77 (skipped) without onnxruntime.
set -eu
python=$1 onyx_run=$2 config=$3 out=$4
if ! "$python" -c "import onnx, onnxruntime, numpy" 2>/dev/null; then
  echo "skipped: $python lacks onnx/onnxruntime/numpy (scripts/setup.sh installs them)"
  exit 77
fi
rm -rf "$out"
"$python" "$(dirname "$0")/../../tools/parity/make_attention_cases.py" "$out" >/dev/null
exec "$onyx_run" --config "$config" -q --conformance "$out"
