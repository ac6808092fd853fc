#!/bin/sh
# Makes the self-contained C dependency prefix the GPU machine needs (it has CMake and
# nvcc but no package registry): ../shared/tools/device-deps.sh's packages (protobuf-c,
# protoc-c, inih, cmocka) plus the libraries the project added since (jansson for
# genai_config.json and tokenizer.json, PCRE2 and utf8proc for the tokenizer).
# Run it here (it uses apt-get download), then carry the folder:
#
#   scripts/device-deps.sh .deps      # .deps is in .git/info/exclude
#   device run, carry [".deps"], command starting with: . .deps/env.sh && ...
set -eu
dest=$(realpath -m "${1:-.deps}")
here=$(cd "$(dirname "$0")" && pwd)
# The shared script downloads only into an empty folder, so this one fetches both lists.
base="libprotobuf-c1 libprotobuf-c-dev protobuf-c-compiler libprotoc32 libprotobuf32
      libinih1 libinih-dev libcmocka0 libcmocka-dev"
extra="libjansson4 libjansson-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
       libpcre2-dev libutf8proc2 libutf8proc-dev"
mkdir -p "$dest/debs"
(cd "$dest/debs" && for p in $base $extra; do
  ls "${p}"_*.deb >/dev/null 2>&1 || apt-get download "$p" >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 || true; apt-get download "$p"; }
done)
exec sh "$here/../../shared/tools/device-deps.sh" "$dest"
