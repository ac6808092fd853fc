#!/bin/sh
# MatMulNBits / GatherBlockQuantized parity with ONNX Runtime through the real core:
# generate the cases (ONNX test directories holding ONNX Runtime's outputs, or the op's
# definition where ONNX Runtime refuses a case), then run every one with onyx-run and the
# CPU provider once per kernel build this machine runs (ONYX_CPU_NBITS_ISA caps the
# choice; reference is the plain route). Weights that are initializers are packed at
# session creation, the others per run. Every case must be claimed and pass. Exit 77
# (skipped) without onnx/onnxruntime.
set -eu
python=$1 onyx_run=$2 config=$3 out=$4
if ! "$python" -c "import onnx, onnxruntime, numpy, ml_dtypes" 2>/dev/null; then
  echo "skipped: $python lacks onnx/onnxruntime/numpy (scripts/setup.sh installs them)"
  exit 77
fi
rm -rf "$out"
mkdir -p "$out"
"$python" "$(dirname "$0")/../../tools/parity/make_nbits_cases.py" "$out/cases"
status=0
for isa in best avx512 avx2 generic reference; do
  log="$out/onyx-run-$isa.log"
  echo "== ONYX_CPU_NBITS_ISA=$isa"
  if [ "$isa" = best ]; then
    "$onyx_run" --config "$config" -q --conformance "$out/cases" >"$log" 2>&1 || status=1
  else
    ONYX_CPU_NBITS_ISA=$isa "$onyx_run" --config "$config" -q --conformance "$out/cases" \
      >"$log" 2>&1 || status=1
  fi
  grep -v ': PASS$' "$log" || true
  if ! grep -q '^conformance: 0 not claimed' "$log"; then
    echo "some cases were not claimed (see above)"
    status=1
  fi
done
exit $status
