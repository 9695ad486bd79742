#!/usr/bin/env bash
# test.sh - sets up, builds and runs every test: the release build's suite,
# the README's first command on a fresh clone with no ../shared beside it
# (scripts/check-fresh-clone.sh), the unit tests again under AddressSanitizer
# + UndefinedBehaviorSanitizer, the browser build in headless Chromium
# (tests/web/run.mjs), valgrind memcheck on a CPU generation run, and a short
# run of every fuzz target (docs/hardening.md). Each stage's time is printed
# as it ends and again in a table at the end.
#
# Tests read reference data from ../shared ($WGML_SHARED). Where it is, every
# test that needs it must find it (WGML_REQUIRE_SHARED); on a clone without it
# (not in CI) those tests are skipped and so are the browser tests and fuzzing,
# which are built on it.
#
# Shader caches start empty: Mesa's (lavapipe) and everything else under
# $XDG_CACHE_HOME point into a fresh temporary folder, and the pipeline cache
# that CTest gives the tests (<build>/test-cache, tests/CMakeLists.txt) is
# emptied, so that every run is as slow as the first run on a new machine (a
# warm cache hides compile time).
#
#   scripts/test.sh             everything (what CI runs)
#   WGML_SKIP_SANITIZE=1 ...    no ASan + UBSan suite
#   WGML_SKIP_FRESH=1 ...       no fresh-clone check
#   WGML_SKIP_WEB=1 ...         no browser tests
#   WGML_SKIP_VALGRIND=1 ...    no valgrind
#   WGML_SKIP_FUZZ=1 ...        no fuzzing
#   WGML_FUZZ_SECONDS=N ...     seconds per fuzz target (default 60)
#   WGML_WARM_CACHE=1 ...       keep the user's shader caches (quicker local runs)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
SECONDS=0

shared=${WGML_SHARED:-$PWD/../shared}
have_shared=1
if [ -d "$shared" ]; then
  export WGML_REQUIRE_SHARED=1
elif [ -n "${CI:-}" ]; then
  echo "test.sh: the shared test data $shared is missing (CI needs it)" >&2
  exit 1
else
  have_shared=0
  echo "== no shared test data at $shared: the tests that need it are skipped, and so are the browser tests and fuzzing"
fi

if [ -z "${WGML_WARM_CACHE:-}" ]; then
  cache_root=$(mktemp -d "${TMPDIR:-/tmp}/wgml-cache-XXXXXX")
  trap 'rm -rf "$cache_root"' EXIT
  export XDG_CACHE_HOME=$cache_root MESA_SHADER_CACHE_DIR=$cache_root/mesa_shader_cache
  echo "== shader caches start empty: $cache_root"
fi

# Stage timing: stage NAME starts a stage (ending the one before), stage_end ends the last.
stage_names=() stage_times=() stage_name="" stage_t0=0
stage_end() {
  if [ -n "$stage_name" ]; then
    stage_names+=("$stage_name")
    stage_times+=($((SECONDS - stage_t0)))
    echo "== $stage_name: $((SECONDS - stage_t0)) s"
  fi
  stage_name=""
}
stage() {
  stage_end
  stage_name=$1
  stage_t0=$SECONDS
  echo "== $1 [$SECONDS s]"
}

jobs=$(nproc)
# both software adapters were installed by setup: a missing one is a failure, not a skip
export WGML_REQUIRE_ADAPTERS=${WGML_REQUIRE_ADAPTERS:-swiftshader,llvmpipe}
# ctest over a build folder, then its five slowest tests (the longest should
# not near a third of its timeout, 600 s: a cold cache is slow enough).
run_ctest() {
  local log
  log=$(mktemp)
  local rc=0
  if [ -z "${WGML_WARM_CACHE:-}" ]; then rm -rf "$1/test-cache"; fi
  ctest --test-dir "$1" --output-on-failure -j "$jobs" | tee "$log" || rc=$?
  echo "slowest tests in $1:"
  sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .* \([0-9.]*\) sec$/\2 \1/p' "$log" | sort -rn | head -5 |
    awk '{printf "  %8.1f s  %s\n", $1, $2}'
  rm -f "$log"
  return $rc
}

# the official OpenAI client for tests/serve/openai.mjs (pinned; a CTest test)
if [ ! -d tests/serve/node_modules/openai ] || [ tests/serve/package-lock.json -nt tests/serve/node_modules/.package-lock.json ]; then
  npm ci --prefix tests/serve --no-audit --no-fund --loglevel=error
fi

stage "tests (release build)"
run_ctest build

if [ -z "${WGML_SKIP_FRESH:-}" ]; then
  stage "fresh clone with no ../shared: the README's first command, synth, verify"
  bash scripts/check-fresh-clone.sh
fi

if [ -z "${WGML_SKIP_SANITIZE:-}" ]; then
  stage "tests under ASan + UBSan"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DWGML_SANITIZE=ON >/dev/null
  cmake --build build-asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_ctest build-asan
fi

if [ -z "${WGML_SKIP_WEB:-}" ] && [ $have_shared = 1 ]; then
  stage "web tests (headless Chromium: WebGPU on SwiftShader, and the CPU wasm path)"
  # Debian's Chromium (never a downloaded one) and the pinned playwright-core.
  if ! command -v chromium >/dev/null; then
    SUDO=""; if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  fi
  if [ ! -d tests/web/node_modules/playwright-core ] || [ tests/web/package-lock.json -nt tests/web/node_modules/.package-lock.json ]; then
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix tests/web --no-audit --no-fund --loglevel=error
  fi
  # the page's espeak-ng (npm phonemizer, pinned), for speech from text
  if [ ! -d web/node_modules/phonemizer ] || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
    npm ci --prefix web --no-audit --no-fund --loglevel=error
  fi
  test -f web/dist/wgml.wasm || { echo "web/dist/wgml.wasm is missing (the build should have made it)"; exit 1; }
  node tests/web/run.mjs
fi

if [ -z "${WGML_SKIP_VALGRIND:-}" ]; then
  stage "valgrind memcheck (CPU backend)"
  bash scripts/valgrind.sh
fi

if [ -z "${WGML_SKIP_FUZZ:-}" ] && [ $have_shared = 1 ]; then
  secs=${WGML_FUZZ_SECONDS:-60}
  stage "fuzz smoke: every target for $secs s, $jobs at a time"
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DWGML_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DWGML_BUILD_TESTS=OFF >/dev/null
  serve=; grep -q '^build fuzz_serve:' build-fuzz/build.ninja && serve=fuzz_serve # it needs civetweb
  cmake --build build-fuzz --target fuzz_gguf fuzz_llama2c fuzz_model_load fuzz_pth fuzz_tokenizer fuzz_cli \
    fuzz_chat_template fuzz_g2p fuzz_kokoro_config fuzz_whisper_bin fuzz_tiktoken fuzz_grammar fuzz_json_schema fuzz_image fuzz_safetensors fuzz_hf fuzz_hf_tokenizer fuzz_hub $serve wgml_fuzz_seeds
  fuzz/make-corpus.sh
  WGML_FUZZ_PARALLEL=$jobs fuzz/run-all.sh "$secs"
fi
stage_end
echo "== stage times"
for i in "${!stage_names[@]}"; do printf '%6d s  %s\n' "${stage_times[$i]}" "${stage_names[$i]}"; done
echo "== all passed [$SECONDS s]"
