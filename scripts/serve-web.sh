#!/usr/bin/env bash
# serve-web.sh - try wgml in the browser: builds web/dist/wgml.wasm if it is
# missing, installs the page's espeak-ng (web/node_modules/phonemizer) if it is
# missing, then serves the repository root and a models folder on 127.0.0.1.
#
#   scripts/serve-web.sh                       http://127.0.0.1:8080/web/
#   scripts/serve-web.sh --port 9000 --models ~/models
#
# The page's default model URL is ../models/stories260K.gguf: the --models
# folder, by default the repository's models/ with the model that ships with
# wgml, so the page works on a fresh clone. Any static file server over the
# repository root works as well (it has models/ at /models/ too).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f web/dist/wgml.wasm ]; then
  echo "serve-web: building web/dist/wgml.wasm"
  cmake -S . -B build-wasm -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/wasm32-wasi.cmake >/dev/null
  cmake --build build-wasm
fi
if [ ! -d web/node_modules/phonemizer ]; then
  # espeak-ng for speech from text in the page (npm phonemizer, pinned; docs/web.md)
  if command -v npm >/dev/null; then
    echo "serve-web: installing the page's espeak-ng (npm ci --prefix web)"
    npm ci --prefix web --no-audit --no-fund --loglevel=error
  else
    echo "serve-web: no npm: speech from text will not work in the page (phonemes will); see docs/web.md"
  fi
fi
exec node scripts/serve-web.mjs "$@"
