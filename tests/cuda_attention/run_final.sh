#!/bin/sh
# The second device call for issue #14 (after run_short.sh), from the carried tree's
# root with bin/ unpacked as there (bin/before, bin/after, bin/common with
# onyx_consistency):
#   1. the whole attention suite (after) against the float64 reference, while the
#      builder's fp16 export is made in the background;
#   2. the consistency runner (ctest's cuda.consistency: CPU-only vs CUDA-first);
#   3. onyx_bench_gqa_short before and after;
#   4. onyx-generate on the export, graphs on, before and after;
#   5. the attention bench's decode rows (#15) beside cuDNN, after; then before's op
#      numbers (no anchor) while time is left.
#   sh tests/cuda_attention/run_final.sh OUT [SECONDS]
out=${1:-/tmp/final-out}
budget=${2:-228}
mkdir -p "$out"
T0=$(date +%s)
left() { echo $((budget - ($(date +%s) - T0))); }
. .deps/env.sh
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=$PWD/bin/common:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
W=/tmp/final-work
mkdir -p $W
python3 - >"$out/export.log" 2>&1 <<'PY' &
import sys, time
sys.path.insert(0, "tools/bench")
import bench_genai_cuda as b
t = time.time()
m = b.make_checkpoint("/tmp/final-work/hf", 24)
del m
print(f"checkpoint {time.time() - t:.1f} s", flush=True)
print(f"export {b.export('.builder', '/tmp/final-work/hf', '/tmp/final-work/fp16', 'fp16'):.1f} s")
PY
exp=$!
echo "== attention suite, after (+$(($(date +%s) - T0)) s)"
timeout 100 bin/after/onyx_cuda_attention_test >"$out/suite.log" 2>&1
echo "suite exit $? (124: stopped at its limit); bad=0 comparisons $(grep -c 'bad=0' "$out/suite.log")," \
  "bad>0 $(grep -cE 'bad=[1-9]' "$out/suite.log"); $(grep -E 'PASSED|FAILED' "$out/suite.log" | tr '\n' ' ')"
grep -E "bad=[1-9]|FAILED|rror|ssert|not zero" "$out/suite.log" | head -8
grep -oE "rel_l2=[0-9.e+-]+" "$out/suite.log" | sort -t= -k2 -g | tail -1
echo "last: $(grep -E '^\[ +(RUN|OK) ' "$out/suite.log" | tail -1)"
printf '[provider.cpu]\npath = %s\n' "$PWD/bin/common/libonyx_cpu.so" >"$W/cpu.ini"
printf '[onyx]\nstrict = false\n[provider.cuda]\npath = %s\noption.device = 0\n[provider.cpu]\npath = %s\n' \
  "$PWD/bin/after/libonyx_cuda.so" "$PWD/bin/common/libonyx_cpu.so" >"$W/cuda_first.ini"
echo "== consistency (cuda.consistency), after (+$(($(date +%s) - T0)) s)"
timeout 60 bin/common/onyx_consistency "$W/cpu.ini" "$W/cuda_first.ini" cuda >"$out/consistency.log" 2>&1
echo "consistency exit $?"
tail -3 "$out/consistency.log"
wait $exp
tail -2 "$out/export.log"
for v in before after; do
  echo "== GQA short, $v (+$(($(date +%s) - T0)) s)"
  timeout 40 bin/$v/onyx_bench_gqa_short 2>&1 | tail -16
done
M=$W/fp16
ids=$(python3 -c "import random; r=random.Random(1); print(','.join(str(r.randrange(3,151936)) for _ in range(32)))")
if [ -f $M/model.onnx ]; then
  for v in before after; do
    printf '[onyx]\nstrict = true\n[provider.cuda]\npath = %s\n[provider.cpu]\npath = %s\n' \
      "$PWD/bin/$v/libonyx_cuda.so" "$PWD/bin/common/libonyx_cpu.so" >"$W/$v.ini"
  done
  for r in 1; do
    for v in before after; do
      echo "== onyx-generate $v (round $r), 32 + 128 tokens (+$(($(date +%s) - T0)) s)"
      timeout 30 bin/common/onyx-generate $M --config "$W/$v.ini" --prompt-ids "$ids" \
        --max-new-tokens 128 --eos none --graphs on --quiet >"$out/gen_${v}_$r.log" 2>&1
      grep -E "^prefill|rror" "$out/gen_${v}_$r.log" | head -2
    done
  done
fi
t=$(left)
echo "== attention bench decode rows, after, with the anchor (+$(($(date +%s) - T0)) s, $t s left)"
ONYX_BENCH_DECODE_ONLY=1 PYTHONUNBUFFERED=1 timeout $((t - 4)) bin/after/onyx_bench_attention_cuda \
  tools/torch_sdpa_gqa.py >"$out/bench.log" 2>&1
echo "bench exit $?"
grep -E "^onyx decode|^decode " "$out/bench.log" | cut -c1-200
tail -8 "$out/bench.log"
t=$(left)
if [ "$t" -gt 25 ]; then
  echo "== attention bench decode rows, before, no anchor (+$(($(date +%s) - T0)) s)"
  ONYX_BENCH_DECODE_ONLY=1 timeout $((t - 3)) bin/before/onyx_bench_attention_cuda - \
    >"$out/bench_before.log" 2>&1
  grep -E "^onyx decode" "$out/bench_before.log" | cut -c1-200
fi
echo "== done at +$(($(date +%s) - T0)) s"
