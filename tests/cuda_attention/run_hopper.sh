#!/bin/sh
# One device call for the Hopper prefill route: builds the CUDA attention test project
# (sm_90a), shows the Hopper kernels' instruction mix, runs the Hopper tests first (short
# timeout: a wrong barrier hangs), then the whole suite against the float64 reference,
# then the benchmark beside PyTorch SDPA (tools/torch_sdpa_gqa.py) in one table.
# From the repository root, with .deps carried:
#   sh tests/cuda_attention/run_hopper.sh [OUT_DIR]
# ONYX_HOPPER_NCU="B,Hq,Hkv,S,D[;B,Hq,Hkv,S,D...]" adds hardware counters (throughput,
# pipes, memory, warp stall reasons) of one launch of each prefill shape.
# ONYX_HOPPER_TESTS=0 leaves the Hopper tests out (about a minute on 16 host cores: the
# float64 reference runs on the host). ONYX_HOPPER_QUICK=1 runs only the Hopper tests
# and, with ONYX_HOPPER_ROUNDS=N, the rounds bench (N rounds, beside cuDNN) with the SM
# clock and power sampled meanwhile.
# Logs go to OUT_DIR (default build-hopper-gpu/logs); a summary to stdout. The build
# lives in /tmp (kept while the machine stays warm).
out=${1:-build-hopper-gpu/logs}
b=${ONYX_HOPPER_BUILD:-/tmp/build-hopper}
mkdir -p "$out"
. .deps/env.sh
# The .pc files name the folder .deps was made in; point them at this checkout's.
for pc in .deps/root/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
  sed -i "s|^prefix=.*|prefix=$DEPS|" "$pc"
done
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
git log -1 --format='commit %h %s' 2>/dev/null
cmake -S tests/cuda_attention -B "$b" -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 || { tail -20 "$out/cmake.log"; exit 1; }
make -C "$b" -j16 >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head -30; exit 1; }
grep -iE "warning" "$out/build.log" | head -5
cuobjdump --dump-sass "$b/onyx_bench_attention_cuda" 2>/dev/null >"$out/sass_all.txt"
grep -oE "HGMMA\.[0-9x]+\.[A-Z0-9.]*|UTMALDG\.[0-9A-Z]*|USETMAXREG\.[A-Z.]*" "$out/sass_all.txt" |
  sort | uniq -c | tr '\n' ' '
echo
t=$b/onyx_cuda_attention_test
rc=0
[ "${ONYX_HOPPER_TESTS:-1}" = 1 ] && { ONYX_TEST_FILTER='test_hopper*' timeout 300 "$t" >"$out/test_hopper.log" 2>&1; rc=$?; }
echo "hopper tests exit $rc"
grep -E "route|bad=[1-9]|FAILED|PASSED|ERROR|Assert|assert|status|mismatch" "$out/test_hopper.log" |
  grep -v "bad=0" | sort | uniq -c | sort -rn | head -40
[ $rc -eq 124 ] && { echo "hopper tests timed out: skipping the rest"; exit 1; }
if [ -n "${ONYX_HOPPER_ROUNDS:-}" ]; then
  # SM clock, power and throttle reasons every 200 ms while the rounds run.
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader -lms 200 >"$out/clocks.log" 2>&1 &
  smi=$!
  PYTHONUNBUFFERED=1 timeout 300 "$b/onyx_bench_attention_rounds" tools/torch_sdpa_serve.py \
    "$ONYX_HOPPER_ROUNDS" >"$out/rounds.log" 2>&1
  echo "rounds exit $?"
  kill $smi 2>/dev/null
  sed -n '/medians of rounds/,$p' "$out/rounds.log"
  awk -F', ' '{split($2,c," "); split($3,w," "); if (c[1]+0 > 0) {n++; cs+=c[1]; ws+=w[1];
    if (c[1] < lo || lo == 0) lo = c[1]}} END {if (n) printf "clocks: %d samples, SM mean %.0f MHz, min %d, power mean %.0f W\n", n, cs/n, lo, ws/n}' "$out/clocks.log"
  cut -d, -f5 "$out/clocks.log" | sort | uniq -c | sort -rn | head -4
fi
if [ -n "${ONYX_HOPPER_NCU:-}" ]; then
  # Hardware counters of one Hopper launch of each shape (clocks left alone), and the
  # warp-stall samples per SASS instruction (where the consumers wait) as CSV.
  nvidia-smi -q -d POWER | grep -E "Power Limit|Power Draw" | head -6
  echo "$ONYX_HOPPER_NCU" | tr ';' '\n' | while read -r shp; do
    tag=$(echo "$shp" | tr ',' 'x')
    ONYX_BENCH_SHAPE=$shp timeout 200 ncu --clock-control none -k regex:hopper_kernel \
      --launch-skip 3 -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
      --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
      --section SourceCounters -f -o "/tmp/ncu_$tag" "$b/onyx_bench_attention_cuda" - \
      >"$out/ncu_run_$tag.log" 2>&1
    echo "ncu $shp exit $?"
    ncu -i "/tmp/ncu_$tag.ncu-rep" --print-details all >"$out/ncu_$tag.log" 2>&1
    ncu -i "/tmp/ncu_$tag.ncu-rep" --page source --csv --print-source sass \
      >"$out/ncu_src_$tag.csv" 2>&1
    grep -E "Duration|SM Frequency|Compute \(SM\)|Issue Slots|Hit Rate|No Eligible|Warp Cycles Per Issued|Stall" \
      "$out/ncu_$tag.log" | head -40
  done
fi
[ "${ONYX_HOPPER_QUICK:-0}" = 1 ] && exit 0
timeout 300 "$t" >"$out/test.log" 2>&1
echo "full suite exit $?"
grep -E "bad=[1-9]|FAILED|PASSED|ERROR|Assert|assert|status" "$out/test.log" | head -20
echo "comparisons with bad=0: $(grep -cE "bad=0" "$out/test.log")"
PYTHONUNBUFFERED=1 timeout 240 "$b/onyx_bench_attention_cuda" tools/torch_sdpa_gqa.py \
  >"$out/bench.log" 2>&1
echo "bench exit $?"
grep -E "^onyx prefill" "$out/bench.log"
tail -11 "$out/bench.log"
