#!/usr/bin/env bash
# run-all.sh SECONDS - runs every fuzz target for SECONDS each (see run.sh).
# Fails if any target crashed; prints one line per target.
set -uo pipefail
if [ $# -ne 1 ]; then
  echo "usage: fuzz/run-all.sh SECONDS" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
build=${WGML_FUZZ_BUILD:-$here/../build-fuzz}
status=0
for t in gguf llama2c model_load tokenizer; do
  if [ "$t" = tokenizer ] && [ ! -x "$build/fuzz/fuzz_tokenizer" ]; then
    echo "tokenizer: not built (WGML_FUZZ_TOKENIZER=OFF), skipped"
    continue
  fi
  "$here/run.sh" "$t" "$1" || status=1
done
exit $status
