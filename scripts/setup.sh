#!/usr/bin/env bash
# Installs what Onyx needs to build and test on Debian/Ubuntu: the C toolchain and
# libraries from apt, and the Python reference packages (onnx, onnxruntime, numpy,
# tokenizers) into .venv for the parity tests. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# libjansson-dev: the JSON parser genai/ reads genai_config.json with (genai/CMakeLists.txt says why).
# libpcre2-dev, libutf8proc-dev: the tokenizer's regexes and Unicode normalization (docs/tokenizer.md).
# clang, libclang-rt-dev: the tokenizer loader's libFuzzer target (.ci/run runs it for a while).
pkgs="build-essential cmake pkg-config protobuf-c-compiler libprotobuf-c-dev libinih-dev libcmocka-dev
      libjansson-dev libpcre2-dev libutf8proc-dev clang libclang-rt-dev"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r scripts/requirements.txt
