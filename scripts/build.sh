#!/usr/bin/env bash
# Configures and builds Onyx into ./build (Release, warnings as errors). Extra
# arguments go to CMake's configure step (e.g. -DONYX_SANITIZE=address,undefined).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ONYX_BUILD_DIR:-build}
# The parity tests use the Python references that scripts/setup.sh puts in .venv.
python_args=()
[ -x .venv/bin/python ] && python_args=(-DPython3_EXECUTABLE="$(pwd)/.venv/bin/python")
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=${ONYX_BUILD_TYPE:-Release} -DONYX_WERROR=ON \
  -DONYX_SHARED_DIR="$(cd .. && pwd)/shared" "${python_args[@]}" "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
