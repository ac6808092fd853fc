#!/bin/sh
# Builds the CUDA attention tests and benchmark on the GPU machine and runs them, with
# the PyTorch anchor, in one go. From the repository root, with .deps carried:
#   sh tests/cuda_attention/run_gpu.sh [OUT_DIR]
# Full logs go to OUT_DIR (default build-gpu-attn/logs); a short summary to stdout.
out=${1:-build-gpu-attn/logs}
mkdir -p "$out"
. .deps/env.sh
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
cmake -S tests/cuda_attention -B build-gpu-attn -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 || { tail -20 "$out/cmake.log"; exit 1; }
make -C build-gpu-attn -j16 >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head -30; exit 1; }
grep -iE "warning" "$out/build.log" | head -5
cuobjdump --dump-sass build-gpu-attn/onyx_bench_attention_cuda 2>/dev/null |
  grep -oE "HMMA\.[0-9A-Z.]*|LDSM\.[0-9A-Z.]*|LDGSTS\.[0-9A-Z.]*" | sort | uniq -c | head -8
k=_ZN14onyx_cuda_attn12flash_kernelI13__nv_bfloat16Li128ELi4ELi1ELi1ELi64ELi2EEEv22onyx__cuda_attn_params
cuobjdump -sass -fun "$k" build-gpu-attn/onyx_bench_attention_cuda >"$out/sass_prefill128.txt" 2>&1
grep -E '^ +/\*[0-9a-f]{4}\*/' "$out/sass_prefill128.txt" |
  sed -E 's#^ +/\*[0-9a-f]+\*/ +(@!?U?P[0-9T] +)?([A-Z0-9]+).*#\2#' | sort | uniq -c | sort -rn |
  head -24 >"$out/sass_hist.txt"
paste -d' ' - - - - - - <"$out/sass_hist.txt"
timeout 240 build-gpu-attn/onyx_cuda_attention_test >"$out/test.log" 2>&1
echo "test exit $?"
grep -E "bad=[1-9]|got |status|FAILED|PASSED|ERROR|refused|Assert|assert" "$out/test.log" | head -40
grep -cE "bad=0" "$out/test.log"
PYTHONUNBUFFERED=1 timeout 200 build-gpu-attn/onyx_bench_attention_cuda tools/torch_sdpa_gqa.py \
  >"$out/bench.log" 2>&1
echo "bench exit $?"
grep -E "^onyx" "$out/bench.log"
tail -11 "$out/bench.log"
