#!/bin/sh
# One device call for GroupQueryAttention at short context (issue #14): programs built
# on the development machine and carried in bin/ (bin/before: HEAD's CUDA provider and
# bench; bin/after: this tree's, with its test program; bin/common: onyx-generate and
# the core and CPU libraries), the builder's python folder in .builder:
#   1. onyx_bench_gqa_short before and after (graph replay, us per call);
#   2. the builder's fp16 CUDA export of a random Qwen2.5-0.5B-shaped checkpoint
#      (tools/bench/bench_genai_cuda.py's functions) while the decode tests run;
#   3. onyx-generate on it, graphs on, before and after: decode tok/s at the bench's
#      length (max_length 160) and at max_length 4096;
#   4. ncu (clocks and caches untouched, graph nodes one by one) over a few decode
#      steps: a table of the kernels of one step.
# From the carried tree's root:  sh tests/cuda_attention/run_short.sh OUT [SECONDS]
out=${1:-/tmp/short-out}
budget=${2:-230}
mkdir -p "$out"
T0=$(date +%s)
left() { echo $((budget - ($(date +%s) - T0))); }
. .deps/env.sh
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=$PWD/bin/common:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for v in before after; do
  echo "== GQA short, $v (+$(($(date +%s) - T0)) s)"
  timeout 40 bin/$v/onyx_bench_gqa_short 2>&1 | tail -14
done

W=/tmp/short-work
mkdir -p $W
python3 - >"$out/export.log" 2>&1 <<'PY' &
import sys, time
sys.path.insert(0, "tools/bench")
import bench_genai_cuda as b
t = time.time()
m = b.make_checkpoint("/tmp/short-work/hf", 24)
del m
print(f"checkpoint {time.time() - t:.1f} s", flush=True)
print(f"export {b.export('.builder', '/tmp/short-work/hf', '/tmp/short-work/fp16', 'fp16'):.1f} s")
PY
exp=$!
echo "== decode tests, after (+$(($(date +%s) - T0)) s)"
for f in '*workspace*' test_decode_route test_decode_attention; do
  g=$(echo "$f" | tr -d '*')
  ONYX_TEST_FILTER="$f" timeout 60 bin/after/onyx_cuda_attention_test >"$out/test_$g.log" 2>&1
  echo "$f: exit $?, bad=0 comparisons $(grep -c 'bad=0' "$out/test_$g.log")," \
    "others $(grep -cE 'bad=[1-9]' "$out/test_$g.log"); $(grep -E 'PASSED|FAILED' "$out/test_$g.log" | tr '\n' ' ')"
  grep -E "bad=[1-9]|rror|ssert|not zero" "$out/test_$g.log" | head -5
done
grep -oE "rel_l2=[0-9.e+-]+" "$out"/test_*.log | sort -t= -k2 -g | tail -1
wait $exp
cat "$out/export.log" | tail -3
M=$W/fp16
[ -f $M/model.onnx ] || { echo "no export"; exit 1; }
ids=$(python3 -c "import random; r=random.Random(1); print(','.join(str(r.randrange(3,151936)) for _ in range(32)))")
for v in before after; do
  printf '[onyx]\nstrict = true\n[provider.cuda]\npath = %s\n[provider.cpu]\npath = %s\n' \
    "$PWD/bin/$v/libonyx_cuda.so" "$PWD/bin/common/libonyx_cpu.so" >"$W/$v.ini"
done
gen() { # version, new tokens
  timeout "$3" bin/common/onyx-generate $M --config "$W/$1.ini" --prompt-ids "$ids" \
    --max-new-tokens "$2" --eos none --graphs on --quiet 2>&1
}
for n in 128 4064; do
  for v in before after; do
    [ "$(left)" -lt 60 ] && break
    echo "== onyx-generate $v, 32 + $n tokens (max_length $((32 + n))) (+$(($(date +%s) - T0)) s)"
    gen $v $n 40 >"$out/gen_${v}_$n.log"
    grep -E "^(prefill|device graphs)|rror" "$out/gen_${v}_$n.log" | head -3
    grep '^ids:' "$out/gen_${v}_$n.log" | md5sum | cut -c1-8
  done
done
for v in after before; do
  t=$(left)
  [ "$t" -lt 25 ] && break
  echo "== ncu, $v, 4 new tokens (+$(($(date +%s) - T0)) s)"
  timeout $((t - 5)) ncu --clock-control none --cache-control none --graph-profiling node \
    --metrics gpu__time_duration.sum --csv --print-units base --log-file "$out/ncu_$v.csv" \
    bin/common/onyx-generate $M --config "$W/$v.ini" --prompt-ids "$ids" --max-new-tokens 4 \
    --eos none --graphs on --quiet >"$out/ncu_gen_$v.log" 2>&1
  echo "ncu exit $?"
  python3 - "$out/ncu_$v.csv" <<'PY'
import csv, re, sys
rows = []
with open(sys.argv[1]) as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") == "gpu__time_duration.sum":
        name = re.split(r"[<(]", r["Kernel Name"])[0].replace("void ", "").strip()
        name = name.split("::")[-1] if "::" in name else name
        rows.append((name, float(r["Metric Value"].replace(",", "")) / 1e3, r.get("Grid Size", "")))
names = [n for n, _, _ in rows]
L = next((k for k in range(20, len(rows) // 2 + 1) if names[-k:] == names[-2 * k:-k]), None)
print(f"{len(rows)} kernels profiled; one decode step = {L} kernels")
if not L:
    sys.exit(0)
step = rows[-L:]
agg = {}
for n, us, g in step:
    a = agg.setdefault(n, [0, 0.0, set()])
    a[0] += 1
    a[1] += us
    a[2].add(g)
tot = sum(a[1] for a in agg.values())
print(f"{'kernel':<44} {'count':>5} {'us each':>8} {'us/step':>8} {'share':>6}")
for n, (c, us, g) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    print(f"{n[:44]:<44} {c:5d} {us / c:8.2f} {us:8.1f} {us / tot * 100:5.1f}%")
print(f"{'sum of kernel times':<44} {L:5d} {'':8} {tot:8.1f}")
PY
done
echo "== done at +$(($(date +%s) - T0)) s"
