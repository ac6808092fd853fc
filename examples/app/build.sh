#!/bin/sh
# Builds onyx-example-app with pkg-config alone: PKG_CONFIG_PATH names the prefix's
# lib/pkgconfig when it is not a system prefix. Output: ./onyx-example-app, or $1.
set -eu
out=$(realpath -m "${1:-onyx-example-app}")
cd "$(dirname "$0")"
pc=${PKG_CONFIG:-pkg-config}
ini=$($pc --variable=plugins_ini onyx)
${CC:-cc} -std=c11 -Wall -Wextra -Wpedantic ${CFLAGS:-} -o "$out" main.c \
  -DONYX_EXAMPLE_PLUGINS_INI="\"$ini\"" $($pc --cflags --libs onyx) \
  -Wl,-rpath,"$($pc --variable=libdir onyx)"
