#!/bin/sh
# Validates and times ai.onyx::SiluMulMatMul (the silu_matmul optimization) on the GPU
# machine, from the repository root with .deps (scripts/device-deps.sh) and the builder
# (onnxruntime_genai/models/ from the wheel) carried along:
#   sh tests/gpu/silu_matmul_gpu.sh BUILDER_DIR OUT_DIR
# 1. builds with the CUDA provider (sm_90a, -Werror) and prints -Xptxas -v of the fused
#    product kernels (cuda_silu_matmul.cu, and cuda_norm_matmul.cu, now on the shared
#    cuda_gemv_a.cuh);
# 2. cuda.consistency (its SiluMulMatMul and RMSNormMatMul lines: CUDA against the CPU)
#    and the exported *-cuda decoders on CUDA strict with graphs (tokens against the CPU);
# 3. the ops a decode step runs on the tiny builder fp16 export (SiluMul must be gone);
# 4. bench_genai_cuda.py, 24-layer Qwen2.5-0.5B-shaped fp16: graphs on with every fusion
#    ("on") and with silu_matmul off ("nofuse"), and the tokens of both compared.
set -u
builder=$1 out=$2
mkdir -p "$out"
. .deps/env.sh
export PATH=/usr/local/cuda/bin:$PATH
b=build-gpu
cmake -S . -B $b -DONYX_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
  -DONYX_WERROR=ON -DPython3_EXECUTABLE="$(command -v python3)" >"$out/cmake.log" 2>&1 ||
  { tail -20 "$out/cmake.log"; exit 1; }
cmake --build $b -j16 >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head -30; exit 1; }
flags=$b/providers/cuda/CMakeFiles/onyx_cuda.dir/flags.make
for f in cuda_silu_matmul cuda_norm_matmul; do
  echo "== ptxas (registers, spills) of $f.cu"
  (cd $b/providers/cuda && eval nvcc $(sed -n 's/^CUDA_DEFINES = //p' "$OLDPWD/$flags") \
    $(sed -n 's/^CUDA_INCLUDES = //p' "$OLDPWD/$flags") $(sed -n 's/^CUDA_FLAGS = //p' "$OLDPWD/$flags") \
    -Xptxas -v -c "$OLDPWD/providers/cuda/$f.cu" -o /tmp/$f.o) 2>&1 |
    grep -E "registers|spill" | sort | uniq -c | head -8
done
echo "== cuda.consistency (SiluMulMatMul, RMSNormMatMul) and the exported decoders on CUDA"
ctest --test-dir $b -R "cuda.consistency|optimize.silu_matmul|cpu_silu_matmul|decoder.exported" \
  --output-on-failure >"$out/ctest.log" 2>&1
grep -E "SiluMulMatMul|RMSNormMatMul|consistency:|tests passed|\*\*\*Failed" "$out/ctest.log" | head -60
cpu_so=$PWD/$b/providers/cpu/libonyx_cpu.so cuda_so=$PWD/$b/providers/cuda/libonyx_cuda.so
printf '[onyx]\nstrict = true\n[provider.cuda]\npath = %s\n[provider.cpu]\npath = %s\n' \
  "$cuda_so" "$cpu_so" >"$out/cuda_strict.ini"
for f in "" "--no-optimize=silu_matmul"; do
  echo "== ops a step, tiny builder fp16 cuda export, CUDA strict ${f:-(fused)}"
  timeout 60 $b/tools/onyx-generate tests/models/exported/builder-fp16-qwen2-cuda \
    --config "$out/cuda_strict.ini" --prompt-ids 1,2,3 --max-new-tokens 3 --profile $f 2>&1 |
    grep -E "SiluMul|RMSNormMatMul|MatMul " | awk '{print $2, $3}' | sort | uniq -c
done
echo "== decode, 24 layers, builder fp16 cuda: on (fused) and nofuse (silu_matmul off)"
timeout 300 python3 tools/bench/bench_genai_cuda.py --onyx-generate $b/tools/onyx-generate \
  --cpu-so "$cpu_so" --cuda-so "$cuda_so" --builder "$builder" --work /tmp/bench_smm \
  --new-tokens 256 --nofuse silu_matmul --skip off,static,dynamic,lt,nopdl 2>&1 | tail -40
