#!/bin/sh
# Models with model-local functions against ONNX Runtime through onyx-run and the CPU
# provider: fresh random inputs each run, every call either kept or inlined as
# --placement says. Exit 77 (skipped) without onnx/onnxruntime/numpy.
set -eu
python=$1 onyx_run=$2 config=$3 out=$4
if ! "$python" -c "import onnx, onnxruntime, numpy" 2>/dev/null; then
  echo "skipped: $python lacks onnx/onnxruntime/numpy (scripts/setup.sh installs them)"
  exit 77
fi
rm -rf "$out"
"$python" "$(dirname "$0")/make_function_fixtures.py" --parity "$out/cases"
"$onyx_run" --config "$config" --placement "$out"/cases/* >"$out/log" 2>&1 || {
  cat "$out/log"
  exit 1
}
cat "$out/log"
grep -q "'sk0' com.microsoft::SkipSimplifiedLayerNormalization: kept: provider cpu claims it" \
  "$out/log"
grep -q "'sk0' local::SkipRms: inlined (no provider claims it)" "$out/log"
