#!/usr/bin/env bash
# test.sh - sets up, builds and runs every test: the release build's suite,
# the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer,
# the browser build in headless Chromium (tests/web/run.mjs), valgrind
# memcheck on a CPU generation run, and a short run of every fuzz target
# (docs/hardening.md).
#
#   scripts/test.sh             everything (what CI runs)
#   WGML_SKIP_SANITIZE=1 ...    no ASan + UBSan suite
#   WGML_SKIP_WEB=1 ...         no browser tests
#   WGML_SKIP_VALGRIND=1 ...    no valgrind
#   WGML_SKIP_FUZZ=1 ...        no fuzzing
#   WGML_FUZZ_SECONDS=N ...     seconds per fuzz target (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
SECONDS=0

jobs=$(nproc)
# both software adapters were installed by setup: a missing one is a failure, not a skip
export WGML_REQUIRE_ADAPTERS=${WGML_REQUIRE_ADAPTERS:-swiftshader,llvmpipe}
echo "== tests (release build) [$SECONDS s]"
ctest --test-dir build --output-on-failure -j "$jobs"

if [ -z "${WGML_SKIP_SANITIZE:-}" ]; then
  echo "== tests under ASan + UBSan [$SECONDS s]"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DWGML_SANITIZE=ON >/dev/null
  cmake --build build-asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs"
fi

if [ -z "${WGML_SKIP_WEB:-}" ]; then
  echo "== web tests (headless Chromium: WebGPU on SwiftShader, and the CPU wasm path) [$SECONDS s]"
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

if [ -z "${WGML_SKIP_VALGRIND:-}" ]; then
  echo "== valgrind memcheck (CPU backend) [$SECONDS s]"
  bash scripts/valgrind.sh
fi

if [ -z "${WGML_SKIP_FUZZ:-}" ]; then
  secs=${WGML_FUZZ_SECONDS:-60}
  echo "== fuzz smoke: every target for $secs s, $jobs at a time [$SECONDS s]"
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DWGML_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DWGML_BUILD_TESTS=OFF >/dev/null
  cmake --build build-fuzz --target fuzz_gguf fuzz_llama2c fuzz_model_load fuzz_tokenizer fuzz_cli wgml_fuzz_seeds
  fuzz/make-corpus.sh
  WGML_FUZZ_PARALLEL=$jobs fuzz/run-all.sh "$secs"
fi
echo "== all passed [$SECONDS s]"
