#!/bin/sh
# onyx-generate checks its numbers strictly: NaN, infinities, negatives, fractions
# where an integer is wanted, trailing garbage and unknown options are refused
# (exit 2) with the option named; the config's search defaults are overridden by
# the options given, and the "search:" line says what was used.
#   cli_options.sh ONYX_GENERATE PLUGINS_INI MODEL_DIR
set -u
gen=$1 ini=$2 model=$3
fails=0 n=0
refuse() { # refuse OPTION VALUE EXPECTED-TEXT
  n=$((n + 1))
  out=$("$gen" "$model" --config "$ini" --prompt-ids 1,2,3 --max-new-tokens 2 --quiet "$1" "$2" 2>&1)
  rc=$?
  if [ $rc -ne 2 ] || ! printf '%s' "$out" | grep -qF -- "$3"; then
    echo "FAIL: $1 '$2' gave exit $rc: $out"
    fails=$((fails + 1))
  fi
}
for v in nan NaN inf -1 abc 1.5x "" " 2"; do refuse --temperature "$v" "--temperature wants"; done
for v in -3 1.5 x 7e "" 99999999999999999999; do refuse --top-k "$v" "--top-k wants"; done
for v in 0 1.5 nan -0.2 0.5.5; do refuse --top-p "$v" "--top-p wants"; done
for v in 0 -5 12x 1e3 ""; do refuse --max-new-tokens "$v" "--max-new-tokens wants"; done
for v in -1 abc 1.0 18446744073709551616; do refuse --seed "$v" "--seed wants"; done
for v in 0 -1 inf nan; do refuse --repetition-penalty "$v" "--repetition-penalty wants"; done
for v in -2 "1,,2" "1," x; do refuse --eos "$v" "--eos wants"; done
for v in 1,-2 "" a,b "1, 2"; do
  n=$((n + 1))
  out=$("$gen" "$model" --config "$ini" --prompt-ids "$v" 2>&1)
  [ $? -eq 2 ] && printf '%s' "$out" | grep -qF -- "--prompt-ids wants" ||
    { echo "FAIL: --prompt-ids '$v': $out"; fails=$((fails + 1)); }
done
refuse --kv-growth sideways "--kv-growth wants in-place or copy"
refuse --graphs maybe "--graphs wants on or off"
refuse --frobnicate 1 "unknown option --frobnicate"

check() { # check WHAT EXPECTED-TEXT-IN-OUTPUT ARGS...
  what=$1 want=$2
  shift 2
  n=$((n + 1))
  out=$("$gen" "$model" --config "$ini" --quiet "$@" 2>&1)
  printf '%s' "$out" | grep -qF -- "$want" || { echo "FAIL: $what: wanted '$want' in: $out"; fails=$((fails + 1)); }
}
check "config defaults (greedy, context max_length)" "search: greedy; max_length 1024 (3 prompt + up to 1021 new)" \
  --prompt-ids 72,105,33 --eos 10
check "sampling from the options" "search: sampling, temperature 0.7, top_k 5, top_p 0.9, seed 3; max_length 7" \
  --prompt-ids 72,105,33 --max-new-tokens 4 --temperature 0.7 --top-k 5 --top-p 0.9 --seed 3
check "--greedy wins over knobs" "search: greedy; max_length 7" \
  --prompt-ids 72,105,33 --max-new-tokens 4 --temperature 0.7 --greedy
check "penalty and eos list" "repetition_penalty 1.3; eos 10,13" \
  --prompt-ids 72,105,33 --max-new-tokens 4 --repetition-penalty 1.3 --eos 10,13
check "beyond the context" "search.max_length: 1031 is outside 1..1024" \
  --prompt-ids 72,105,33,4,5,6,7 --max-new-tokens 1024
check "an id outside the vocabulary" "id 256 at position 1 is outside the vocabulary" \
  --prompt-ids 72,256
n=$((n + 1))
a=$("$gen" "$model" --config "$ini" --quiet --prompt-ids 72,105 --max-new-tokens 12 --do-sample --seed 5 | grep '^ids:')
b=$("$gen" "$model" --config "$ini" --quiet --prompt-ids 72,105 --max-new-tokens 12 --do-sample --seed 5 | grep '^ids:')
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAIL: one seed gave '$a' and '$b'"; fails=$((fails + 1)); }
echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
