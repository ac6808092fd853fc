#!/bin/sh
# One device call for the decode route: the test and benchmark programs built on the
# development machine (carried in build-decode-bin/, rebuilt in /tmp for sm_90a if they
# do not start here), the decode tests against the float64 reference on every kernel
# variant (short timeout: a wrong barrier hangs), the decode benchmark (every variant)
# beside PyTorch SDPA (tools/torch_sdpa_gqa.py) in one table, then the rest of the suite
# while time is left.
# From the repository root, with .deps and build-decode-bin carried:
#   sh tests/cuda_attention/run_decode.sh [OUT_DIR]
# Logs go to OUT_DIR (default build-decode-gpu/logs); a summary to stdout.
out=${1:-build-decode-gpu/logs}
mkdir -p "$out"
. .deps/env.sh
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
bin=build-decode-bin
if ! ONYX_TEST_FILTER='test_workspace_routes' "$bin/onyx_cuda_attention_test" >"$out/probe.log" 2>&1
then
  echo "carried binaries do not run here: building"
  tail -3 "$out/probe.log"
  bin=/tmp/build-decode
  cmake -S tests/cuda_attention -B "$bin" -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 || { tail -20 "$out/cmake.log"; exit 1; }
  make -C "$bin" -j16 >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head; exit 1; }
fi
t=$bin/onyx_cuda_attention_test
ONYX_TEST_FILTER='*decode*' timeout 90 "$t" >"$out/test_decode.log" 2>&1
rc=$?
echo "decode tests exit $rc"
grep -E "route|bad=[1-9]|FAILED|PASSED|ERROR|rror|ssert|status|mismatch" "$out/test_decode.log" |
  grep -v "bad=0" | sort | uniq -c | sort -rn | head -30
# The worst relative error of the decode comparisons (the lines print rel_l2).
grep -oE "rel_l2=[0-9.e+-]+" "$out/test_decode.log" | sort -t= -k2 -g | tail -1
echo "decode comparisons with bad=0: $(grep -cE "bad=0" "$out/test_decode.log")"
skip=
if [ $rc -eq 124 ]; then
  # A hung variant: leave it out of the benchmark (the last one the tests announced).
  skip=$(grep -oE "decode variant [0-9]" "$out/test_decode.log" | tail -1 | grep -oE "[0-9]$")
  echo "decode tests timed out (last variant: ${skip:-none}): benchmark without it"
fi
ONYX_BENCH_SKIP_VARIANT=$skip ONYX_BENCH_DECODE_ONLY=1 PYTHONUNBUFFERED=1 timeout 100 "$bin/onyx_bench_attention_cuda" \
  tools/torch_sdpa_gqa.py >"$out/bench.log" 2>&1
echo "bench exit $?"
grep -E "^onyx decode|sweep decode B=(1|16|64) Skv=(32768|4096|2048) D=128" "$out/bench.log"
grep -E "^decode (flash|cudnn)" "$out/bench.log"
tail -14 "$out/bench.log"
[ $rc -eq 124 ] && exit 1
timeout "${ONYX_DECODE_SUITE_S:-50}" "$t" >"$out/test_all.log" 2>&1
echo "full suite exit $? (124: stopped at its limit)"
grep -E "bad=[1-9]|FAILED|ERROR|rror|ssert" "$out/test_all.log" | head -10
echo "suite comparisons with bad=0: $(grep -cE "bad=0" "$out/test_all.log"); last: $(grep -E "RUN|OK" "$out/test_all.log" | tail -1)"
