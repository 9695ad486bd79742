#!/usr/bin/env bash
# run-all.sh SECONDS - runs every fuzz target for SECONDS each (see run.sh).
# Fails if any target crashed; prints one line per target, in target order.
# Targets run WGML_FUZZ_PARALLEL at a time (default: the number of cores, at
# most 4): each fuzzer is one process on one core, so on 2 cores the four
# targets take 2 x SECONDS. whisper_bin, tiktoken and safetensors (small
# readers) run a quarter of SECONDS (at least 5) each, to keep the smoke
# short; so do grammar, json_schema, hf, hf_tokenizer and hub.
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
for t in gguf llama2c model_load pth tokenizer chat_template g2p kokoro_config cli serve whisper_bin tiktoken grammar json_schema safetensors hf hf_tokenizer hub image; do
  if [ "$t" = tokenizer ] && [ ! -x "$build/fuzz/fuzz_tokenizer" ]; then
    echo "tokenizer: not built (WGML_FUZZ_TOKENIZER=OFF), skipped"
    continue
  fi
  if [ "$t" = serve ] && [ ! -x "$build/fuzz/fuzz_serve" ]; then
    echo "serve: not built (no civetweb: apt install libcivetweb-dev), skipped"
    continue
  fi
  if { [ "$t" = whisper_bin ] || [ "$t" = tiktoken ] || [ "$t" = grammar ] || [ "$t" = json_schema ] || [ "$t" = safetensors ] || [ "$t" = hf ] || [ "$t" = hf_tokenizer ] || [ "$t" = hub ] || [ "$t" = image ]; } && [ ! -x "$build/fuzz/fuzz_$t" ]; then
    echo "$t: not built (cmake --build build-fuzz --target fuzz_$t), skipped"
    continue
  fi
  targets+=("$t")
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
pids=()
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  secs=$1
  if [ "$t" = whisper_bin ] || [ "$t" = tiktoken ] || [ "$t" = grammar ] || [ "$t" = json_schema ] || [ "$t" = safetensors ] || [ "$t" = hf ] || [ "$t" = hf_tokenizer ] || [ "$t" = hub ]; then secs=$(( $1 / 4 > 5 ? $1 / 4 : 5 )); fi
  "$here/run.sh" "$t" "$secs" >"$out/$i.out" 2>"$out/$i.err" &
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
