#!/usr/bin/env bash
# check_provider_test.sh CHECKER CPU.so BROKEN_DIR MOCK_DIR [NODE_TESTS] — see CMakeLists.txt.
set -euo pipefail
checker=$1 cpu=$2 broken=$3 mocks=$4 node_tests=${5:-}
log=$(mktemp "${TMPDIR:-/tmp}/onyx-check.XXXXXX")
trap 'rm -f "$log"' EXIT
failures=0

# passes LIB: the check must succeed.
passes() {
  if "$checker" "$1" --reference "$cpu" >"$log" 2>&1; then
    echo "ok: $(basename "$1") passes ($(tail -1 "$log"))"
  else
    echo "FAIL: $(basename "$1") should pass:"; cat "$log"; failures=$((failures + 1))
  fi
}
# fails LIB PATTERN: the check must fail, and say PATTERN.
fails() {
  local rc=0
  "$checker" "$1" --reference "$cpu" >"$log" 2>&1 || rc=$?
  if [ $rc = 1 ] && grep -qE -- "$2" "$log"; then
    echo "ok: $(basename "$1") fails: $(grep -m1 -E -- "$2" "$log" | sed 's/^ *//')"
  elif [ "${3:-}" = sanitizer ] && grep -q "not counted in a sanitizer build" "$log"; then
    echo "ok: $(basename "$1"): heap use is not counted in a sanitizer build"
  else
    echo "FAIL: $(basename "$1"): exit $rc, expected 1 and '$2':"; cat "$log"; failures=$((failures + 1))
  fi
}

passes "$cpu"
passes "$broken/libonyx_broken_good.so"
passes "$broken/libonyx_broken_v3_good.so"
# known LIB PATTERN: a provider that should pass but has one defect outside this
# test's files: it passes, or fails with that finding alone (said, so it is seen).
known() {
  local rc=0
  "$checker" "$1" --reference "$cpu" >"$log" 2>&1 || rc=$?
  if [ $rc = 0 ]; then
    echo "ok: $(basename "$1") passes"
  elif [ "$(grep -c FAIL "$log")" = 2 ] && grep -qE -- "$2" "$log"; then
    echo "known defect: $(basename "$1"): $(grep -m1 -E -- "$2" "$log" | sed 's/^ *//')"
  else
    echo "FAIL: $(basename "$1"):"; cat "$log"; failures=$((failures + 1))
  fi
}

passes "$mocks/libonyx_mock_good.so"
passes "$mocks/libonyx_mock_null_optional.so"
# The fake devices (device memory behind device_alloc/copy, v2 and v3) export a stats
# hook for their tests on purpose; every kernel check runs on their "device".
known "$mocks/libonyx_mock_fake_device.so" "FAIL +exports .*onyx_fake_device_stats_get"
known "$mocks/libonyx_mock_fake_device3.so" "FAIL +exports .*onyx_fake_device_stats_get"
fails "$broken/libonyx_broken_two_exports.so" "FAIL +exports .*broken_helper"
fails "$broken/libonyx_broken_close_null.so" "FAIL +NULL-safety +crashed"
fails "$broken/libonyx_broken_ws_impure.so" "FAIL +workspace +the same geometry gave two different"
fails "$broken/libonyx_broken_ws_writes_first.so" "FAIL +workspace .*the output was written"
fails "$broken/libonyx_broken_ws_ignores.so" "FAIL +workspace .*expected WORKSPACE_TOO_SMALL"
fails "$broken/libonyx_broken_racy.so" "FAIL +threads .*differ"
fails "$broken/libonyx_broken_malloc.so" "FAIL +heap +compute made [0-9]+ heap allocations" sanitizer
fails "$broken/libonyx_broken_wrong.so" "FAIL +conformance +element"
fails "$broken/libonyx_broken_no_reason.so" "FAIL +probe +declined without saying why"
fails "$broken/libonyx_broken_any_abi.so" "FAIL +negotiation +accepts a core of ABI 0"
fails "$broken/libonyx_broken_v3_silent.so" "FAIL +open +device 0 declined without saying why"
fails "$mocks/libonyx_mock_wrong_abi.so" "FAIL +negotiation +at core ABI [0-9]+: ABI version mismatch"
fails "$mocks/libonyx_mock_future_abi.so" "FAIL +negotiation .*answered ABI 7"
fails "$mocks/libonyx_mock_no_entry.so" "FAIL +entry +neither onyx_provider_entry nor"
fails "$mocks/libonyx_mock_failing_init.so" "FAIL +open .*on fire"
fails "$mocks/libonyx_mock_declines.so" "FAIL +probe +declined: no mock device present"
# The ONNX node tests of the ops a provider claims, through the core (onyx-run).
if [ -d "$node_tests" ]; then
  if "$checker" "$broken/libonyx_broken_good.so" --node-tests "$node_tests" >"$log" 2>&1 &&
     grep -qE "ok +node tests +[1-9][0-9]* claimed tests" "$log"; then
    echo "ok: node tests: $(grep -E "node tests" "$log" | tail -1 | sed 's/^ *//')"
  else
    echo "FAIL: --node-tests on libonyx_broken_good.so:"; cat "$log"; failures=$((failures + 1))
  fi
else
  echo "skipped: --node-tests (no ONNX node tests at '$node_tests')"
fi
[ $failures = 0 ] && echo "check_provider: all as expected" || { echo "$failures unexpected"; exit 1; }
