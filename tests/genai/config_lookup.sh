#!/bin/sh
# Every tool finds plugins.ini from any working folder: --config, then ONYX_CONFIG,
# then ./plugins.ini, then beside the binary (the build tree's plugins.ini, an
# install prefix's etc/onyx/plugins.ini); a choice that does not exist is refused,
# and when nothing is found the message lists every place looked.
#   config_lookup.sh ONYX_GENERATE ONYX_RUN ONYX_LIST MODEL_DIR WORK_DIR
set -u
gen=$1 run=$2 list=$3 model=$4 work=$5
rm -rf "$work"
mkdir -p "$work/elsewhere" "$work/bin"
cd "$work/elsewhere" || exit 1
unset ONYX_CONFIG
fails=0 n=0
expect() { # expect WHAT RC TEXT COMMAND...
  what=$1 want_rc=$2 text=$3
  shift 3
  n=$((n + 1))
  out=$("$@" 2>&1)
  rc=$?
  if [ $rc -ne "$want_rc" ] || ! printf '%s' "$out" | grep -qF -- "$text"; then
    echo "FAIL: $what: exit $rc (wanted $want_rc), wanted '$text' in:"
    printf '%s\n' "$out" | tail -5
    fails=$((fails + 1))
  fi
}
expect "onyx-list from another folder" 0 "cpu:" "$list"
expect "onyx-generate from another folder" 0 "ids:" "$gen" "$model" --prompt-ids 72,105 --max-new-tokens 3 --quiet
# Random inputs do not make a decoder's mask valid: the summary line is what shows that
# the runtime loaded (a missing plugins.ini stops before it).
expect "onyx-run from another folder" 1 "0 passed, 1 failed" "$run" -q "$model/model.onnx"
expect "--config that does not exist" 2 "--config nowhere.ini: No such file" "$list" --config nowhere.ini
expect "ONYX_CONFIG that does not exist" 2 "ONYX_CONFIG /nowhere/plugins.ini" env ONYX_CONFIG=/nowhere/plugins.ini "$list"
expect "ONYX_CONFIG that does not exist (onyx-generate)" 2 "ONYX_CONFIG /nowhere/plugins.ini" \
  env ONYX_CONFIG=/nowhere/plugins.ini "$gen" "$model" --prompt-ids 1 --max-new-tokens 1
# ./plugins.ini comes before the one beside the binary: a broken one here is the one read.
printf '[provider.cpu]\npath = /nowhere/libonyx_cpu.so\n' >plugins.ini
expect "./plugins.ini first" 1 "/nowhere/libonyx_cpu.so" "$list"
rm plugins.ini
# A copy of the tool with no plugins.ini anywhere near it says where it looked.
cp "$list" "$work/bin/onyx-list"
expect "nothing found" 2 "looked for $work/elsewhere/plugins.ini (the working folder), $work/bin/plugins.ini, $work/plugins.ini, $work/etc/onyx/plugins.ini" \
  "$work/bin/onyx-list"
# An install prefix: <prefix>/bin/tool finds <prefix>/etc/onyx/plugins.ini.
mkdir -p "$work/etc/onyx"
cp "$(dirname "$list")/../plugins.ini" "$work/etc/onyx/plugins.ini"
expect "prefix/etc/onyx/plugins.ini" 0 "cpu:" "$work/bin/onyx-list"
echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
