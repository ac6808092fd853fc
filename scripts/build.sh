#!/usr/bin/env bash
# Configures and builds Onyx into ./build (Release, warnings as errors). Extra
# arguments go to CMake's configure step (e.g. -DONYX_SANITIZE=address,undefined).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ONYX_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=${ONYX_BUILD_TYPE:-Release} -DONYX_WERROR=ON \
  -DONYX_SHARED_DIR="$(cd .. && pwd)/shared" "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
