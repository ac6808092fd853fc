#!/bin/sh
# The decode GEMVs on the GPU machine, in one call, from the repository root (with .deps):
#   sh tests/cuda/run_gemv_gpu.sh OUT_DIR
# Builds only what it needs (the two benches first, the providers and the consistency
# runner behind them), prints the int4 GEMV's old (v1) and new (v2) kernels side by side
# for every Qwen2.5-0.5B shape (us, GB/s of packed bytes, % of a copy measured in the
# same run, error against the definition in double on fresh random inputs), the chained
# decode step (int4 and fp16), then runs cuda.consistency (CUDA against the CPU provider)
# with the default choice and with the old kernel forced. Logs go to OUT_DIR.
set -u
out=${1:-/tmp/gemv_out}
mkdir -p "$out"
T0=$(date +%s)
t() { echo "   (+$(($(date +%s) - T0)) s)"; }
. .deps/env.sh
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "commit $(cat COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null)"
b=build-gpu
cmake -S . -B $b -DONYX_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
  -DONYX_WERROR=ON -DPython3_EXECUTABLE="$(command -v python3)" >"$out/cmake.log" 2>&1 ||
  { tail -20 "$out/cmake.log"; exit 1; }
cmake --build $b -j16 --target onyx_bench_nbits_gemv onyx_bench_gemv_chain >"$out/build1.log" 2>&1 ||
  { grep -E "error" "$out/build1.log" | head -30; exit 1; }
t
# The providers and the runner build on 14 cores while the benches time the GPU.
cmake --build $b -j14 --target onyx_cuda onyx_cpu onyx_consistency >"$out/build2.log" 2>&1 &
bpid=$!
echo "== int4 MatMulNBits GEMV, one kernel a shape (v1 = old default, us = new default)"
timeout 60 $b/tests/cuda/onyx_bench_nbits_gemv --m1 2>&1 | tee "$out/nbits.log"
t
echo "== chained decode step (int4: v1 forms = old kernel; fp16 MatMul GEMV)"
timeout 60 $b/tests/cuda/onyx_bench_gemv_chain 24 2>&1 | tee "$out/chain.log"
t
wait $bpid || { grep -E "error" "$out/build2.log" | head -30; exit 1; }
t
echo "== cuda.consistency (ctest), default choice (v2 for M = 1)"
timeout 60 ctest --test-dir $b -R cuda.consistency -V >"$out/cons.log" 2>&1
grep -E "FAIL|consistency: [0-9]|tests passed|tests failed" "$out/cons.log" | head -12
grep -E "MatMulNBits.* M 1( |$)" "$out/cons.log" | sed 's/^[0-9]*: *//' | head -16
t
echo "== cuda.consistency (ctest), old kernel forced (ONYX_CUDA_NBITS_TUNE=2)"
ONYX_CUDA_NBITS_TUNE=2 timeout 50 ctest --test-dir $b -R cuda.consistency -V >"$out/cons_v1.log" 2>&1
grep -E "FAIL|consistency: [0-9]|tests passed|tests failed" "$out/cons_v1.log" | head -12
grep -E "MatMulNBits.* M 1( |$)" "$out/cons_v1.log" | sed 's/^[0-9]*: *//' | head -16
t
