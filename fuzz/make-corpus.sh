#!/usr/bin/env bash
# make-corpus.sh - fills fuzz/corpus-run/<target>/ (gitignored) with seed inputs.
#
#   fuzz/make-corpus.sh            (after building with -DWGML_FUZZ=ON into build-fuzz)
#
# The seeds are written by wgml_fuzz_seeds (fuzz/make_seeds.c) from ../shared:
# small synthetic GGUFs and models, the shared vocabularies cut down, tiny
# llama2.c checkpoint + tokenizer pairs, the tokenizer test strings. Inputs the
# fuzzers found earlier stay: the corpus only grows.
# Environment: WGML_FUZZ_BUILD (default build-fuzz), WGML_SHARED (default ../shared).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${WGML_FUZZ_BUILD:-$root/build-fuzz}
shared=${WGML_SHARED:-$root/../shared}
seeds=$build/fuzz/wgml_fuzz_seeds
if [ ! -x "$seeds" ]; then
  echo "make-corpus.sh: $seeds not found; build first:" >&2
  echo "  cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DWGML_FUZZ=ON && ninja -C build-fuzz" >&2
  exit 1
fi
mkdir -p "$root/fuzz/corpus-run"
"$seeds" "$shared" "$root/fuzz/corpus-run"
# Regression inputs (crashes found earlier, now fixed) seed their targets too.
for t in gguf llama2c model_load tokenizer; do
  if [ -d "$root/tests/data/fuzz/$t" ]; then
    cp "$root/tests/data/fuzz/$t"/* "$root/fuzz/corpus-run/$t/" 2>/dev/null || true
  fi
done
for t in gguf llama2c model_load tokenizer; do
  printf '%-12s %5d inputs\n' "$t" "$(find "$root/fuzz/corpus-run/$t" -type f | wc -l)"
done
