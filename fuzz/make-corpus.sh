#!/usr/bin/env bash
# make-corpus.sh - fills fuzz/corpus-run/<target>/ (gitignored) with seed inputs.
#
#   fuzz/make-corpus.sh            (after building with -DWGML_FUZZ=ON into build-fuzz)
#
# The seeds are written by wgml_fuzz_seeds (fuzz/make_seeds.c) from ../shared:
# small synthetic GGUFs and models, the shared vocabularies cut down, tiny
# llama2.c checkpoint + tokenizer pairs, the tokenizer test strings, small
# PyTorch checkpoints and bare pickles (fuzz_pth). Inputs the
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
# fuzz_cli: command lines (arguments one per line, then NUL and a file's bytes;
# see fuzz/fuzz_cli.c), some with a small model or prompt as the file.
cli=$root/fuzz/corpus-run/cli
mkdir -p "$cli"
seed() { printf '%b' "$1" > "$cli/seed-$2"; }
seed 'run\n-m\n@model\n-p\nOnce upon a time\n-n\n8' run-prompt
seed 'run\n-m\n@model\n-f\n@file\n-n\n4\n--temp\n0.8\n--top-k\n40\n--seed\n7\0Once upon a time, there was' run-file
seed 'run\n-m\n@file\n-n\n2\0GGUF\x03\0\0\0' run-bad-model
seed 'run\n-m\n@model\n-p\n\xff\xfe bad utf8\n-n\n2\n--no-bos' run-utf8
seed 'info\n@model' info
seed 'info\n@file\n--tensors\0GGUF\x03\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0' info-file
seed 'tokenize\n-m\n@vocab\n--bos\nHello world' tokenize
seed 'tokenize\n-m\n@model\n-f\n@file\0text from a file' tokenize-file
seed 'convert\nllama2c\n@ckpt\n@tok\n-o\n@out' convert
seed 'convert\nllama2c\n@file\n@tok\n-o\n@out\0\x08\0\0\0' convert-bad
seed 'quantize\n@model\n@out\nq8_0' quantize
seed 'quantize\n@file\n@out\nQ4_K_M\0GGUF' quantize-bad
# fuzz_chat_template: the shared chat templates, each followed by a NUL and a
# conversation (see fuzz/fuzz_chat_template.c), and a few small language samples.
ct=$root/fuzz/corpus-run/chat_template
mkdir -p "$ct"
conv='[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]'
for f in "$shared"/chat/templates/*.jinja; do
  [ -f "$f" ] || continue
  { cat "$f"; printf '\0%s' "$conv"; } > "$ct/seed-$(basename "$f" .jinja)"
done
printf '%s' "{% for m in messages %}{{ loop.index }}{{ m.role | upper }}{% if not loop.last %}, {% endif %}{% endfor %}" > "$ct/seed-loop"
printf '%s' "{% set ns = namespace(a=[]) %}{% macro f(x) %}{{ x | tojson(indent=2) }}{% endmacro %}{{ f(messages[1:]) }}{{ 'a b'.split() }}" > "$ct/seed-macro"
printf '%s' "{%- raw -%} {{ x }} {%- endraw %}{# c #}{{ (1, 2)[::-1] ~ 2 ** 3 // 2 }}{{ 'x' if true else y }}" > "$ct/seed-misc"
# fuzz_kokoro_config: the shared v1.0 and kokoro-tiny config.json files.
kc=$root/fuzz/corpus-run/kokoro_config
mkdir -p "$kc"
for f in "$shared"/kokoro/config-*.json; do
  [ -f "$f" ] && cp "$f" "$kc/seed-$(basename "$f")"
done
# Regression inputs (crashes found earlier, now fixed) seed their targets too.
for t in gguf llama2c model_load pth tokenizer chat_template kokoro_config cli; do
  if [ -d "$root/tests/data/fuzz/$t" ]; then
    cp "$root/tests/data/fuzz/$t"/* "$root/fuzz/corpus-run/$t/" 2>/dev/null || true
  fi
done
for t in gguf llama2c model_load pth tokenizer chat_template kokoro_config cli; do
  printf '%-12s %5d inputs\n' "$t" "$(find "$root/fuzz/corpus-run/$t" -type f | wc -l)"
done
