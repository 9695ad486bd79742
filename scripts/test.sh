#!/usr/bin/env bash
# test.sh - sets up, builds and runs every test: the release build's suite,
# then the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer,
# then the browser build in headless Chromium (tests/web/run.mjs).
#
#   scripts/test.sh             everything (what CI runs)
#   WGML_SKIP_SANITIZE=1 ...    without the sanitizer builds
#   WGML_SKIP_WEB=1 ...         without the browser tests
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

jobs=$(nproc)
# both software adapters were installed by setup: a missing one is a failure, not a skip
export WGML_REQUIRE_ADAPTERS=${WGML_REQUIRE_ADAPTERS:-swiftshader,llvmpipe}
echo "== tests (release build)"
ctest --test-dir build --output-on-failure -j "$jobs"

if [ -z "${WGML_SKIP_SANITIZE:-}" ]; then
  echo "== tests under ASan + UBSan"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DWGML_SANITIZE=ON >/dev/null
  cmake --build build-asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs"
fi

if [ -z "${WGML_SKIP_WEB:-}" ]; then
  echo "== web tests (headless Chromium: WebGPU on SwiftShader, and the CPU wasm path)"
  # Debian's Chromium (never a downloaded one) and the pinned playwright-core.
  if ! command -v chromium >/dev/null; then
    SUDO=""; if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  fi
  if [ ! -d tests/web/node_modules/playwright-core ] || [ tests/web/package-lock.json -nt tests/web/node_modules/.package-lock.json ]; then
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix tests/web --no-audit --no-fund --loglevel=error
  fi
  test -f web/dist/wgml.wasm || { echo "web/dist/wgml.wasm is missing (the build should have made it)"; exit 1; }
  node tests/web/run.mjs
fi
