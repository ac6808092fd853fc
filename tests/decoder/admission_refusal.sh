#!/bin/sh
# onyx-generate refuses a request whose worst case (prompt + max new tokens) cannot fit
# before anything runs, with TIER_EXHAUSTED and the governor's numbers.
set -u
gen=$1 cpu_so=$2 model=$3 work=$4
mkdir -p "$work"
ini="$work/tight.ini"
printf '[governor]\nrequester.kv_cache = 64KiB\n[provider.cpu]\npath = %s\n' "$cpu_so" >"$ini"
out=$("$gen" "$model" --config "$ini" --prompt-ids 1,2,3 --max-new-tokens 1000 2>&1)
rc=$?
echo "$out"
[ $rc -ne 0 ] || { echo "FAIL: the request was not refused"; exit 1; }
echo "$out" | grep -q "admission refused" || { echo "FAIL: no admission message"; exit 1; }
echo "$out" | grep -q "memory tier exhausted" || { echo "FAIL: not TIER_EXHAUSTED"; exit 1; }
echo "$out" | grep -q "limit 65536" || { echo "FAIL: the numbers are missing"; exit 1; }
echo "$out" | grep -q "^ids:" && { echo "FAIL: tokens were generated"; exit 1; }
echo "1 passed, 0 failed"
