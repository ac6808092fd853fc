#!/bin/sh
# Decode steps whose attention mask spans the whole KV view (zeros after the live
# tokens, as device graphs need) give the same tokens as a mask of the live length,
# for in-place and copy growth.
set -u
gen=$1 ini=$2 model=$3
prompt="The GNU General Public License is"
ref=$("$gen" "$model" --config "$ini" --prompt "$prompt" --max-new-tokens 150 --quiet | grep '^ids:')
[ -n "$ref" ] || { echo "FAIL: no tokens from the reference run"; exit 1; }
fails=0
for growth in in-place copy; do
  got=$("$gen" "$model" --config "$ini" --prompt "$prompt" --max-new-tokens 150 --quiet \
    --fixed-mask --kv-growth "$growth" | grep '^ids:')
  if [ "$got" = "$ref" ]; then
    echo "ok: --fixed-mask --kv-growth $growth"
  else
    echo "FAIL: --fixed-mask --kv-growth $growth changed the tokens"
    echo "  want $ref"
    echo "  got  $got"
    fails=$((fails + 1))
  fi
done
echo "$((2 - fails)) passed, $fails failed"
[ $fails -eq 0 ]
