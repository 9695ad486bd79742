#!/usr/bin/env bash
# setup.sh - installs what wgml needs on Debian bookworm and builds it into build/.
#
#   scripts/setup.sh            packages + WebGPU dependencies + release build
#                               (which also builds the browser build, web/dist/wgml.wasm)
#   WGML_BUILD_TYPE=Debug ...   another CMake build type
#
# Safe to re-run: installed packages and downloaded files are kept.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# Debian packages for building and testing the C code (zlib1g-dev: Whisper's compression-ratio
# check in libwgml; libsndfile1-dev: audio files (WAV, FLAC, OGG, MP3, ...) for `wgml transcribe` and
# the server's /v1/audio/transcriptions, linked by the CLI only; libjpeg-dev (libjpeg-turbo),
# libpng-dev: JPEG and PNG files for the CLI's and the server's image inputs, linked by the CLI only;
# python3-numpy: the float64 BERT reference in tests/reference; python3-pil: Pillow, which the image
# preprocessing test (tests/test_image_prep.py) compares src/image's resize with, and
# tests/test_image_file.py the image file reader; curl: the SSE framing test of
# tests/test_serve.py; python3-pip, python3-setuptools, python3-wheel: `pip install ./python`, the
# Python package over build/libwgml.so, offline (docs/python.md)), and for the browser
# build: wasi-libc and compiler-rt for clang's wasm32-wasi target, binaryen's
# wasm-opt for the Asyncify variant (docs/web.md); libcurl4-openssl-dev and libssl-dev: models by
# URL and Hugging Face name in libwgml (src/net: HTTP through libcurl, SHA-256 through libcrypto).
need=()
for p in build-essential cmake ninja-build pkg-config clang llvm lld libcmocka-dev libjson-c-dev libcivetweb-dev libedit-dev valgrind \
         zlib1g-dev libsndfile1-dev libjpeg-dev libpng-dev \
         wasi-libc libclang-rt-14-dev-wasm32 binaryen python3-numpy python3-pil curl \
         python3-pip python3-setuptools python3-wheel libcurl4-openssl-dev libssl-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Dawn, its header, and the software WebGPU adapters (SwiftShader, lavapipe).
if [ -x scripts/setup-deps.sh ]; then
  bash scripts/setup-deps.sh
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${WGML_BUILD_TYPE:-Release}" >/dev/null
cmake --build build

# The web page's G2P for speech: espeak-ng compiled to WebAssembly (npm phonemizer,
# GPL-3.0 inside, pinned in web/package-lock.json), loaded at run time, never linked.
if [ ! -d web/node_modules/phonemizer ] || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
  npm ci --prefix web --no-audit --no-fund --loglevel=error
fi
