#!/usr/bin/env bash
# Builds (scripts/build.sh) and runs every test with CTest. Extra arguments go to
# the build's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh "$@"
export PATH="$(pwd)/.venv/bin:$PATH"
ctest --test-dir "${ONYX_BUILD_DIR:-build}" --output-on-failure -j"$(nproc)"
