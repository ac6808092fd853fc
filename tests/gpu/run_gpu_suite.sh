#!/bin/sh
# The GPU machine's suite, from the repository root, with .deps (the C dependency
# prefix) and a copy of the ONNX node tests carried along:
#   sh tests/gpu/run_gpu_suite.sh NODE_TESTS_DIR OUT_DIR
# 1. builds everything with the CUDA provider (sm_90a) and runs every CTest suite;
# 2. runs the ONNX node tests with the CUDA provider first and strict (CPU fallback is an
#    error, so every test counted ran on the GPU), and the attention parity cases;
# 3. generates from the tiny decoder on the CPU and with CUDA (decode steps replayed as
#    CUDA graphs, and node by node): the tokens must agree, the KV cache must grow in
#    place on device virtual memory, graphs must be captured and replayed, and stay
#    valid across in-place KV growth;
# 4. runs the exporters' float16/bfloat16/int4 decoders (tests/models/exported/*-cuda) on CUDA
#    strict with graphs against the CPU: tokens identical, or the logits that explain a flip;
# 5. times the CUDA attention against PyTorch SDPA (tools/torch_sdpa_gqa.py), then the
#    issue's shapes in interleaved rounds beside cuDNN (tools/torch_sdpa_serve.py).
# Logs go to OUT_DIR; a summary to stdout. Make .deps with scripts/device-deps.sh .deps
# (the shared prefix plus jansson, PCRE2 and utf8proc). NODE_TESTS_DIR may also be a
# tarball of ../shared/onnx-node-tests (`tar -C ../shared -cJf node.tar.xz
# onnx-node-tests`: 2.4 MB against 54 MB, within what a device call carries); it is
# unpacked into /tmp.
set -u
node=$1 out=$2
mkdir -p "$out"
case "$node" in
*.tar.xz)
  mkdir -p /tmp/onyx-node-tests && tar -C /tmp/onyx-node-tests -xJf "$node" &&
    node=/tmp/onyx-node-tests/onnx-node-tests/node || { echo "cannot unpack $1"; exit 1; }
  ;;
esac
. .deps/env.sh
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
b=build-gpu
cmake -S . -B $b -DONYX_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
  -DONYX_WERROR=ON -DONYX_SHARED_DIR="$(dirname "$(dirname "$node")")" \
  -DPython3_EXECUTABLE="$(command -v python3)" >"$out/cmake.log" 2>&1 || { tail -20 "$out/cmake.log"; exit 1; }
cmake --build $b -j16 >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head -30; exit 1; }
echo "== ctest (all suites)"
ctest --test-dir $b -j8 --timeout 300 >"$out/ctest.log" 2>&1
grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout" "$out/ctest.log"

cpu_so=$PWD/$b/providers/cpu/libonyx_cpu.so cuda_so=$PWD/$b/providers/cuda/libonyx_cuda.so
printf '[provider.cpu]\npath = %s\n' "$cpu_so" >"$out/cpu.ini"
printf '[provider.cuda]\npath = %s\n[provider.cpu]\npath = %s\n' "$cuda_so" "$cpu_so" >"$out/cuda.ini"
printf '[onyx]\nstrict = true\n[provider.cuda]\npath = %s\n[provider.cpu]\npath = %s\n' \
  "$cuda_so" "$cpu_so" >"$out/cuda_strict.ini"

echo "== ONNX node tests, CUDA strict"
$b/tools/onyx-run --config "$out/cuda_strict.ini" -q --conformance "$node" >"$out/node_cuda.log" 2>&1
tail -2 "$out/node_cuda.log"
echo "== attention parity cases (ONNX Runtime outputs), CUDA first"
python3 tools/parity/make_attention_cases.py "$out/attn_cases" >/dev/null 2>&1 &&
  $b/tools/onyx-run --config "$out/cuda.ini" -q --conformance "$out/attn_cases" >"$out/attn_cuda.log" 2>&1
tail -1 "$out/attn_cuda.log"
grep -c "GroupQueryAttention *-> cuda\|Attention *-> cuda" "$out/attn_cuda.log" >/dev/null 2>&1

echo "== tiny decoder: CPU vs CUDA"
p="The GNU General Public License is"
$b/tools/onyx-generate models/tiny-decoder --config "$out/cpu.ini" --prompt "$p" \
  --max-new-tokens 160 --quiet >"$out/gen_cpu.log" 2>&1
$b/tools/onyx-generate models/tiny-decoder --config "$out/cuda.ini" --prompt "$p" \
  --max-new-tokens 160 --quiet >"$out/gen_cuda.log" 2>&1
$b/tools/onyx-generate models/tiny-decoder --config "$out/cuda.ini" --prompt "$p" \
  --max-new-tokens 160 --quiet --kv-growth copy >"$out/gen_cuda_copy.log" 2>&1
$b/tools/onyx-generate models/tiny-decoder --config "$out/cuda.ini" --prompt "$p" \
  --max-new-tokens 160 --quiet --graphs off >"$out/gen_cuda_nograph.log" 2>&1
