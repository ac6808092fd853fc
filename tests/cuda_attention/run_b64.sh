#!/bin/sh
# One device call for issue #15's B64 decode row and the read-rate ceiling: the test and
# benchmark programs built on the development machine (carried in build-b64-bin/; built
# in /tmp with -j16 if they do not start here), the decode tests against the float64
# reference on every kernel variant and launch knob (a timeout: a wrong barrier hangs;
# 85 s: 40 s stopped them in variant 3 on 2026-12-02, and the routing cases add a few;
# variant 8, units prepared ahead, runs first among the variants and with every launch
# knob; test_decode_route starts with the production routing's cases: v8 where a CTA
# takes several units, v3 where one), then the decode rows of the bench beside PyTorch
# (decode shapes only, also timed back to back) with the read rate of each row's bytes
# measured in the same process, printed as tables (the bench's last lines; the last one
# sets the routed op and the variant it ran beside variants 3 and 8).
# From the carried tree's root, with .deps and build-b64-bin carried:
#   sh tests/cuda_attention/run_b64.sh OUT [SECONDS]
out=${1:-/tmp/b64-out}
budget=${2:-175}
mkdir -p "$out"
T0=$(date +%s)
left() { echo $((budget - ($(date +%s) - T0))); }
. .deps/env.sh
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.mem,temperature.gpu,power.draw \
  --format=csv,noheader
cat MEASURED_TREE 2>/dev/null || git log --oneline -1
bin=build-b64-bin
if ! ONYX_TEST_FILTER='test_workspace_routes' "$bin/onyx_cuda_attention_test" >"$out/probe.log" 2>&1
then
  echo "carried binaries do not run here: building"
  tail -3 "$out/probe.log"
  bin=/tmp/build-b64
  cmake -S tests/cuda_attention -B "$bin" -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 || { tail -20 "$out/cmake.log"; exit 1; }
  cmake --build "$bin" -j16 --target onyx_cuda_attention_test onyx_bench_attention_cuda \
    >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head; exit 1; }
fi
echo "== decode tests (+$(($(date +%s) - T0)) s)"
# Line-buffered where stdbuf exists: a run the timeout stops keeps its last lines.
lb=$(command -v stdbuf >/dev/null 2>&1 && echo "stdbuf -oL")
ONYX_TEST_FILTER='*decode*' timeout 85 $lb "$bin/onyx_cuda_attention_test" \
  >"$out/test_decode.log" 2>&1
rc=$?
echo "decode tests exit $rc (124: timed out); $(grep -E 'PASSED|FAILED' "$out/test_decode.log" | tr '\n' ' ')"
grep -E "bad=[1-9]|FAILED|rror|ssert|mismatch|not zero" "$out/test_decode.log" | head -12
grep -oE "rel_l2=[0-9.e+-]+" "$out/test_decode.log" | sort -t= -k2 -g | tail -1
echo "variants reached: $(grep -oE "decode variant [0-9]" "$out/test_decode.log" | tr '\n' ' ')"
grep -E "^  (routing|  same on 3).*: variant [0-9]" "$out/test_decode.log"
echo "decode comparisons with bad=0: $(grep -cE "bad=0" "$out/test_decode.log");" \
  "bad>0: $(grep -cE "bad=[1-9]" "$out/test_decode.log")"
t=$(left)
echo "== decode bench beside torch (+$(($(date +%s) - T0)) s, $t s left)"
ONYX_ANCHOR_DECODE_ONLY=1 ONYX_ANCHOR_B2B=1 ONYX_BENCH_DECODE_ONLY=1 PYTHONUNBUFFERED=1 \
  timeout $((t - 3)) "$bin/onyx_bench_attention_cuda" tools/torch_sdpa_gqa.py >"$out/bench.log" 2>&1
echo "bench exit $?"
grep -E "^onyx decode|^read rate|back to back|variant [0-9] decode B=(16|64)|sweep decode B=64" \
  "$out/bench.log" | cut -c1-220
grep -E "^decode (flash|cudnn)" "$out/bench.log"
tail -30 "$out/bench.log"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
echo "== done at +$(($(date +%s) - T0)) s"
