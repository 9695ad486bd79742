#!/usr/bin/env bash
# run-all.sh SECONDS - runs every fuzz target for SECONDS each (see run.sh).
# Fails if any target crashed; prints one line per target, in target order.
# Targets run WGML_FUZZ_PARALLEL at a time (default: the number of cores, at
# most 4): each fuzzer is one process on one core, so on 2 cores the four
# targets take 2 x SECONDS.
set -uo pipefail
if [ $# -ne 1 ]; then
  echo "usage: fuzz/run-all.sh SECONDS" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
build=${WGML_FUZZ_BUILD:-$here/../build-fuzz}
par=${WGML_FUZZ_PARALLEL:-$(nproc)}
[ "$par" -gt 4 ] && par=4
[ "$par" -lt 1 ] && par=1
targets=()
for t in gguf llama2c model_load pth tokenizer chat_template g2p kokoro_config cli serve; do
  if [ "$t" = tokenizer ] && [ ! -x "$build/fuzz/fuzz_tokenizer" ]; then
    echo "tokenizer: not built (WGML_FUZZ_TOKENIZER=OFF), skipped"
    continue
  fi
  if [ "$t" = serve ] && [ ! -x "$build/fuzz/fuzz_serve" ]; then
    echo "serve: not built (no civetweb: apt install libcivetweb-dev), skipped"
    continue
  fi
  targets+=("$t")
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
pids=()
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  "$here/run.sh" "$t" "$1" >"$out/$i.out" 2>"$out/$i.err" &
  pids[$i]=$!
  # keep at most $par running
  while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do sleep 1; done
done
status=0
for i in "${!targets[@]}"; do
  wait "${pids[$i]}" || status=1
  cat "$out/$i.err" >&2
  cat "$out/$i.out"
done
exit $status
