#!/usr/bin/env bash
# sdk_test.sh SOURCE BUILD CMAKE CC PKG_CONFIG "SANITIZER FLAGS" — see CMakeLists.txt.
set -euo pipefail
src=$1 build=$2 cmake=$3 cc=$4 pkgconfig=$5 flags=${6:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/onyx-sdk.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
log=$work/log
unset ONYX_CONFIG ONYX_PROVIDER_PATH

step() { echo "== $*"; }
# expect WHAT PATTERN COMMAND...: runs it, fails unless it succeeds and prints PATTERN.
expect() {
  local what=$1 pattern=$2
  shift 2
  local rc=0
  "$@" >"$log" 2>&1 || rc=$?
  if [ $rc != 0 ]; then
    echo "FAIL: $what: exit status $rc from $*"; cat "$log"; exit 1
  fi
  if [ -n "$pattern" ] && ! grep -qE -- "$pattern" "$log"; then
    echo "FAIL: $what: no '$pattern' in the output of $*"; cat "$log"; exit 1
  fi
  echo "ok: $what"
}
# refuse WHAT PATTERN COMMAND...: it must fail and say PATTERN.
refuse() {
  local what=$1 pattern=$2
  shift 2
  if "$@" >"$log" 2>&1; then
    echo "FAIL: $what: $* succeeded"; cat "$log"; exit 1
  fi
  if ! grep -qE -- "$pattern" "$log"; then
    echo "FAIL: $what: no '$pattern' in the output of $*"; cat "$log"; exit 1
  fi
  echo "ok: $what"
}

step "install into $prefix"
expect "cmake --install" "plugins.ini" "$cmake" --install "$build" --prefix "$prefix"
for f in include/onyx/onyx.h include/onyx/onyx_abi.h lib/cmake/Onyx/OnyxConfig.cmake \
         etc/onyx/plugins.ini bin/onyx-run bin/onyx-list bin/onyx-check-provider; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $prefix/$f was not installed"; exit 1; }
done
soname=$(readelf -d "$prefix"/lib*/libonyx.so | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
case $soname in libonyx.so.[0-9]*) echo "ok: SONAME $soname" ;;
  *) echo "FAIL: libonyx.so has SONAME '$soname'"; exit 1 ;; esac
libdir=$(realpath "$(PKG_CONFIG_PATH=$(echo "$prefix"/lib*/pkgconfig) "$pkgconfig" --variable=libdir onyx)")

step "the examples, copied out of the tree, built against the prefix alone"
cp -r "$src/examples" "$work/src"
configure() { # configure NAME: the example's own CMake project
  "$cmake" -S "$work/src/$1" -B "$work/$1" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$flags -Werror" -DCMAKE_BUILD_TYPE=Debug
}
for ex in app provider; do
  expect "configure examples/$ex" "Generating done" configure $ex
  expect "build examples/$ex" "Built target" "$cmake" --build "$work/$ex"
done
exports=$(nm -D --defined-only "$work/provider/libonyx_example.so" | awk '$2 ~ /^[TDBR]$/' | wc -l)
[ "$exports" = 1 ] || { echo "FAIL: libonyx_example.so exports $exports symbols"; exit 1; }
echo "ok: the example provider exports one symbol"
expect "onyx-check-provider on the example" "summary: .* 0 failed" \
  "$prefix/bin/onyx-check-provider" "$work/provider/libonyx_example.so"
grep -q "workspace .*refused one byte short" "$log" || { echo "FAIL: no workspace check"; cat "$log"; exit 1; }

step "the app, through the prefix's plugins.ini (find_package build, then pkg-config build)"
expect "app on the CPU" "^output 'y' \[2,3\]" "$work/app/onyx-example-app" "$work/src/app/model.onnx"
cp "$log" "$work/app.out"
expect "pkg-config build" "" env PKG_CONFIG_PATH="$libdir/pkgconfig" PKG_CONFIG="$pkgconfig" \
  CC="$cc" CFLAGS="$flags -Werror" sh "$work/src/app/build.sh" "$work/pc-app"
expect "pkg-config app" "^output 'y' \[2,3\]" "$work/pc-app" "$work/src/app/model.onnx"
cmp -s "$log" "$work/app.out" || { echo "FAIL: the two builds of the app differ"; exit 1; }

step "the example provider through a plugins.ini"
cat >"$work/custom.ini" <<INI
[provider.example]
path = provider/libonyx_example.so
[provider.cpu]
path = $libdir/onyx/libonyx_cpu.so
INI
model=$work/src/provider/model
expect "onyx-run --config: the example's model" "-> example" \
  "$prefix/bin/onyx-run" --config "$work/custom.ini" --placement "$model"
grep -q "1 passed, 0 failed" "$log" || { echo "FAIL: onyx-run"; cat "$log"; exit 1; }
expect "the app with the example provider" "^output 'y' \[3,8\]" \
  "$work/app/onyx-example-app" "$model/model.onnx" "$work/custom.ini"

step "drop-in: the example installed into the prefix (library + providers.d fragment)"
expect "install the example" "example.ini" "$cmake" --install "$work/provider" --prefix "$prefix"
cd "$work" # no plugins.ini here: the tools find the prefix's
expect "onyx-list finds the fragment" "example +loaded +providers.d .*providers.d/example.ini:2" \
  "$prefix/bin/onyx-list"
expect "onyx-run through the fragment" "1 passed, 0 failed" "$prefix/bin/onyx-run" "$model"
printf '[onyx]\nstrict = true\n' >"$prefix/etc/onyx/providers.d/bad.ini"
refuse "a malformed fragment is named with its line" "providers.d/bad.ini:1: \[onyx\] belongs" \
  "$prefix/bin/onyx-list"
rm "$prefix/etc/onyx/providers.d/bad.ini" "$prefix/etc/onyx/providers.d/example.ini"

step "drop-in: ONYX_PROVIDER_PATH"
expect "a folder with a bare libonyx_example.so" "example +loaded +ONYX_PROVIDER_PATH" \
  env ONYX_PROVIDER_PATH="$work/provider" "$prefix/bin/onyx-list"
expect "onyx-run through ONYX_PROVIDER_PATH" "1 passed, 0 failed" \
  env ONYX_PROVIDER_PATH="$work/provider" "$prefix/bin/onyx-run" "$model"
expect "a name listed already is shadowed, with the reason" "the name 'cpu' is taken by" \
  env ONYX_PROVIDER_PATH="$work/nowhere:$libdir/onyx" "$prefix/bin/onyx-list"
grep -qE "example +loaded +ONYX_PROVIDER_PATH" "$log" ||
  { echo "FAIL: example not loaded from $libdir/onyx"; cat "$log"; exit 1; }
echo "sdk: all passed"
