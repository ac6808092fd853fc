#!/bin/sh
# The tools against careless and hostile arguments: every option of onyx-run and
# onyx-list is parsed strictly (numbers whole, ranges checked, NaN and infinities
# refused) and a refusal exits 2 naming the option, followed by the usage line;
# sizes from a model or a genai_config.json that pass 64 bits are refused with a
# message (a [2^32, 2^32] random input, a 2^62-token context in every KV strategy),
# not allocated, wrapped or looped on. Nothing may hang: each run has a time limit.
#   tools_cli.sh ONYX_RUN ONYX_LIST ONYX_GENERATE PLUGINS_INI MODELS_DIR TINY_DECODER
set -u
run=$1 list=$2 gen=$3 ini=$4 models=$5 tiny=$6
fails=0 n=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect() { # expect RC TEXT COMMAND...: exit status RC and TEXT in the output
  want_rc=$1 text=$2
  shift 2
  n=$((n + 1))
  out=$(timeout 60 "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want_rc" ] || ! printf '%s' "$out" | grep -qF -- "$text"; then
    echo "FAIL: $* gave exit $rc (want $want_rc, '$text'): $out"
    fails=$((fails + 1))
  fi
}

m="$models/huge_input.onnx"
for v in abc 0 -3 5x 1.5 "" " 7" 99999999999; do
  expect 2 "--bench wants a number of runs from 1 to 1000000, got '$v'" "$run" --bench "$v" "$m"
done
for o in --rtol --atol; do
  for v in nan inf -inf -1 1e400 abc "" 2e6; do
    expect 2 "$o wants a finite number from 0 to 1e6, got '$v'" "$run" "$o" "$v" "$m"
  done
done
for o in --config --bench --writable --skip --rtol --atol; do
  expect 2 "$o needs a value" "$run" "$o"
done
for v in "" , "a,,b" "a,"; do
  expect 2 "--writable wants comma-separated input names" "$run" --writable "$v" "$m"
done
expect 2 "'nonesuch' is no optimization pass" "$run" --no-optimize=identity_elimination,nonesuch "$m"
expect 2 "unknown option '--frobnicate'" "$run" --frobnicate "$m"
expect 2 "usage: onyx-run" "$run" --frobnicate "$m"
expect 2 "no PATH given" "$run" --plan
expect 2 "--graphs needs --bench N" "$run" --graphs "$m"
expect 0 "usage: onyx-run" "$run" --help
mkfifo "$tmp/fifo"
expect 2 "--skip $tmp/fifo: is not a regular file (it is a FIFO)" "$run" --skip "$tmp/fifo" "$m"
expect 2 "--skip /nonexistent: cannot open: No such file" "$run" --skip /nonexistent "$m"
# Options after the path are options, not paths.
expect 1 "a random input may have at most 1073741824" "$run" --config "$ini" "$m" --plan
expect 1 "float32[4294967296,4294967296] is more than 2^63 bytes" "$run" --config "$ini" "$m"

expect 2 "--config needs a value" "$list" --config
expect 2 "--config wants a plugins.ini path, got ''" "$list" --config ""
expect 2 "unknown option '--frobnicate'" "$list" --frobnicate
expect 2 "takes no PATH, got 'x'" "$list" x
expect 2 "usage: onyx-list" "$list" --kernels --frobnicate
expect 0 "usage: onyx-list" "$list" --help
expect 0 "cpu:" "$list" --config "$ini" --kernels

# A context of 2^62 tokens (and one of 2^60): every KV strategy refuses it by its
# numbers, none wraps a size.
big=4611686018427387904
for share in true false; do
  dir="$tmp/big-$share"
  mkdir -p "$dir"
  ln -s "$tiny/model.onnx" "$dir/model.onnx"
  sed "s/\"context_length\": 1024/\"context_length\": $big/; s/\"max_length\": 1024/\"max_length\": $big/; s/\"past_present_share_buffer\": true/\"past_present_share_buffer\": $share/" \
    "$tiny/genai_config.json" >"$dir/genai_config.json"
done
for g in in-place copy; do
  expect 1 "x 4611686018427387904 tokens overflows 64 bits" \
    "$gen" "$tmp/big-true" --config "$ini" --prompt-ids 1,2,3 --kv-growth "$g" --quiet
done
expect 1 "its id buffers (4611686018427387904 tokens of 8 bytes) do not fit" \
  "$gen" "$tmp/big-false" --config "$ini" --prompt-ids 1,2,3 --quiet
sed "s/$big/1152921504606846976/g" "$tmp/big-false/genai_config.json" >"$tmp/g.json"
mv "$tmp/g.json" "$tmp/big-false/genai_config.json"
expect 1 "out of memory: generator buffers for 1152921504606846976 tokens" \
  "$gen" "$tmp/big-false" --config "$ini" --prompt-ids 1,2,3 --quiet
# The same folders with --max-new-tokens fit and run.
expect 0 "ids:" "$gen" "$tmp/big-true" --config "$ini" --prompt-ids 1,2,3 --max-new-tokens 3 \
  --kv-growth copy --quiet

# Error paths after something was allocated: each ends with a message and, under the
# sanitizers (LeakSanitizer on), no leak — a leak would change the exit status.
printf '[provider.cpu]\npath = /nonexistent/libonyx_cpu.so\n' >"$tmp/bad.ini"
printf '[onyx]\nthreads = many\n' >"$tmp/worse.ini"
mkdir -p "$tmp/nodata" "$tmp/badset/test_data_set_0" "$tmp/badcfg"
cp "$models/huge_input.onnx" "$tmp/nodata/model.onnx"
cp "$models/huge_input.onnx" "$tmp/badset/model.onnx"
printf 'not a tensor' >"$tmp/badset/test_data_set_0/input_0.pb"
head -c 40 "$tiny/model.onnx" >"$tmp/truncated.onnx"
ln -s "$tiny/model.onnx" "$tmp/badcfg/model.onnx"
printf '{"model": {"context_length": 10,' >"$tmp/badcfg/genai_config.json"
expect 2 "cannot load /nonexistent/libonyx_cpu.so" "$run" --config "$tmp/bad.ini" "$m"
expect 2 "threads must be 0..1024, got 'many'" "$run" --config "$tmp/worse.ini" "$m"
expect 1 "/nonexistent: not a model file or ONNX test directory" "$run" --config "$ini" /nonexistent
expect 1 "no test_data_set_N folders" "$run" --config "$ini" "$tmp/nodata"
expect 1 "not a valid TensorProto" "$run" --config "$ini" "$tmp/badset"
expect 1 "not a valid ONNX model (40 bytes)" "$run" --config "$ini" "$tmp/truncated.onnx"
expect 1 "threads must be 0..1024" "$list" --config "$tmp/worse.ini"
expect 1 "not found" "$gen" /nonexistent --config "$ini" --prompt-ids 1
expect 1 "malformed JSON at line 1" "$gen" "$tmp/badcfg" --config "$ini" --prompt-ids 1
expect 1 "cannot load /nonexistent/libonyx_cpu.so" "$gen" "$tiny" --config "$tmp/bad.ini" --prompt-ids 1
expect 2 "--eos wants" "$gen" "$tiny" --config "$ini" --prompt-ids 1 --eos 1,,2
expect 1 "outside the vocabulary" "$gen" "$tiny" --config "$ini" --prompt-ids 1,999 --quiet

echo "$((n - fails)) of $n checks passed"
[ "$fails" -eq 0 ]
