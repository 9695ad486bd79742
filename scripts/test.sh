#!/usr/bin/env bash
# test.sh - sets up, builds and runs every test: the release build's suite,
# then the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
#
#   scripts/test.sh             everything (what CI runs)
#   WGML_SKIP_SANITIZE=1 ...    only the release build's suite
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