for f in gen_cpu gen_cuda gen_cuda_copy gen_cuda_nograph; do
  grep -E "^(prefill|kv cache|device graphs)|onyx-generate:" "$out/$f.log" | sed "s/^/$f: /"
done
want=$(grep '^ids:' "$out/gen_cpu.log")
same=yes
for f in gen_cuda gen_cuda_copy gen_cuda_nograph; do
  [ "$(grep '^ids:' "$out/$f.log")" = "$want" ] || { same=no; echo "tokens: $f DIFFERS from CPU"; }
done
[ $same = yes ] && echo "tokens: CUDA (graphs, graphs + copy growth, no graphs) identical to CPU ($(echo "$want" | wc -w) ids)"
$b/tools/onyx-run --config "$out/cuda.ini" --placement models/tiny-decoder/model.onnx \
  >"$out/placement.log" 2>&1
grep -E "^  (cuda|cpu): " "$out/placement.log"

echo "== exported decoders (builder -p fp16/int4 -e cuda, mobius f16/bf16): CPU vs CUDA strict"
E=tests/models/exported
python3 tools/exporters/provider_tokens.py --onyx-generate $b/tools/onyx-generate \
  --onyx-run $b/tools/onyx-run --ref "$out/cpu.ini" --test "$out/cuda_strict.ini" \
  --work "$out/exported_cuda" $E/builder-fp16-qwen2-cuda $E/builder-fp16-llama-cuda \
  $E/mobius-f16-qwen2-cuda $E/mobius-f16-llama-cuda $E/mobius-bf16-qwen2-cuda \
  $E/mobius-bf16-llama-cuda $E/builder-int4-qwen2-cuda $E/builder-int4-llama-cuda \
  >"$out/exported_cuda.log" 2>&1
grep -E "DIFFERENT|FAILED|largest|prefers" "$out/exported_cuda.log" | head -12
tail -1 "$out/exported_cuda.log"

echo "== a decode graph across in-place KV growth (1 KiB rows: a 2 MiB granule every 2048 tokens)"
python3 tools/decoder/make_random_decoder.py --out "$out/grow" --layers 1 --hidden 512 --heads 2 \
  --kv-heads 1 --head-dim 256 --mlp 512 --vocab 128 --max-length 8192 >/dev/null 2>&1
for run in "graphs --graphs on" "plain --graphs off --fixed-mask"; do
  set -- $run
  n=$1; shift
  $b/tools/onyx-generate "$out/grow" --config "$out/cuda.ini" --prompt-ids 1,2,3,4 \
    --max-new-tokens 4200 --quiet "$@" >"$out/grow_$n.log" 2>&1
  grep -E "^(kv cache|device graphs)|onyx-generate:" "$out/grow_$n.log" | sed "s/^/grow $n: /"
done
[ "$(grep '^ids:' "$out/grow_graphs.log")" = "$(grep '^ids:' "$out/grow_plain.log")" ] &&
  echo "grow: replayed tokens identical to node-by-node across the growth" ||
  echo "grow: replayed tokens DIFFER from node-by-node"
rm -rf "$out/grow"

echo "== Qwen2.5-0.5B-shaped decoder (random float32 weights): CPU vs CUDA"
python3 tools/decoder/make_random_decoder.py --out "$out/qwen" >/dev/null 2>&1
ids=$(python3 -c "import random; random.seed(1); print(','.join(str(random.randrange(1, 30000)) for _ in range(32)))")
for run in "cpu cpu on" "cuda cuda on" "cuda_nograph cuda off"; do
  set -- $run
  $b/tools/onyx-generate "$out/qwen" --config "$out/$2.ini" --prompt-ids "$ids" \
    --max-new-tokens 64 --graphs "$3" --quiet >"$out/qwen_$1.log" 2>&1
  grep -E "^(prefill|kv cache|peak|device graphs)|onyx-generate:" "$out/qwen_$1.log" | sed "s/^/qwen $1: /"
done
for f in cuda cuda_nograph; do
  [ "$(grep '^ids:' "$out/qwen_cpu.log")" = "$(grep '^ids:' "$out/qwen_$f.log")" ] &&
    echo "qwen tokens: $f identical to CPU" || echo "qwen tokens: $f DIFFERS from CPU"
done
rm -rf "$out/qwen"

echo "== attention benchmark vs PyTorch SDPA"
if [ -n "${ONYX_GPU_SUITE_NO_BENCH:-}" ]; then
  echo "skipped (ONYX_GPU_SUITE_NO_BENCH is set)"
elif [ -x $b/tests/cuda_attention/onyx_bench_attention_cuda ]; then
  PYTHONUNBUFFERED=1 timeout 200 $b/tests/cuda_attention/onyx_bench_attention_cuda \
    tools/torch_sdpa_gqa.py >"$out/bench.log" 2>&1
  tail -12 "$out/bench.log"
  echo "== the issue's attention shapes in interleaved rounds beside cuDNN (5 rounds)"
  PYTHONUNBUFFERED=1 timeout 150 $b/tests/cuda_attention/onyx_bench_attention_rounds \
    tools/torch_sdpa_serve.py 5 >"$out/rounds.log" 2>&1
  tail -7 "$out/rounds.log"
fi
